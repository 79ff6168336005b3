/* test_plugin_copy.c - plx_plugin_copy (plexus/plugin.h) copies exactly n
 * bytes for every relative alignment of source and destination, through
 * whichever copy this process measured, and so does the chunked copy it
 * may pick (every alignment, across piece boundaries), touching nothing
 * around the destination; the measurement names a choice and its figures;
 * plx_plugin_move does the same for regions that overlap either way. */
#include <stdint.h>
#include <stdlib.h>

#include "plexus/plugin.h"

static int failures;
#include "check.h"

int main(void)
{
    enum { GUARD = 64, MAX = 3 * PLX_PLUGIN_COPY_PIECE + 100 };
    /* page-aligned, so the offsets below are offsets within a page */
    void *sp = NULL, *dp = NULL;
    if (posix_memalign(&sp, 4096, MAX + 4096) || posix_memalign(&dp, 4096, MAX + 4096 + 2 * GUARD))
        return 1;
    unsigned char *src = sp, *dst = dp;
    for (size_t i = 0; i < MAX + 4096; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    const size_t lens[] = {0, 1, 63, 64, PLX_PLUGIN_COPY_PIECE - 1, PLX_PLUGIN_COPY_PIECE, PLX_PLUGIN_COPY_PIECE + 1,
                           2 * PLX_PLUGIN_COPY_PIECE + 17, MAX};
    void (*const ways[])(void *, const void *, size_t) = {plx_plugin_copy, plx_plugin_copy_chunked};
    const char *const way_names[] = {"plx_plugin_copy", "plx_plugin_copy_chunked"};
    /* every source and destination offset within a cache line (so every
     * mutual misalignment), and a source near a page's end */
    for (size_t w = 0; w < 2; w++)
        for (size_t soff = 0; soff <= 64; soff++)
            for (size_t doff = 0; doff < 64; doff++)
                for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                    size_t n = lens[l];
                    unsigned char *d = dst + GUARD + doff;
                    const unsigned char *s = src + (soff == 64 ? 4080 : soff);
                    memset(d - GUARD, 0xA5, n + 2 * GUARD);
                    ways[w](d, s, n);
                    int bad = memcmp(d, s, n) != 0;
                    for (size_t g = 0; g < GUARD && !bad; g++)
                        bad = d[-1 - (ptrdiff_t)g] != 0xA5 || d[n + g] != 0xA5;
                    CHECKF(!bad, "%s: src+%zu -> dst+%zu, %zu bytes: wrong bytes or a write outside", way_names[w],
                           soff == 64 ? (size_t)4080 : soff, doff, n);
                }
    char why[200] = "";
    int pick = plx_plugin_copy_measure(why, sizeof why);
    CHECKF(pick == PLX_COPY_WHOLE || pick == PLX_COPY_CHUNKED, "measure returned %d", pick);
    CHECKF(strstr(why, "GB/s") != NULL, "measure's reason has no figures: '%s'", why);
    printf("plugin_copy: misaligned bulk copies: %s\n", why);
    /* plx_plugin_move: overlapping forward and backward, against memmove */
    unsigned char *buf = malloc(MAX + 512), *ref = malloc(MAX + 512);
    if (!buf || !ref)
        return 1;
    const long shifts[] = {-300, -16, -1, 1, 16, 300};
    for (size_t k = 0; k < sizeof shifts / sizeof *shifts; k++)
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
            size_t n = lens[l];
            for (size_t i = 0; i < MAX + 512; i++)
                buf[i] = ref[i] = (unsigned char)(i * 7 + 3);
            plx_plugin_move(buf + 300 + shifts[k], buf + 300, n > MAX - 300 ? MAX - 300 : n);
            memmove(ref + 300 + shifts[k], ref + 300, n > MAX - 300 ? MAX - 300 : n);
            CHECKF(!memcmp(buf, ref, MAX + 512), "move by %ld, %zu bytes: differs from memmove", shifts[k], n);
        }
    free(buf);
    free(ref);
    free(src);
    free(dst);
    printf("plugin_copy: %d failures\n", failures);
    return failures != 0;
}
