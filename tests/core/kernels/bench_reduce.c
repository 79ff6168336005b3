/* bench_reduce.c - speed of the reduction kernels against memcpy (not a
 * test). Per size: the best of several runs over buffers touched
 * beforehand (fresh pages would dominate). GB/s counts the output bytes per
 * second; "traffic" counts bytes read + written (reduce3: 3 per output byte,
 * memcpy: 2).
 * usage: bench_reduce [MiB...]   (default 1 16 64) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"
#include "reduce.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { KIND_MEMCPY = -1 };

/* Best seconds per call of one kernel over `bytes` of output. */
static double best_time(int dtype, int op, int inplace, char *out, char *a, char *b, size_t bytes)
{
    size_t n = dtype == KIND_MEMCPY ? bytes : bytes / plx_dtype_size(dtype);
    double best = 1e30;
    int reps = bytes >= (32u << 20) ? 5 : bytes >= (4u << 20) ? 10 : 50;
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        if (dtype == KIND_MEMCPY)
            memcpy(out, a, n);
        else if (inplace)
            plx__reduce(a, b, n, dtype, op);
        else
            plx__reduce3(out, a, b, n, dtype, op);
        double t = now_s() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t mib[16] = {1, 16, 64};
    int nsz = 3;
    if (argc > 1) {
        nsz = 0;
        for (int i = 1; i < argc && nsz < 16; i++)
            mib[nsz++] = strtoul(argv[i], NULL, 10);
    }
    struct { const char *name; int dtype, op, inplace; } k[] = {
        {"memcpy", KIND_MEMCPY, 0, 0},
        {"f32 sum out=a+b", PLX_F32, PLX_SUM, 0},
        {"f32 sum a+=b", PLX_F32, PLX_SUM, 1},
        {"f32 max a+=b", PLX_F32, PLX_MAX, 1},
        {"f64 sum a+=b", PLX_F64, PLX_SUM, 1},
        {"bf16 sum a+=b", PLX_BF16, PLX_SUM, 1},
        {"f16 sum a+=b", PLX_F16, PLX_SUM, 1},
        {"i32 sum a+=b", PLX_I32, PLX_SUM, 1},
    };
    printf("%-18s %8s %10s %10s %12s\n", "kernel", "MiB", "time(us)", "GB/s", "traffic GB/s");
    for (int s = 0; s < nsz; s++) {
        size_t bytes = mib[s] << 20;
        char *a = malloc(bytes), *b = malloc(bytes), *out = malloc(bytes);
        if (!a || !b || !out) {
            fprintf(stderr, "cannot allocate 3 x %zu MiB\n", mib[s]);
            return 1;
        }
        /* touch everything once; small finite values so no inf/NaN slow paths */
        for (size_t i = 0; i < bytes; i++) {
            a[i] = (char)(i % 61 + 1);
            b[i] = (char)(i % 53 + 1);
            out[i] = 0;
        }
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            double t = best_time(k[i].dtype, k[i].op, k[i].inplace, out, a, b, bytes);
            double gbs = (double)bytes / t / 1e9;
            printf("%-18s %8zu %10.1f %10.2f %12.2f\n", k[i].name, mib[s], t * 1e6, gbs,
                   gbs * (k[i].dtype == KIND_MEMCPY ? 2 : 3));
        }
        free(a);
        free(b);
        free(out);
    }
    return 0;
}
