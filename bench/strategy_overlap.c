/* strategy_overlap - how much communication DDP OVERLAP hides versus SYNC,
 * what FSDP prefetch gains in forward, and how much of FSDP backward's
 * reduce-scatter time ireduce_grad hides, with a synthetic model: L layers of
 * G floats, and "compute" of a set duration per layer (a sleep, like a GPU
 * kernel the host waits for). Run under plexus-run, e.g.
 *   plexus-run -n 4 bench/strategy_overlap [layers] [floats per layer] [ms per layer]
 *                                          [layers per DDP bucket] [steps]
 * (defaults 8, 1048576, 20, 2, 9).
 *
 * The variants being compared run interleaved, step by step, so a burst of
 * load on a shared machine hits them alike; a step's time is the slowest
 * rank's, and each figure is the median over the steps (after one warm-up).
 *
 * Hidden fraction: the communication a variant leaves exposed (its step time
 * minus the same step without that communication, or minus the compute for
 * DDP) against what the blocking variant exposes: DDP
 * 1 - exposed(OVERLAP) / exposed(SYNC), FSDP backward
 * 1 - exposed(ireduce_grad) / exposed(reduce_grad). DDP buckets launch in
 * bucket order (PyTorch's reducer); the last layer's gradient, ready first,
 * leads the first bucket, and the last bucket's allreduce (the first layers')
 * can never be hidden: with B buckets at most 1 - 1/B is.
 *
 * `strategy_overlap allreduce [bytes] [ms] [steps]` (defaults 16 MiB, 4,
 * 15) measures one nonblocking f32 allreduce with `ms` of compute between
 * issue and wait, interleaved with the blocking allreduce alone and the
 * compute alone: hidden = 1 - (overlapped - compute) / blocking. A compute
 * that sleeps stands for a GPU kernel; PLEXUS_OVERLAP_SPIN=1 makes it spin
 * on the core instead (host compute: the collective must then share the
 * cores with it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/strategy.h"

enum { MAXVAR = 3, MAXSTEPS = 64 };

struct bench {
    struct plx_comm *c;
    int L;
    size_t G;
    double T;
    float **g, **full;
    struct plx_ddp *ddp;
    struct plx_fsdp *fsdp;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void compute(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}

static int spin_compute;

static void compute_for(double ms)
{
    if (!spin_compute) {
        compute(ms);
        return;
    }
    double end = now_ms() + ms;
    volatile double x = 1;
    while (now_ms() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* DDP backward, last layer first: variant 0 SYNC, 1 OVERLAP. */
static int ddp_step(struct bench *b, int v)
{
    int rc = plx_ddp_begin(b->ddp, v ? PLX_DDP_OVERLAP : PLX_DDP_SYNC);
    for (int l = b->L - 1; l >= 0 && !rc; l--) {
        compute(b->T);
        rc = plx_ddp_ready(b->ddp, l);
    }
    return rc ? rc : plx_ddp_finish(b->ddp);
}

/* FSDP FULL_SHARD forward: gather each unit, then compute on it; variant 1
 * prefetches the next unit meanwhile. */
static int fsdp_forward(struct bench *b, int v)
{
    int rc = v ? plx_fsdp_prefetch(b->fsdp, 0, b->full[0]) : 0;
    for (int l = 0; l < b->L && !rc; l++) {
        rc = plx_fsdp_gather(b->fsdp, l, b->full[l]);
        if (!rc && v && l + 1 < b->L)
            rc = plx_fsdp_prefetch(b->fsdp, l + 1, b->full[l + 1]);
        compute(b->T);
    }
    return rc;
}

/* FSDP FULL_SHARD backward, last layer first: gather the layer (prefetched),
 * prefetch the next, compute, hand its gradient on: variant 0 no reduction
 * (the baseline), 1 reduce_grad, 2 ireduce_grad (waited for at the end, as
 * the optimizer step needs the shards). */
static int fsdp_backward(struct bench *b, int v)
{
    int rc = plx_fsdp_prefetch(b->fsdp, b->L - 1, b->full[b->L - 1]);
    for (int l = b->L - 1; l >= 0 && !rc; l--) {
        rc = plx_fsdp_gather(b->fsdp, l, b->full[l]);
        if (!rc && l > 0)
            rc = plx_fsdp_prefetch(b->fsdp, l - 1, b->full[l - 1]);
        compute(b->T);
        if (!rc && v == 1)
            rc = plx_fsdp_reduce_grad(b->fsdp, l, b->g[l]);
        if (!rc && v == 2)
            rc = plx_fsdp_ireduce_grad(b->fsdp, l, b->g[l]);
    }
    if (!rc)
        rc = plx_fsdp_wait_grad(b->fsdp, -1);
    return rc ? rc : plx_fsdp_zero_grad(b->fsdp, -1);
}

/* Median over steps of the slowest rank's time, per variant, interleaved. */
static int measure(struct bench *b, int nvar, int steps, int (*step)(struct bench *, int), double *out)
{
    static double t[MAXVAR][MAXSTEPS];
    for (int s = 0; s <= steps; s++)
        for (int v = 0; v < nvar; v++) {
            plx_barrier(b->c);
            double t0 = now_ms();
            int rc = step(b, v);
            double dt = now_ms() - t0, worst = dt;
            if (rc || (rc = plx_allreduce(b->c, &dt, &worst, 1, PLX_F64, PLX_MAX)) != 0) {
                fprintf(stderr, "strategy_overlap: rank %d: %s\n", plx_comm_rank(b->c), plx_last_error());
                return rc;
            }
            if (s > 0) /* step 0 warms up */
                t[v][s - 1] = worst;
        }
    for (int v = 0; v < nvar; v++) {
        qsort(t[v], (size_t)steps, sizeof(double), cmp);
        out[v] = t[v][steps / 2];
    }
    return 0;
}

static double hidden(double exposed, double exposed_blocking)
{
    return 100.0 * (1 - exposed / (exposed_blocking > 0 ? exposed_blocking : 1));
}

/* One allreduce: variant 0 blocking, 1 compute alone, 2 nonblocking with
 * the compute between issue and wait. */
static float *ar_buf;
static size_t ar_count;
static double ar_ms;

static int allreduce_step(struct bench *b, int v)
{
    if (v == 1) {
        compute_for(ar_ms);
        return 0;
    }
    if (v == 0)
        return plx_allreduce(b->c, ar_buf, ar_buf, ar_count, PLX_F32, PLX_SUM);
    struct plx_work *w = NULL;
    int rc = plx_iallreduce(b->c, ar_buf, ar_buf, ar_count, PLX_F32, PLX_SUM, NULL, &w);
    if (rc)
        return rc;
    compute_for(ar_ms);
    rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
    plx_work_free(w);
    return rc;
}

static int allreduce_overlap(int argc, char **argv)
{
    struct bench b = {0};
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 16u << 20;
    ar_ms = argc > 3 ? atof(argv[3]) : 4;
    int steps = argc > 4 ? atoi(argv[4]) : 15;
    const char *spin = getenv("PLEXUS_OVERLAP_SPIN");
    spin_compute = spin && *spin == '1';
    ar_count = bytes / sizeof(float);
    if (ar_count < 1 || ar_ms < 0 || steps < 1 || steps > MAXSTEPS) {
        fprintf(stderr, "usage: strategy_overlap allreduce [bytes] [ms] [steps <= %d]\n", MAXSTEPS);
        return 2;
    }
    if (plx_comm_init(NULL, &b.c)) {
        fprintf(stderr, "strategy_overlap: %s\n", plx_last_error());
        return 2;
    }
    ar_buf = calloc(ar_count, sizeof(float));
    double t[3];
    int rc = ar_buf ? measure(&b, 3, steps, allreduce_step, t) : 1;
    if (!rc && plx_comm_rank(b.c) == 0) {
        printf("backend %s, %d ranks: allreduce of %zu bytes, %.1f ms of compute (%s) between issue and wait, median "
               "of %d steps\n", plx_comm_backend(b.c), plx_comm_size(b.c), ar_count * sizeof(float), ar_ms,
               spin_compute ? "spinning" : "sleeping", steps);
        printf("  blocking allreduce %.2f ms, compute %.2f ms, nonblocking + compute %.2f ms\n", t[0], t[1], t[2]);
        printf("  the nonblocking allreduce hides %.0f%% of its time\n", hidden(t[2] - t[1], t[0]));
    }
    free(ar_buf);
    plx_comm_destroy(b.c);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "allreduce"))
        return allreduce_overlap(argc, argv);
    struct bench b = {0};
    b.L = argc > 1 ? atoi(argv[1]) : 8;
    b.G = argc > 2 ? (size_t)atol(argv[2]) : 1u << 20;
    b.T = argc > 3 ? atof(argv[3]) : 20;
    int per_bucket = argc > 4 ? atoi(argv[4]) : 2, steps = argc > 5 ? atoi(argv[5]) : 9;
    if (b.L < 1 || b.G < 1 || per_bucket < 1 || steps < 1 || steps > MAXSTEPS) {
        fprintf(stderr, "usage: strategy_overlap [layers] [floats per layer] [ms per layer] [layers per bucket] "
                        "[steps <= %d]\n", MAXSTEPS);
        return 2;
    }
    if (plx_comm_init(NULL, &b.c)) {
        fprintf(stderr, "strategy_overlap: %s\n", plx_last_error());
        return 2;
    }
    int me = plx_comm_rank(b.c), P = plx_comm_size(b.c), L = b.L, rc = 0;
    b.g = calloc((size_t)L, sizeof *b.g);
    b.full = calloc((size_t)L, sizeof *b.full);
    for (int l = 0; l < L; l++) {
        b.g[l] = malloc(b.G * sizeof(float));
        b.full[l] = malloc(b.G * sizeof(float));
        for (size_t i = 0; i < b.G; i++)
            b.g[l][i] = (float)(i % 7);
    }
    double comp = L * b.T;
    if (me == 0)
        printf("backend %s, %d ranks, %d layers x %zu floats (%.1f MiB), %.1f ms compute per layer (%.0f ms in all), "
               "median of %d steps\n", plx_comm_backend(b.c), P, L, b.G, (double)L * b.G * 4 / 1048576, b.T, comp,
               steps);

    struct plx_ddp_options o;
    plx_ddp_options_init(&o);
    o.bucket_cap_bytes = b.G * sizeof(float) * (size_t)per_bucket;
    double dres[2];
    if ((rc = plx_ddp_create(b.c, &o, &b.ddp)) == 0)
        for (int l = 0; l < L && !rc; l++)
            rc = plx_ddp_register(b.ddp, b.g[l], b.G, PLX_F32, NULL);
    if (!rc)
        rc = measure(&b, 2, steps, ddp_step, dres);
    if (!rc && me == 0) {
        printf("DDP, %d layer(s) per bucket (%d buckets)\n", per_bucket, plx_ddp_bucket_count(b.ddp));
        printf("  SYNC    step %8.1f ms   communication exposed %8.1f ms\n", dres[0], dres[0] - comp);
        printf("  OVERLAP step %8.1f ms   communication exposed %8.1f ms\n", dres[1], dres[1] - comp);
        printf("  OVERLAP hides %.0f%% of the communication SYNC exposes\n", hidden(dres[1] - comp, dres[0] - comp));
    }
    plx_ddp_destroy(b.ddp);

    struct plx_fsdp_options fo;
    plx_fsdp_options_init(&fo);
    double fres[2], bres[3];
    if (!rc && (rc = plx_fsdp_create(b.c, &fo, &b.fsdp)) == 0)
        for (int l = 0; l < L && !rc; l++)
            rc = plx_fsdp_add_unit(b.fsdp, b.g[l], b.G, PLX_F32, NULL);
    if (!rc)
        rc = measure(&b, 2, steps, fsdp_forward, fres);
    if (!rc && me == 0)
        printf("FSDP FULL_SHARD forward: without prefetch %.1f ms, with prefetch %.1f ms (%.0f%% faster)\n", fres[0],
               fres[1], 100.0 * (fres[0] - fres[1]) / fres[0]);
    if (!rc)
        rc = measure(&b, 3, steps, fsdp_backward, bres);
    if (!rc && me == 0) {
        printf("FSDP FULL_SHARD backward (prefetching): no reduction %.1f ms, reduce_grad %.1f ms, ireduce_grad "
               "%.1f ms\n", bres[0], bres[1], bres[2]);
        printf("  reduce-scatter exposed: reduce_grad %.1f ms, ireduce_grad %.1f ms\n", bres[1] - bres[0],
               bres[2] - bres[0]);
        printf("  ireduce_grad hides %.0f%% of the reduce-scatter time\n",
               hidden(bres[2] - bres[0], bres[1] - bres[0]));
    }
    plx_fsdp_destroy(b.fsdp);
    for (int l = 0; l < L; l++) {
        free(b.g[l]);
        free(b.full[l]);
    }
    free(b.g);
    free(b.full);
    plx_comm_destroy(b.c);
    return rc ? 1 : 0;
}
