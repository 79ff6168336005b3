/* steal_bits.c - a large shm allreduce gives the same bits whether ranks
 * steal each other's pieces ([shm] steal = true, steal.c) or each reduces
 * only its own slice (steal = false, coll.c): every piece is reduced from
 * its slice owner's input on, in rank order, whoever reduces it.
 *
 * Two communicators in the same processes, one per setting (options), take
 * the same inputs: floating-point values of mixed magnitudes, so that
 * another summation order would change the result's low bits; sizes of
 * several rounds with an uneven last one, f32 and f64, sum and avg, out of
 * place and in place, repeated so that pieces do get stolen (ranks
 * outnumber cores under plexus-run -n 4 on a small machine). Every rank
 * compares its two results bit for bit. Exit 0 if all agree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"

static struct plx_comm *open_comm(const char *name, const char *steal)
{
    static const char *on[] = {"shm.steal=true", NULL}, *off[] = {"shm.steal=false", NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.name = name;
    o.timeout_ms = 60000;
    o.overrides = strcmp(steal, "true") ? off : on;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "%s: init: %s\n", name, plx_last_error());
        exit(1);
    }
    return c;
}

/* Values whose sum depends on the order it is taken in. */
static void fill(void *p, size_t n, int dtype, int rank, unsigned seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1) + seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v = (double)(int64_t)(x % 2000001) / 1000.0 * (double)(1u << (x >> 60)) / 1024.0;
        if (dtype == PLX_F32)
            ((float *)p)[i] = (float)v;
        else
            ((double *)p)[i] = v;
    }
}

static int one(struct plx_comm *a, struct plx_comm *b, size_t n, int dtype, int op, int in_place, unsigned seed)
{
    int me = plx_comm_rank(a);
    size_t es = dtype == PLX_F32 ? 4 : 8;
    char *in = malloc(n * es), *ra = malloc(n * es), *rb = malloc(n * es);
    if (!in || !ra || !rb) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fill(in, n, dtype, me, seed);
    int rc;
    if (in_place) {
        memcpy(ra, in, n * es);
        memcpy(rb, in, n * es);
        rc = plx_allreduce(a, ra, ra, n, dtype, op);
        rc = rc ? rc : plx_allreduce(b, rb, rb, n, dtype, op);
    } else {
        rc = plx_allreduce(a, in, ra, n, dtype, op);
        rc = rc ? rc : plx_allreduce(b, in, rb, n, dtype, op);
    }
    int bad = 0;
    if (rc) {
        printf("rank %d: allreduce of %zu: %s: %s\n", me, n, plx_err_name(rc), plx_last_error());
        bad = 1;
    } else if (memcmp(ra, rb, n * es)) {
        size_t i = 0;
        while (!memcmp(ra + i * es, rb + i * es, es))
            i++;
        printf("rank %d: %zu %s %s%s: element %zu differs between steal on and off\n", me, n,
               dtype == PLX_F32 ? "f32" : "f64", op == PLX_AVG ? "avg" : "sum", in_place ? " in place" : "", i);
        bad = 1;
    }
    free(in);
    free(ra);
    free(rb);
    return bad;
}

int main(void)
{
    struct plx_comm *on = open_comm("steal_on", "true"), *off = open_comm("steal_off", "false");
    /* 1 MiB rounds: three and a bit of f32, one and a half of f64 */
    static const size_t counts[] = {(3u << 18) + 4099, (1u << 17) * 3 / 2 + 17};
    static const int dtypes[] = {PLX_F32, PLX_F64}, ops[] = {PLX_SUM, PLX_AVG};
    int bad = 0;
    for (unsigned rep = 0; rep < 4; rep++)
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < 2; k++)
                bad |= one(on, off, counts[d], dtypes[d], ops[k], (int)(rep & 1), rep * 4 + (unsigned)k);
    int all = bad;
    if (plx_allreduce(off, &bad, &all, 1, PLX_I32, PLX_MAX) != 0)
        all = 1;
    if (plx_comm_rank(on) == 0)
        printf("%s\n", all ? "FAILED" : "ok: the same bits with and without stealing");
    plx_comm_destroy(on);
    plx_comm_destroy(off);
    return all;
}
