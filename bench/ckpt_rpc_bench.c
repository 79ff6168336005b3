/* ckpt_rpc_bench - checkpoint throughput and RPC latency (run by
 * bench/ckpt_rpc.sh under plexus-run; one rank per process).
 *
 *   ckpt_rpc_bench save DIR MIB     every rank saves MIB/P MiB of one
 *                                   tensor (fsync on); prints MB/s per rank
 *   ckpt_rpc_bench load DIR MIB     loads it back in the same layout
 *   ckpt_rpc_bench load-noverify DIR MIB   the same without checksums
 *   ckpt_rpc_bench rpc              rank 0 calls rank 1's echo: 8 B and
 *                                   1 MiB each way; median and mean
 * MB/s are 10^6 bytes per second of the whole collective call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/checkpoint.h"
#include "plexus/rpc.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int ckpt(struct plx_comm *c, int save, int verify, const char *dir, size_t mib)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    size_t total = mib << 20, n = total / sizeof(float), lo = n * (size_t)me / (size_t)P,
           hi = n * (size_t)(me + 1) / (size_t)P;
    float *buf = malloc((hi - lo) * sizeof *buf);
    if (!buf)
        return 1;
    for (size_t i = lo; i < hi; i++)
        buf[i - lo] = (float)(i % 4099);
    struct plx_ckpt_item it;
    plx_ckpt_item_init(&it);
    it.name = "bench.tensor";
    it.dtype = PLX_F32;
    it.ndim = 1;
    it.shape[0] = (int64_t)n;
    it.data = buf;
    it.offset = lo;
    it.count = hi - lo;
    plx_barrier(c);
    double t0 = now();
    struct plx_ckpt_options o;
    plx_ckpt_options_init(&o);
    o.verify = verify;
    int rc = save ? plx_ckpt_save(c, dir, &it, 1, &o) : plx_ckpt_load(c, dir, &it, 1, &o);
    double dt = now() - t0;
    if (rc) {
        fprintf(stderr, "rank %d: %s\n", me, plx_last_error());
        return 1;
    }
    double mbs = (double)((hi - lo) * sizeof(float)) / dt / 1e6, lo_mbs = 0, sum = 0;
    plx_allreduce(c, &mbs, &lo_mbs, 1, PLX_F64, PLX_MIN);
    plx_allreduce(c, &mbs, &sum, 1, PLX_F64, PLX_SUM);
    if (me == 0)
        printf("%s %zu MiB on %d ranks: %.2f s; per rank %.0f MB/s (slowest %.0f MB/s)\n",
               save ? "save" : verify ? "load" : "load without checksums",
               mib, P, dt, sum / P, lo_mbs);
    free(buf);
    return 0;
}

static int h_echo(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)caller, (void)err, (void)cap;
    *res = malloc(len ? len : 1);
    memcpy(*res, a, len);
    *rl = len;
    return 0;
}

static int rpc_lat(struct plx_comm *c)
{
    int me = plx_comm_rank(c);
    struct plx_rpc *rpc;
    if (plx_rpc_create(c, NULL, &rpc) || plx_rpc_register(rpc, "echo", h_echo, NULL) || plx_barrier(c)) {
        fprintf(stderr, "rank %d: %s\n", me, plx_last_error());
        return 1;
    }
    if (me == 0) {
        size_t sizes[2] = {8, 1 << 20};
        int iters[2] = {2000, 200};
        char *msg = calloc(1, 1 << 20);
        for (int k = 0; k < 2; k++) {
            double *t = malloc((size_t)iters[k] * sizeof *t), sum = 0;
            for (int i = -iters[k] / 10; i < iters[k]; i++) { /* warm-up first */
                void *out = NULL;
                size_t n;
                double t0 = now();
                if (plx_rpc_sync(rpc, 1, "echo", msg, sizes[k], &out, &n, -1)) {
                    fprintf(stderr, "rpc: %s\n", plx_last_error());
                    return 1;
                }
                double dt = now() - t0;
                free(out);
                if (i >= 0)
                    t[i] = dt, sum += dt;
            }
            qsort(t, (size_t)iters[k], sizeof *t, cmp);
            printf("rpc_sync round trip, %zu B each way, %s: median %.1f us, mean %.1f us, p90 %.1f us (%d calls)\n",
                   sizes[k], plx_comm_backend(c), t[iters[k] / 2] * 1e6, sum / iters[k] * 1e6,
                   t[iters[k] * 9 / 10] * 1e6, iters[k]);
            free(t);
        }
        free(msg);
    }
    int rc = plx_rpc_shutdown(rpc, 60000);
    plx_rpc_destroy(rpc);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    struct plx_comm *c;
    if (plx_comm_init(NULL, &c)) {
        fprintf(stderr, "ckpt_rpc_bench: %s\n", plx_last_error());
        return 2;
    }
    int rc;
    if (!strcmp(argv[1], "rpc"))
        rc = rpc_lat(c);
    else if (argc == 4)
        rc = ckpt(c, !strcmp(argv[1], "save"), strcmp(argv[1], "load-noverify") != 0, argv[2],
                  (size_t)atol(argv[3]));
    else
        rc = 2;
    plx_comm_destroy(c);
    plx_finalize();
    return rc;
}
