/* The executor thread sleeps while the caller's thread runs blocking generic
 * collectives itself: once a nonblocking collective has started it, a
 * blocking one that found the communicator idle must not wake it (each wake
 * is a futex call and a context switch, which on a small host preempts a
 * rank).
 *
 * Ranks as threads on sim with native collectives off (the core's
 * algorithms); the executor threads are found by name in /proc/self/task
 * and their voluntary context switches counted over the blocking calls.
 *
 * usage: test_executor_idle P */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"

enum { CALLS = 2000 };

static int failures;
static pthread_barrier_t meet;
static long before, after;

/* Voluntary context switches of every thread named plx-executor; *n gets
 * how many there are. */
static long executor_switches(int *n)
{
    long total = 0;
    *n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], name[64] = "", line[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (!fgets(name, sizeof name, f))
            name[0] = 0;
        fclose(f);
        if (strncmp(name, "plx-executor", 12) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "voluntary_ctxt_switches:", 24))
                total += atol(line + 24);
        fclose(f);
        ++*n;
    }
    closedir(d);
    return total;
}

static int rank_main(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc) { /* still meet the others, who then fail on their own */
        for (int i = 0; i < 3; i++)
            pthread_barrier_wait(&meet);
        return 1;
    }
    struct plx_comm *c = ctx->comm;
    float v[2] = {1, 1};
    struct plx_work *w = NULL;
    /* Starts this communicator's executor thread. */
    CHECK(plx_iallreduce(c, v, v, 2, PLX_F32, PLX_SUM, NULL, &w) == 0);
    CHECK(plx_work_wait(w, PLX_TIMEOUT_DEFAULT) == 0);
    plx_work_free(w);
    pthread_barrier_wait(&meet);
    if (ctx->rank == 0) {
        int n;
        before = executor_switches(&n);
        CHECKF(n == ctx->size, "%d executor threads named plx-executor, want %d", n, ctx->size);
    }
    pthread_barrier_wait(&meet);
    for (int i = 0; i < CALLS; i++)
        CHECK(plx_allreduce(c, v, v, 2, PLX_F32, PLX_SUM) == 0);
    pthread_barrier_wait(&meet);
    if (ctx->rank == 0) {
        int n;
        after = executor_switches(&n);
    }
    return failures != 0;
}

int main(int argc, char **argv)
{
    int P = argc > 1 ? atoi(argv[1]) : 2;
    static const char *const generic[] = {"sim.native_collectives=false", NULL};
    pthread_barrier_init(&meet, NULL, (unsigned)P);
    int rc = run_ranks(P, "sim", generic, 30000, rank_main, NULL);
    long woken = after - before;
    /* Idle, an executor wakes for nothing; allow a few for the scheduler. */
    CHECKF(woken < CALLS / 20, "the executor threads woke %ld times during %d blocking calls on each of %d ranks",
           woken, CALLS, P);
    if (!rc && !failures)
        printf("%d ranks, %d blocking generic allreduces each: the executors woke %ld times\n", P, CALLS, woken);
    return rc || failures;
}
