/* copy_alias.c [BYTES] - memcpy, 2 KiB pieces (plx_plugin_copy_chunked)
 * and plx_plugin_copy (plexus/plugin.h) for destinations 0..63 bytes past a
 * page-aligned source's page offset: GB/s of each, hot in cache, best of
 * 15 short interleaved runs (other work on the cores slows a run, never
 * speeds one up), and plx_plugin_copy over the better of the other two.
 * Shows whether this machine's memcpy has the slow rep-movsb case the
 * chunked copy avoids (a malloc'd buffer sits 16 bytes into its page, a
 * shared-memory slot at 0) and whether plx_plugin_copy picked right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plugin.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void libc_copy(void *d, const void *s, size_t n)
{
    memcpy(d, s, n);
}

static double gbps(void (*f)(void *, const void *, size_t), char *d, const char *s, size_t n)
{
    int reps = (int)(((size_t)8 << 20) / n) + 1;
    for (int i = 0; i < 10; i++)
        f(d, s, n);
    double t = now_us();
    for (int i = 0; i < reps; i++)
        f(d, s, n);
    t = now_us() - t;
    return (double)n * reps / t / 1e3;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)256 << 10;
    void *sp = NULL, *dp = NULL;
    if (posix_memalign(&sp, 4096, n + 4096) || posix_memalign(&dp, 4096, n + 4096))
        return 1;
    char *s = sp, *d = dp;
    memset(s, 1, n + 4096);
    memset(d, 2, n + 4096);
    char why[200];
    plx_plugin_copy_measure(why, sizeof why);
    printf("# %zu bytes, source page-aligned; GB/s, best of 15 short\n# this process's measurement: %s\n", n, why);
    printf("# dst offset   memcpy  chunked  plx_plugin_copy  plx/better\n");
    double worst = 1e9, ratios[64];
    for (int off = 0; off < 64; off++) {
        double g[3] = {0, 0, 0};
        void (*const f[3])(void *, const void *, size_t) = {libc_copy, plx_plugin_copy_chunked, plx_plugin_copy};
        for (int rep = 0; rep < 15; rep++)
            for (int w = 0; w < 3; w++) {
                double x = gbps(f[w], d + off, s, n);
                g[w] = x > g[w] ? x : g[w];
            }
        double better = g[0] > g[1] ? g[0] : g[1], ratio = g[2] / better;
        worst = ratio < worst ? ratio : worst;
        ratios[off] = ratio;
        printf("%12d %8.1f %8.1f %16.1f %11.2f\n", off, g[0], g[1], g[2], ratio);
    }
    int below = 0;
    for (int off = 0; off < 64; off++)
        below += ratios[off] < 0.9;
    printf("# plx_plugin_copy / better of memcpy and chunked: lowest %.2f; %d of 64 offsets below 0.90\n", worst, below);
    free(s);
    free(d);
    return 0;
}
