#include "procs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int got = -1;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof sa) && !getsockname(fd, (struct sockaddr *)&sa, &sl))
        got = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return got;
}

/* Below the kernel's ephemeral range when there is room: a port from that
 * range can be taken by any outgoing connection before the test listens on
 * it (the kill loop lost one in 50 iterations that way: its recovery port
 * waits seconds while the mesh makes dozens of connections). */
int free_port(void)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    int first = lo - 16384 > 10000 ? lo - 16384 : 10000;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint32_t x = (uint32_t)getpid() * 2654435761u ^ (uint32_t)ts.tv_nsec;
    for (int i = 0; first < lo && i < 64; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5; /* xorshift32: parallel tests pick apart */
        int port = bindable(first + (int)(x % (uint32_t)(lo - first)));
        if (port > 0)
            return port;
    }
    return bindable(0);
}

void *shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int procs_start(struct procs *p, int n, int (*fn)(int rank, void *arg), void *arg)
{
    memset(p, 0, sizeof *p);
    fflush(NULL); /* the children must not print the parent's buffered output again */
    for (int r = 0; r < n && r < PROCS_MAX; r++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(fn(r, arg));
        if (pid < 0) {
            perror("fork");
            for (int k = 0; k < r; k++)
                kill(p->pid[k], SIGKILL);
            p->n = r;
            procs_wait(p, 0);
            return -1;
        }
        p->pid[r] = pid;
        p->n = r + 1;
    }
    return 0;
}

void procs_wait(struct procs *p, double deadline)
{
    for (;;) {
        int left = 0;
        for (int r = 0; r < p->n; r++) {
            if (p->reaped[r])
                continue;
            int st;
            pid_t got = waitpid(p->pid[r], &st, WNOHANG);
            if (got == p->pid[r]) {
                p->reaped[r] = 1;
                p->status[r] = st;
                p->exit_s[r] = now_s();
            } else {
                left++;
            }
        }
        if (!left)
            return;
        if (now_s() >= deadline) {
            for (int r = 0; r < p->n; r++) {
                if (p->reaped[r])
                    continue;
                p->hung[r] = 1;
                kill(p->pid[r], SIGKILL);
                waitpid(p->pid[r], &p->status[r], 0);
                p->reaped[r] = 1;
                p->exit_s[r] = now_s();
            }
            return;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

const char *procs_describe(const struct procs *p, int r)
{
    static char buf[64];
    int st = p->status[r];
    if (p->hung[r])
        snprintf(buf, sizeof buf, "hung (killed at the deadline)");
    else if (WIFEXITED(st))
        snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, sizeof buf, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, sizeof buf, "status %#x", st);
    return buf;
}

void procs_report(char *log, size_t cap, int *failures, const char *fmt, ...)
{
    size_t l = strlen(log);
    va_list ap;
    va_start(ap, fmt);
    if (l + 1 < cap)
        vsnprintf(log + l, cap - l, fmt, ap);
    va_end(ap);
    if (failures)
        __atomic_add_fetch(failures, 1, __ATOMIC_RELAXED);
}

int procs_open(int rank, int size, int port, const char *backend, int timeout_ms, char *log, size_t cap,
               int *failures, struct plx_comm **c)
{
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.init = url;
    o.backend = backend;
    o.rank = o.local_rank = rank;
    o.size = o.local_size = size;
    o.timeout_ms = timeout_ms;
    *c = NULL;
    int rc = plx_comm_init(&o, c);
    if (rc != 0)
        procs_report(log, cap, failures, "rank %d: init: %s\n", rank, plx_last_error());
    return rc;
}

static int run_to_5(struct plx_comm *c, int rank, char *log, size_t cap, int *failures)
{
    float x[256] = {1}, y[256];
    for (int i = 0; i < 6; i++) {
        if (i == 5)
            usleep(1200 * 1000);
        if (plx_allreduce(c, x, y, 256, PLX_F32, PLX_SUM) != 0) {
            procs_report(log, cap, failures, "rank %d: #%d: %s\n", rank, i, plx_last_error());
            return 1;
        }
    }
    return 0;
}

int procs_stuck_at_6(struct plx_comm *c, int rank, int stop, int *entered, float *y, double *secs, char *log,
                     size_t cap, int *failures)
{
    float x[256] = {1};
    if (run_to_5(c, rank, log, cap, failures) != 0)
        return 1;
    if (rank == stop)
        raise(SIGSTOP);
    __atomic_store_n(entered, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 256; i++)
        y[i] = -1.0f; /* what the stack held might pass for #6's result */
    double t0 = now_s();
    int rc = plx_allreduce(c, x, y, 256, PLX_F32, PLX_SUM);
    *secs = now_s() - t0;
    procs_report(log, cap, NULL, "rank %d: #6: %s after %.1f s: %s\n", rank, plx_err_name(rc), *secs,
                 plx_last_error());
    return rc;
}

int procs_bad_ends(const struct procs *p, FILE *out, const char *prefix)
{
    int bad = 0;
    for (int r = 0; r < p->n; r++)
        if (p->hung[r] || !WIFEXITED(p->status[r]) || WEXITSTATUS(p->status[r])) {
            fprintf(out, "%srank %d: %s\n", prefix, r, procs_describe(p, r));
            bad++;
        }
    return bad;
}
