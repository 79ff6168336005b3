/* plexus-run - start N local ranks of a job with the variables torchrun sets
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * prefix every output line with its rank, stop the others when one fails,
 * and exit with the first failure's status. Every job gets a secret
 * (PLEXUS_JOB_SECRET, 32 random bytes in hex, unless one is set already)
 * so its store and transport connections are authenticated; --no-auth
 * starts the ranks without one (torch-compatible). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 256

struct rank {
    pid_t pid;
    int out;          /* read end of its stdout+stderr pipe */
    char line[4096];
    size_t n;
    int done, status;
};

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd); /* a small race with other programs; the store reports a clear error if it is lost */
    return ntohs(sa.sin_port);
}

/* A fresh job secret: 32 bytes from getrandom, as 64 hex digits. */
static int make_secret(char out[65])
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t k = getrandom(raw + got, sizeof raw - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof raw);
    return 0;
}

static void flush_line(int r, struct rank *k, int final)
{
    char *start = k->line, *nl;
    while ((nl = memchr(start, '\n', k->n - (size_t)(start - k->line)))) {
        printf("[rank %d] %.*s\n", r, (int)(nl - start), start);
        start = nl + 1;
    }
    size_t rest = k->n - (size_t)(start - k->line);
    if (final && rest) {
        printf("[rank %d] %.*s\n", r, (int)rest, start);
        rest = 0;
    } else if (rest == sizeof k->line) { /* a very long line: print what we have */
        printf("[rank %d] %.*s\n", r, (int)rest, start);
        rest = 0;
    }
    memmove(k->line, start, rest);
    k->n = rest;
    fflush(stdout);
}

static void describe(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "stopped");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: plexus-run -n N [--backend NAME] [--timeout SECONDS] [--port PORT] [--no-auth]\n"
               "                  [--] PROGRAM [ARGS...]\n"
               "Starts N ranks of PROGRAM on this machine with RANK, WORLD_SIZE, LOCAL_RANK,\n"
               "LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT (what torchrun sets;\n"
               "--port picks it), and PLEXUS_BACKEND=NAME with --backend. Each job gets a random\n"
               "PLEXUS_JOB_SECRET (unless one is set) so its store and tcp connections authenticate;\n"
               "--no-auth starts the ranks without one (unauthenticated, torch-compatible).\n"
               "Output lines get a [rank i] prefix. When a rank fails the others are stopped\n"
               "(SIGTERM, then SIGKILL after 5 s); the exit status is the first failing rank's\n"
               "(128+signal if it was killed), or 124 on --timeout.\n");
}

int main(int argc, char **argv)
{
    int n = 0, i = 1, timeout_s = 0, port = 0, no_auth = 0;
    const char *backend = NULL;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout_s = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-auth"))
            no_auth = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else
            break;
    }
    if (n < 1 || n > MAX_RANKS || i >= argc) {
        usage(stderr);
        return 2;
    }
    if (port <= 0 && (port = free_port()) < 0) {
        perror("plexus-run: cannot find a free port");
        return 2;
    }
    /* The secret goes to the ranks through their environment, which only
     * the same user (and root) can read. */
    const char *have = getenv("PLEXUS_JOB_SECRET");
    char secret[65];
    if (no_auth) {
        unsetenv("PLEXUS_JOB_SECRET");
    } else if (!have || !*have) {
        if (make_secret(secret)) {
            perror("plexus-run: cannot read random bytes for the job secret");
            return 2;
        }
        setenv("PLEXUS_JOB_SECRET", secret, 1);
        memset(secret, 0, sizeof secret);
    }
    static struct rank ranks[MAX_RANKS];
    char v[32];
    for (int r = 0; r < n; r++) {
        int fds[2];
        if (pipe(fds)) {
            perror("plexus-run: pipe");
            return 2;
        }
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            dup2(fds[1], 2);
            close(fds[0]);
            close(fds[1]);
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", n);
            setenv("WORLD_SIZE", v, 1);
            setenv("LOCAL_WORLD_SIZE", v, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(v, sizeof v, "%d", port);
            setenv("MASTER_PORT", v, 1);
            if (backend)
                setenv("PLEXUS_BACKEND", backend, 1);
            execvp(argv[i], argv + i);
            fprintf(stderr, "plexus-run: cannot start %s: %s\n", argv[i], strerror(errno));
            _exit(127);
        }
        close(fds[1]);
        if (pid < 0) {
            perror("plexus-run: fork");
            return 2;
        }
        ranks[r].pid = pid;
        ranks[r].out = fds[0];
    }
    int first_fail = -1, result = 0, left = n;
    time_t start = time(NULL), term_at = 0;
    struct pollfd pf[MAX_RANKS];
    while (left > 0) {
        for (int r = 0; r < n; r++)
            pf[r] = (struct pollfd){ranks[r].out, POLLIN, 0};
        poll(pf, (nfds_t)n, 100);
        for (int r = 0; r < n; r++) {
            if (ranks[r].out < 0 || !(pf[r].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t k = read(ranks[r].out, ranks[r].line + ranks[r].n, sizeof ranks[r].line - ranks[r].n);
            if (k > 0) {
                ranks[r].n += (size_t)k;
                flush_line(r, &ranks[r], 0);
            } else {
                flush_line(r, &ranks[r], 1);
                close(ranks[r].out);
                ranks[r].out = -1;
            }
        }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            for (int r = 0; r < n; r++)
                if (ranks[r].pid == pid && !ranks[r].done) {
                    ranks[r].done = 1;
                    ranks[r].status = st;
                    left--;
                    if ((!WIFEXITED(st) || WEXITSTATUS(st)) && first_fail < 0 && !term_at) {
                        char why[128];
                        describe(st, why, sizeof why);
                        fprintf(stderr, "plexus-run: rank %d %s; stopping the other ranks\n", r, why);
                        first_fail = r;
                        result = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                        term_at = time(NULL);
                        for (int o = 0; o < n; o++)
                            if (!ranks[o].done)
                                kill(ranks[o].pid, SIGTERM);
                    }
                }
        }
        if (timeout_s && !term_at && time(NULL) - start > timeout_s) {
            fprintf(stderr, "plexus-run: the job ran past --timeout %d s; stopping it\n", timeout_s);
            result = 124;
            term_at = time(NULL);
            for (int o = 0; o < n; o++)
                if (!ranks[o].done)
                    kill(ranks[o].pid, SIGTERM);
        }
        if (term_at && time(NULL) - term_at >= 5)
            for (int o = 0; o < n; o++)
                if (!ranks[o].done)
                    kill(ranks[o].pid, SIGKILL);
    }
    for (int r = 0; r < n; r++)
        if (ranks[r].out >= 0) {
            char buf[4096];
            ssize_t k;
            while ((k = read(ranks[r].out, buf, sizeof buf)) > 0)
                fwrite(buf, 1, (size_t)k, stdout);
        }
    return result;
}
