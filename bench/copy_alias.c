/* copy_alias.c [BYTES] - memcpy against plx_plugin_copy (plexus/plugin.h)
 * for destinations 0..64 bytes past a page-aligned source's page offset:
 * GB/s of each, hot in cache. Shows whether this machine's memcpy has the
 * slow rep-movsb case plx_plugin_copy avoids (a malloc'd buffer sits 16
 * bytes into its page, a shared-memory slot at 0). */
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
    int reps = (int)(((size_t)256 << 20) / n) + 1;
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
    printf("# %zu bytes, source page-aligned; GB/s\n# dst offset   memcpy   plx_plugin_copy\n", n);
    for (int off = 0; off <= 64; off += 8)
        printf("%12d %8.1f %17.1f\n", off, gbps(libc_copy, d + off, s, n), gbps(plx_plugin_copy, d + off, s, n));
    free(s);
    free(d);
    return 0;
}
