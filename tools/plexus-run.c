/* plexus-run - start N local ranks of a job with the variables torchrun sets
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * prefix every output line with its rank, stop the others when one fails,
 * and exit with the first failure's status. Every job gets a secret
 * (PLEXUS_JOB_SECRET, 32 random bytes in hex, unless one is set already)
 * so its store and transport connections are authenticated; --no-auth
 * starts the ranks without one (torch-compatible).
 *
 * The ranks never outlive it, nor does anything they start: they run in one
 * process group of their own with the job's mark in their environment, and
 * every exit path kills the group and every marked process (run_sweep.c).
 * plexus-run is their subreaper, so orphans of a wrapper rank stay its own.
 * Each rank asks the kernel for SIGKILL when plexus-run dies
 * (PR_SET_PDEATHSIG), which reaches direct children only; a detached
 * watchdog sweeps the rest (a rank's `sh -c` children) when plexus-run dies
 * without saying it is done. SIGINT, SIGTERM and SIGHUP are passed to the ranks once, then
 * the group is killed after the grace period (a second one kills at once);
 * a closed output (| head) ends the job as SIGPIPE would. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_args.h"
#include "run_sweep.h"

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
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    close(fd); /* a small race with other programs; the store reports a clear error if it is lost */
    return ntohs(sa.sin_port);
}

/* A fresh job secret: 32 bytes from getrandom, as 64 hex digits. */
static int make_secret(char out[65])
{
    return run_random_hex(out, 32);
}

/* Set from the signal handlers, read by the main loop. */
static volatile sig_atomic_t got_signal, signal_count;
static int output_closed; /* stdout went away: stop the job */

static void on_signal(int sig)
{
    got_signal = sig;
    signal_count++;
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
    if (fflush(stdout) == EOF || ferror(stdout))
        output_closed = 1;
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

static void synopsis(FILE *f)
{
    fprintf(f, "usage: plexus-run -n N [--backend NAME] [--timeout SECONDS] [--grace SECONDS] [--port PORT]\n"
               "                  [--no-auth] [--] PROGRAM [ARGS...]\n");
}

static void usage(FILE *f)
{
    synopsis(f);
    fprintf(f, "Starts N ranks of PROGRAM on this machine with RANK, WORLD_SIZE, LOCAL_RANK,\n"
               "LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT (what torchrun sets;\n"
               "--port picks it), and PLEXUS_BACKEND=NAME with --backend. Each job gets a random\n"
               "PLEXUS_JOB_SECRET (unless one is set) so its store and tcp connections authenticate;\n"
               "--no-auth starts the ranks without one (unauthenticated, torch-compatible).\n"
               "Output lines get a [rank i] prefix. When a rank fails the others are stopped\n"
               "(SIGTERM, then SIGKILL after the grace period, default 5 s); the exit status is the\n"
               "first failing rank's (128+signal if it was killed), or 124 on --timeout.\n"
               "SIGINT, SIGTERM and SIGHUP go to every rank once; the ranks are killed after the\n"
               "grace period or at a second signal, and plexus-run exits with 128+signal. If\n"
               "plexus-run itself dies, its watchdog kills the ranks and whatever they started; if\n"
               "its output closes, the job stops with status 141 (SIGPIPE).\n");
}

struct job {
    int n, timeout_s, grace_s, port, no_auth;
    const char *backend;
    char **argv; /* the program and its arguments */
    pid_t pgid;  /* the ranks' process group: the first rank's pid */
    char mark[64];  /* PLEXUS_RUN_JOB=<random>, in every rank's environment */
    int watchdog;   /* run_watchdog_done() when the job is over */
    struct rank ranks[MAX_RANKS];
};

static int missing(const char *opt)
{
    fprintf(stderr, "plexus-run: %s needs a value\n", opt);
    return -1;
}

/* The value of option argv[*i] (an int from lo to hi) into *out. */
static int int_option(int argc, char **argv, int *i, long lo, long hi, int *out)
{
    if (*i + 1 >= argc)
        return missing(argv[*i]);
    const char *opt = argv[*i];
    return cli_int("plexus-run", opt, argv[++*i], lo, hi, out);
}

static int parse_args(int argc, char **argv, struct job *j)
{
    int i = 1, rc = 0;
    j->grace_s = 5;
    for (; i < argc && rc == 0; i++) {
        if (!strcmp(argv[i], "-n"))
            rc = int_option(argc, argv, &i, 1, MAX_RANKS, &j->n);
        else if (!strcmp(argv[i], "--backend") && i + 1 >= argc)
            rc = missing(argv[i]);
        else if (!strcmp(argv[i], "--backend"))
            j->backend = argv[++i];
        else if (!strcmp(argv[i], "--timeout"))
            rc = int_option(argc, argv, &i, 0, INT_MAX, &j->timeout_s);
        else if (!strcmp(argv[i], "--grace"))
            rc = int_option(argc, argv, &i, 0, INT_MAX, &j->grace_s);
        else if (!strcmp(argv[i], "--port"))
            rc = int_option(argc, argv, &i, 0, 65535, &j->port);
        else if (!strcmp(argv[i], "--no-auth"))
            j->no_auth = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "plexus-run: unknown option '%s' (a program whose name starts with '-' goes after "
                    "--)\n", argv[i]);
            rc = -1;
        } else
            break;
    }
    if (rc == 0 && !j->n)
        fprintf(stderr, "plexus-run: -n N (the number of ranks, 1 to %d) is required\n", MAX_RANKS);
    else if (rc == 0 && i >= argc)
        fprintf(stderr, "plexus-run: no PROGRAM to start\n");
    if (rc || !j->n || i >= argc) {
        synopsis(stderr);
        fprintf(stderr, "(plexus-run --help says more)\n");
        return 2;
    }
    j->argv = argv + i;
    return 0;
}

/* The secret goes to the ranks through their environment, which only the
 * same user (and root) can read. */
static int setup_secret(const struct job *j)
{
    const char *have = getenv("PLEXUS_JOB_SECRET");
    char secret[65];
    if (j->no_auth) {
        unsetenv("PLEXUS_JOB_SECRET");
    } else if (!have || !*have) {
        if (make_secret(secret)) {
            perror("plexus-run: cannot read random bytes for the job secret");
            return 2;
        }
        setenv("PLEXUS_JOB_SECRET", secret, 1);
        memset(secret, 0, sizeof secret);
    }
    return 0;
}

/* In the child: join the job's group, die with the launcher, get the
 * torchrun variables, and become the program. */
static void exec_rank(const struct job *j, int r, int out, pid_t launcher)
{
    char v[32];
    setpgid(0, j->pgid ? j->pgid : 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) /* it died before the line above */
        _exit(137);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    dup2(out, 1);
    dup2(out, 2);
    close(out);
    snprintf(v, sizeof v, "%d", r);
    setenv("RANK", v, 1);
    setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", j->n);
    setenv("WORLD_SIZE", v, 1);
    setenv("LOCAL_WORLD_SIZE", v, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(v, sizeof v, "%d", j->port);
    setenv("MASTER_PORT", v, 1);
    if (j->backend)
        setenv("PLEXUS_BACKEND", j->backend, 1);
    putenv((char *)j->mark); /* the child's own copy of j, never freed */
    execvp(j->argv[0], j->argv);
    fprintf(stderr, "plexus-run: cannot start %s: %s\n", j->argv[0], strerror(errno));
    _exit(127);
}

static void kill_job(const struct job *j, int sig)
{
    if (j->pgid > 0)
        kill(-j->pgid, sig);
    for (int o = 0; o < j->n; o++) /* a rank not yet in the group */
        if (j->ranks[o].pid > 0 && !j->ranks[o].done)
            kill(j->ranks[o].pid, sig);
}

/* The job's mark, its watchdog, and plexus-run as the subreaper of its
 * ranks' descendants. */
static int start_watchdog(struct job *j)
{
    if (run_mark_make(j->mark, sizeof j->mark)) {
        perror("plexus-run: cannot read random bytes for the job's mark");
        return 2;
    }
    if ((j->watchdog = run_watchdog_start(j->mark)) < 0) {
        perror("plexus-run: cannot start the watchdog that stops the ranks if plexus-run dies");
        return 2;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    return 0;
}

/* Whatever of the job is left, in its group or started elsewhere by a rank,
 * is killed; then the watchdog may go. */
static void end_job(const struct job *j)
{
    kill_job(j, SIGKILL);
    run_sweep(j->mark, 2000);
    run_watchdog_done(j->watchdog);
}

static int start_ranks(struct job *j)
{
    pid_t me = getpid();
    for (int r = 0; r < j->n; r++) {
        int fds[2];
        if (pipe(fds)) {
            perror("plexus-run: pipe");
            return 2;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            exec_rank(j, r, fds[1], me);
        }
        close(fds[1]);
        if (pid < 0) {
            perror("plexus-run: fork");
            close(fds[0]);
            return 2;
        }
        if (!j->pgid)
            j->pgid = pid;
        setpgid(pid, j->pgid); /* both sides set it, so neither order races */
        j->ranks[r].pid = pid;
        j->ranks[r].out = fds[0];
    }
    return 0;
}

static void pump_output(struct job *j)
{
    struct pollfd pf[MAX_RANKS + 1];
    for (int r = 0; r < j->n; r++)
        pf[r] = (struct pollfd){j->ranks[r].out, POLLIN, 0};
    /* A pipe's write end reports POLLERR once its reader has gone: the job
     * stops then, even while the ranks print nothing. */
    pf[j->n] = (struct pollfd){1, 0, 0};
    if (poll(pf, (nfds_t)j->n + 1, 100) <= 0)
        return;
    if (pf[j->n].revents & POLLERR)
        output_closed = 1;
    for (int r = 0; r < j->n; r++) {
        struct rank *k = &j->ranks[r];
        if (k->out < 0 || !(pf[r].revents & (POLLIN | POLLHUP)))
            continue;
        ssize_t got = read(k->out, k->line + k->n, sizeof k->line - k->n);
        if (got > 0) {
            k->n += (size_t)got;
            flush_line(r, k, 0);
        } else {
            flush_line(r, k, 1);
            close(k->out);
            k->out = -1;
        }
    }
}

/* Reap exited ranks; the first failure stops the others. */
static void reap(struct job *j, int *left, int *result, time_t *term_at)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (int r = 0; r < j->n; r++) {
            if (j->ranks[r].pid != pid || j->ranks[r].done)
                continue;
            j->ranks[r].done = 1;
            j->ranks[r].status = st;
            (*left)--;
            if ((!WIFEXITED(st) || WEXITSTATUS(st)) && !*term_at) {
                char why[128];
                describe(st, why, sizeof why);
                fprintf(stderr, "plexus-run: rank %d %s; stopping the other ranks\n", r, why);
                *result = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                *term_at = time(NULL);
                kill_job(j, SIGTERM);
            }
        }
}

/* Why the job must stop now, if it must: a signal to plexus-run, a closed
 * output, or the timeout. Sends the first signal to the ranks. */
static void check_stop(struct job *j, time_t start, int *result, time_t *term_at)
{
    if (got_signal && !*term_at) {
        int sig = got_signal;
        fprintf(stderr, "plexus-run: got %s; passing it to the ranks (killed in %d s)\n", strsignal(sig),
                j->grace_s);
        *result = 128 + sig;
        *term_at = time(NULL);
        kill_job(j, sig);
    } else if (signal_count > 1) {
        kill_job(j, SIGKILL);
    }
    if (output_closed && !*term_at) {
        *result = 128 + SIGPIPE;
        *term_at = time(NULL);
        kill_job(j, SIGTERM);
    }
    if (j->timeout_s && !*term_at && time(NULL) - start > j->timeout_s) {
        fprintf(stderr, "plexus-run: the job ran past --timeout %d s; stopping it\n", j->timeout_s);
        *result = 124;
        *term_at = time(NULL);
        kill_job(j, SIGTERM);
    }
    if (*term_at && time(NULL) - *term_at >= j->grace_s)
        kill_job(j, SIGKILL);
}

int main(int argc, char **argv)
{
    static struct job j;
    int rc = parse_args(argc, argv, &j);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (j.port <= 0 && (j.port = free_port()) < 0) {
        /* EADDRINUSE on port 0: the local range is used up, most often by
         * the connections of jobs that just ended (TIME_WAIT). */
        int e = errno;
        fprintf(stderr, "plexus-run: cannot find a free port for the job's store: %s%s\n", strerror(e),
                e == EADDRINUSE ? "; no free port in net.ipv4.ip_local_port_range (`ss -s` counts the connections "
                                  "of recent jobs still in TIME_WAIT; --port picks one)"
                                : "");
        return 2;
    }
    if ((rc = setup_secret(&j)) != 0)
        return rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed output shows as a write error */
    if ((rc = start_watchdog(&j)) != 0)
        return rc;
    if ((rc = start_ranks(&j)) != 0) {
        end_job(&j);
        return rc;
    }
    int result = 0, left = j.n;
    time_t start = time(NULL), term_at = 0;
    while (left > 0) {
        pump_output(&j);
        reap(&j, &left, &result, &term_at);
        check_stop(&j, start, &result, &term_at);
    }
    for (int r = 0; r < j.n && !output_closed; r++)
        if (j.ranks[r].out >= 0) {
            char buf[4096];
            ssize_t k;
            while ((k = read(j.ranks[r].out, buf, sizeof buf)) > 0)
                fwrite(buf, 1, (size_t)k, stdout);
        }
    end_job(&j);
    return result;
}
