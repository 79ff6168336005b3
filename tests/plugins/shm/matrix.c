/* matrix.c - one rank of the collective matrix on a multi-process backend
 * (started by plexus-run): every collective x dtype x op, blocking or
 * nonblocking, in place and out of place, at counts 0, 1, P-1, a
 * non-multiple of P and >= 1 Mi elements, each element compared with a
 * serial reference (tests/common/matrix.c), and a barrier that must wait
 * for a late rank. Then the same on the halves of
 * a split, which gets its own segment. usage: matrix BACKEND|auto|INTRA+INTER nonblocking(0|1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "matrix.h"
#include "plexus/plexus.h"

static int P, nonblocking;
static const size_t big = (size_t)1 << 20;

/* The big count on a few combinations only, to keep the run short; the
 * split (not full) runs f32 and i64 at the small counts. */
static int skip(int coll, int dt, int op, size_t n, void *arg)
{
    int full = *(const int *)arg;
    (void)coll;
    if (n == big &&
        !((dt == PLX_F32 || dt == PLX_I32 || dt == PLX_BF16) && (op == PLX_SUM || op == PLX_MAX || op == PLX_AVG)))
        return 1;
    return !full && (n == big || (dt != PLX_F32 && dt != PLX_I64));
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int barrier(struct plx_comm *c)
{
    if (!nonblocking)
        return plx_barrier(c);
    struct plx_work *w = NULL;
    int rc = plx_ibarrier(c, NULL, &w);
    if (rc == 0) {
        rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
    }
    return rc;
}

/* A barrier waits for every rank: after one to line the ranks up, the
 * last rank sleeps HOLD_MS before the next, which every other rank must
 * spend at least half of waiting (the matrix's barrier checks no data). */
enum { HOLD_MS = 200 };

static long barrier_holds(struct plx_comm *c)
{
    int me = plx_comm_rank(c), last = plx_comm_size(c) - 1;
    if (barrier(c) != 0)
        goto failed;
    if (me == last)
        nanosleep(&(struct timespec){0, HOLD_MS * 1000000L}, NULL);
    double t0 = now_ms();
    if (barrier(c) != 0)
        goto failed;
    double waited = now_ms() - t0;
    if (me != last && waited < HOLD_MS / 2) {
        fprintf(stderr, "rank %d: %s's barrier returned after %.1f ms while rank %d slept %d ms before it\n", me,
                plx_comm_name(c), waited, last, HOLD_MS);
        return 1;
    }
    return 0;
failed:
    fprintf(stderr, "rank %d: barrier: %s\n", me, plx_last_error());
    return -1;
}

/* The whole matrix on c; returns the number of wrong elements, or -1. */
static long matrix(struct plx_comm *c, int full)
{
    size_t counts[] = {0, 1, (size_t)P - 1, 7 * (size_t)P + 3, big};
    int cases = 0;
    long bad = matrix_run(c, nonblocking, counts, sizeof counts / sizeof counts[0], skip, &full, &cases);
    if (bad == 0)
        bad = barrier_holds(c);
    if (bad >= 0 && plx_comm_rank(c) == 0)
        printf("%s P=%d nonblocking=%d: %d cases per rank, %ld wrong elements on rank 0\n", plx_comm_name(c), P,
               nonblocking, cases, bad);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: matrix BACKEND nonblocking(0|1)\n");
        return 2;
    }
    nonblocking = atoi(argv[2]);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1];
    o.timeout_ms = 60000;
    struct plx_comm *world = NULL, *half = NULL;
    int rc = plx_comm_init(&o, &world);
    if (rc) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    /* "auto" takes what it gets; "intra+inter" names itself so where it
     * spans hosts, and runs on inter alone where it does not. */
    const char *got = plx_comm_backend(world), *plus = strchr(argv[1], '+');
    if (strcmp(argv[1], "auto") && strcmp(got, argv[1]) && !(plus && !strcmp(got, plus + 1))) {
        fprintf(stderr, "runs on %s, not %s\n", got, argv[1]);
        return 1;
    }
    P = plx_comm_size(world);
    long bad = matrix(world, 1);
    /* A split communicator (even and odd ranks) has its own segment. */
    int me = plx_comm_rank(world);
    if (bad == 0 && (rc = plx_comm_split(world, me % 2, me, &half)) != 0) {
        fprintf(stderr, "split: %s\n", plx_last_error());
        bad = -1;
    }
    if (bad == 0) {
        P = plx_comm_size(half);
        bad = matrix(half, 0);
        plx_comm_destroy(half);
    }
    plx_comm_destroy(world);
    return bad ? 1 : 0;
}
