/* strategy_overlap - how much communication DDP OVERLAP hides versus SYNC,
 * and what FSDP prefetch gains, with a synthetic model: L layers of G floats,
 * and "compute" of a set duration per layer (a sleep, like a GPU kernel the
 * host waits for). Run under plexus-run, e.g.
 *   plexus-run -n 4 bench/strategy_overlap [layers] [floats per layer] [ms per layer]
 * Each figure is the median of 5 steps of the slowest rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/strategy.h"

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

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double slowest_median(struct plx_comm *c, double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp);
    double m = t[n / 2], worst = m;
    plx_allreduce(c, &m, &worst, 1, PLX_F64, PLX_MAX);
    return worst;
}

int main(int argc, char **argv)
{
    int L = argc > 1 ? atoi(argv[1]) : 8;
    size_t G = argc > 2 ? (size_t)atol(argv[2]) : 1u << 20;
    double T = argc > 3 ? atof(argv[3]) : 20;
    struct plx_comm *c;
    if (plx_comm_init(NULL, &c)) {
        fprintf(stderr, "strategy_overlap: %s\n", plx_last_error());
        return 2;
    }
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    float **g = calloc((size_t)L, sizeof *g);
    for (int l = 0; l < L; l++) {
        g[l] = malloc(G * sizeof(float));
        for (size_t i = 0; i < G; i++)
            g[l][i] = (float)(i % 7);
    }
    struct plx_ddp_options o;
    plx_ddp_options_init(&o);
    o.bucket_cap_bytes = G * sizeof(float) * 2; /* two layers per bucket */
    struct plx_ddp *d;
    plx_ddp_create(c, &o, &d);
    for (int l = 0; l < L; l++)
        plx_ddp_register(d, g[l], G, PLX_F32, NULL);
    double res[2];
    for (int mode = 0; mode < 2; mode++) {
        double t[6];
        for (int s = 0; s < 6; s++) {
            plx_barrier(c);
            double t0 = now_ms();
            plx_ddp_begin(d, mode ? PLX_DDP_OVERLAP : PLX_DDP_SYNC);
            for (int l = L - 1; l >= 0; l--) {
                compute(T);
                plx_ddp_ready(d, l);
            }
            if (plx_ddp_finish(d)) {
                fprintf(stderr, "rank %d: %s\n", me, plx_last_error());
                return 1;
            }
            t[s] = now_ms() - t0;
        }
        res[mode] = slowest_median(c, t + 1, 5);
    }
    double comp = L * T, exposed_sync = res[0] - comp, exposed_overlap = res[1] - comp;
    if (me == 0) {
        printf("DDP, %d ranks, %d layers x %zu floats (%.1f MiB), %.1f ms compute per layer (%.0f ms in all)\n", P, L,
               G, (double)L * G * 4 / 1048576, T, comp);
        printf("  SYNC    step %8.1f ms   communication exposed %8.1f ms\n", res[0], exposed_sync);
        printf("  OVERLAP step %8.1f ms   communication exposed %8.1f ms\n", res[1], exposed_overlap);
        printf("  OVERLAP hides %.0f%% of the communication SYNC exposes\n",
               100.0 * (1 - exposed_overlap / (exposed_sync > 0 ? exposed_sync : 1)));
    }
    plx_ddp_destroy(d);

    /* FSDP FULL_SHARD forward: gather each unit, then compute on it. */
    struct plx_fsdp *f;
    struct plx_fsdp_options fo;
    plx_fsdp_options_init(&fo);
    plx_fsdp_create(c, &fo, &f);
    float **full = calloc((size_t)L, sizeof *full);
    for (int l = 0; l < L; l++) {
        plx_fsdp_add_unit(f, g[l], G, PLX_F32, NULL);
        full[l] = malloc(G * sizeof(float));
    }
    double fres[2];
    for (int pf = 0; pf < 2; pf++) {
        double t[6];
        for (int s = 0; s < 6; s++) {
            plx_barrier(c);
            double t0 = now_ms();
            if (pf)
                plx_fsdp_prefetch(f, 0, full[0]);
            for (int l = 0; l < L; l++) {
                plx_fsdp_gather(f, l, full[l]);
                if (pf && l + 1 < L)
                    plx_fsdp_prefetch(f, l + 1, full[l + 1]);
                compute(T);
            }
            t[s] = now_ms() - t0;
        }
        fres[pf] = slowest_median(c, t + 1, 5);
    }
    if (me == 0)
        printf("FSDP FULL_SHARD forward: without prefetch %.1f ms, with prefetch %.1f ms (%.0f%% faster)\n", fres[0],
               fres[1], 100.0 * (fres[0] - fres[1]) / fres[0]);
    plx_fsdp_destroy(f);
    plx_comm_destroy(c);
    return 0;
}
