/* Real multi-process jobs that rendezvous through a file:// store: three
 * processes on the tcp backend init, allreduce, broadcast and split; then a
 * job whose third rank never starts fails within its timeout, naming it. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "ranks.h"

#define SIZE 3

static int init_rank(const char *url, int rank, int64_t timeout_ms, struct plx_comm **c)
{
    return join_rank("tcp", url, rank, SIZE, timeout_ms, NULL, c);
}

static int job_rank(const char *url, int rank)
{
    struct plx_comm *c = NULL, *sub = NULL;
    if (init_rank(url, rank, 20000, &c) != 0) {
        fprintf(stderr, "rank %d: init: %s\n", rank, plx_last_error());
        return 1;
    }
    int bad = 0;
    enum { N = 1001 };
    static float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(rank + 1 + i);
    bad |= plx_allreduce(c, x, x, N, PLX_F32, PLX_SUM) != 0;
    for (int i = 0; i < N && !bad; i++)
        bad |= x[i] != (float)(6 + 3 * i);
    int64_t b[4] = {rank, rank, rank, rank};
    bad |= plx_broadcast(c, b, 4, PLX_I64, 2) != 0;
    bad |= b[0] != 2 || b[3] != 2;
    /* A split communicator rendezvous under its own key prefix. */
    if (plx_comm_split(c, rank % 2, rank, &sub) != 0) {
        bad = 1;
    } else {
        int32_t v = rank;
        bad |= plx_allreduce(sub, &v, &v, 1, PLX_I32, PLX_SUM) != 0;
        bad |= v != (rank % 2 ? 1 : 2);
        plx_comm_destroy(sub);
    }
    if (bad)
        fprintf(stderr, "rank %d: wrong result or error: %s\n", rank, plx_last_error());
    plx_comm_destroy(c);
    return bad;
}

/* Ranks 0 and 1 of 3: init must fail in bounded time and say who is missing. */
static int orphan_rank(const char *url, int rank)
{
    struct plx_comm *c = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = init_rank(url, rank, 1500, &c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("rank %d without rank 2: %s after %.1f s: %s\n", rank, plx_err_name(rc), s, plx_last_error());
    if (rc == 0) {
        plx_comm_destroy(c);
        return 1;
    }
    return !(s < 15 && strstr(plx_last_error(), "rank 2"));
}

static int run(const char *url, int nranks, int (*fn)(const char *, int))
{
    pid_t pid[SIZE];
    for (int r = 0; r < nranks; r++)
        if ((pid[r] = fork()) == 0) {
            alarm(60); /* never outlive the test */
            int rc = fn(url, r);
            fflush(stdout); /* _exit does not */
            _exit(rc);
        }
    int fails = 0;
    for (int r = 0; r < nranks; r++) {
        int st;
        if (waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
            fails++;
        }
    }
    return fails;
}

int main(void)
{
    char dir[256], url[300], cmd[320];
    snprintf(dir, sizeof dir, "%s/plexus-filestore-comm-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* Each job gets a folder of its own: keys of an earlier job would be
     * read as this one's. */
    snprintf(url, sizeof url, "file://%s/job1", dir);
    int fails = run(url, SIZE, job_rank);
    snprintf(url, sizeof url, "file://%s/job2", dir);
    fails += run(url, SIZE - 1, orphan_rank);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf(fails ? "FAILED\n" : "ok\n");
    return fails ? 1 : 0;
}
