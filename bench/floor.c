/* floor - the least memory traffic a P-rank allreduce can do: P threads in
 * one address space, each summing its 1/P slice of all P inputs and storing
 * the sum straight into that slice of all P outputs, in one pass (what
 * single-copy shared memory would give processes). The figure every
 * comparison prints beside the peers (bench/busy_table.sh).
 * usage: floor NP BYTES [ITERS]   prints "NP BYTES US" (median of the
 * slowest thread's time per op over ITERS ops, after 3 warm-up ops). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WARMUP = 3 };

static int np, iters;
static size_t n; /* floats per buffer */
static float **in, **out;
static pthread_barrier_t bar;
static double *op_us; /* per op: time from the barrier before it to the one after, seen by thread 0 */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *rank_main(void *arg)
{
    int me = (int)(long)arg;
    size_t lo = n * (size_t)me / (size_t)np, hi = n * (size_t)(me + 1) / (size_t)np;
    for (int it = 0; it < WARMUP + iters; it++) {
        pthread_barrier_wait(&bar);
        double t0 = now_us();
        for (size_t i = lo; i < hi; i++) {
            float s = 0;
            for (int r = 0; r < np; r++)
                s += in[r][i];
            for (int r = 0; r < np; r++)
                out[r][i] = s;
        }
        pthread_barrier_wait(&bar); /* an op ends when the slowest thread ends */
        if (me == 0 && it >= WARMUP)
            op_us[it - WARMUP] = now_us() - t0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: floor NP BYTES [ITERS]\n");
        return 2;
    }
    np = atoi(argv[1]);
    size_t bytes = (size_t)atoll(argv[2]);
    iters = argc > 3 ? atoi(argv[3]) : 20;
    if (np < 1 || np > 256 || iters < 1 || bytes < 4) {
        fprintf(stderr, "floor: NP must be 1-256, BYTES >= 4, ITERS >= 1\n");
        return 2;
    }
    n = bytes / 4;
    in = calloc((size_t)np, sizeof *in);
    out = calloc((size_t)np, sizeof *out);
    op_us = calloc((size_t)iters, sizeof *op_us);
    pthread_t *t = calloc((size_t)np, sizeof *t);
    if (!in || !out || !op_us || !t)
        return 1;
    for (int r = 0; r < np; r++) {
        in[r] = malloc(n * sizeof(float));
        out[r] = malloc(n * sizeof(float));
        if (!in[r] || !out[r])
            return 1;
        for (size_t i = 0; i < n; i++)
            in[r][i] = (float)(r + 1);
        memset(out[r], 0, n * sizeof(float));
    }
    pthread_barrier_init(&bar, NULL, (unsigned)np);
    for (int r = 0; r < np; r++)
        pthread_create(&t[r], NULL, rank_main, (void *)(long)r);
    for (int r = 0; r < np; r++)
        pthread_join(t[r], NULL);
    float want = (float)np * (float)(np + 1) / 2;
    for (int r = 0; r < np; r++)
        for (size_t i = 0; i < n; i += 997)
            if (out[r][i] != want) {
                fprintf(stderr, "floor: wrong sum at rank %d [%zu]: %g, want %g\n", r, i, out[r][i], want);
                return 1;
            }
    qsort(op_us, (size_t)iters, sizeof *op_us, cmp);
    printf("%d %zu %.2f\n", np, bytes, op_us[iters / 2]);
    return 0;
}
