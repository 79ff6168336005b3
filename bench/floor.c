/* floor - the least memory traffic a P-rank allreduce (f32 sum) can do: P
 * threads in one address space, one per rank, each summing its 1/P slice of
 * all P inputs and storing the sum straight into that slice of all P
 * outputs, in one pass (what single-copy shared memory gives processes):
 * every input byte read once, every output byte written once, nothing
 * staged. The figure every comparison prints beside the peers
 * (bench/busy_table.sh, bench/compare_shm.sh).
 * usage: floor NP BYTES [ITERS] [inplace]
 * inplace: each rank's output is its input (as plexus-bench --inplace).
 * prints "NP BYTES US": the median over ITERS ops (after 3 warm-up ops) of
 * an op's time, from the barrier that starts it to the slowest thread's
 * end, and on stderr the spread. Then one more op on fresh inputs that
 * differ by rank and element, and every element of every output checked
 * against a serial sum (exit 1 on a wrong one), so a slice left out or
 * summed twice shows. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WARMUP = 3, BLOCK = 2048 /* floats summed in a thread's stack (8 KiB, stays in L1) before the stores */ };

static int np, iters, ops, timed; /* ops this run, of which the last `timed` are recorded */
static size_t n; /* floats per buffer */
static float **in, **out;
static unsigned arrived, generation; /* the barrier's count and sense */
static double *op_us; /* per op, seen by thread 0 */

/* A spinning barrier: a sleeping one (pthread_barrier_wait) adds a futex
 * wake to every op, which is the scheduler's cost, not the memory system's.
 * It yields between looks, so more threads than cores still progress. */
static void barrier(void)
{
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == (unsigned)np) {
        __atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&generation, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    for (unsigned k = 0; __atomic_load_n(&generation, __ATOMIC_ACQUIRE) == gen; k++)
        if (k > 1000)
            sched_yield();
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* out[*][lo, hi) = sum over r of in[r][lo, hi), block by block: the loops
 * over a block are plain vector loops, and the sum of a block is stored to
 * every output while it is still in L1. */
static void reduce_slice(size_t lo, size_t hi)
{
    float acc[BLOCK];
    for (size_t b = lo; b < hi; b += BLOCK) {
        size_t m = hi - b < BLOCK ? hi - b : BLOCK;
        const float *a = in[0] + b;
        for (size_t i = 0; i < m; i++)
            acc[i] = a[i];
        for (int r = 1; r < np; r++) {
            const float *x = in[r] + b;
            for (size_t i = 0; i < m; i++)
                acc[i] += x[i];
        }
        for (int r = 0; r < np; r++)
            memcpy(out[r] + b, acc, m * sizeof(float));
    }
}

static void *rank_main(void *arg)
{
    int me = (int)(long)arg;
    size_t lo = n * (size_t)me / (size_t)np, hi = n * (size_t)(me + 1) / (size_t)np;
    for (int it = 0; it < ops; it++) {
        barrier();
        double t0 = now_us();
        reduce_slice(lo, hi);
        barrier(); /* an op ends when the slowest thread ends */
        if (me == 0 && it >= ops - timed)
            op_us[it - (ops - timed)] = now_us() - t0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* small integers: every partial sum is exact in f32 whatever the order */
static float input_value(int r, size_t i)
{
    return (float)((i * 7 + (size_t)r * 13) % 61) - 30.0f;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: floor NP BYTES [ITERS] [inplace]\n");
        return 2;
    }
    np = atoi(argv[1]);
    size_t bytes = (size_t)strtoull(argv[2], NULL, 0);
    iters = argc > 3 ? atoi(argv[3]) : 20;
    int inplace = argc > 4 && !strcmp(argv[4], "inplace");
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
        out[r] = inplace ? in[r] : malloc(n * sizeof(float));
        if (!in[r] || !out[r]) {
            fprintf(stderr, "floor: out of memory for %d x 2 x %zu bytes\n", np, bytes);
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            in[r][i] = input_value(r, i);
    }
    /* the timed ops, then one on fresh inputs that is checked */
    for (int phase = 0; phase < 2; phase++) {
        ops = phase ? 1 : WARMUP + iters;
        timed = phase ? 0 : iters;
        if (phase)
            for (int r = 0; r < np; r++)
                for (size_t i = 0; i < n; i++) {
                    in[r][i] = input_value(r, i);
                    if (!inplace)
                        out[r][i] = -1e30f;
                }
        for (int r = 0; r < np; r++)
            if (pthread_create(&t[r], NULL, rank_main, (void *)(long)r)) {
                fprintf(stderr, "floor: cannot start thread %d\n", r);
                return 1;
            }
        for (int r = 0; r < np; r++)
            pthread_join(t[r], NULL);
    }
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < np; r++)
            want += input_value(r, i);
        for (int r = 0; r < np; r++)
            if (out[r][i] != want) {
                fprintf(stderr, "floor: wrong sum in output %d at [%zu]: %g, want %g\n", r, i, (double)out[r][i],
                        (double)want);
                return 1;
            }
    }
    qsort(op_us, (size_t)iters, sizeof *op_us, cmp);
    printf("%d %zu %.2f\n", np, bytes, op_us[iters / 2]);
    fprintf(stderr, "floor: %d threads, %zu bytes%s, %d ops: median %.2f us [min %.2f, max %.2f], all outputs right\n",
            np, bytes, inplace ? " in place" : "", iters, op_us[iters / 2], op_us[0], op_us[iters - 1]);
    for (int r = 0; r < np; r++) {
        free(in[r]);
        if (!inplace)
            free(out[r]);
    }
    free(in);
    free(out);
    free(op_us);
    free(t);
    return 0;
}
