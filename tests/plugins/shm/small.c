/* small.c - one rank of the small-allreduce test on shm (started by
 * plexus-run). Allreduces of at most 16 bytes take their own path (one
 * cache line per rank, plugins/shm/coll.c); this checks it and its edges.
 *   values:   every dtype x op at 1 .. 20 elements (past the path's end for
 *             every element size), in place and out of place, each element
 *             against a serial reference (tests/common/matrix.c); then f32
 *             and f64 sums and products of values whose rounding depends on
 *             the order: bit for bit the serial rank-order result on every
 *             rank, and for avg, min and max the same bits on every rank.
 *   mismatch: (2 ranks) ranks that disagree on the count (both small), on the
 *             dtype (same bytes), and on the path (8 bytes against 400), each
 *             on its own communicator: both ranks fail with PLX_ERR_MISMATCH
 *             naming both calls; then on a fresh communicator every rank
 *             still agrees.
 * usage: small values|mismatch */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix.h"
#include "plexus/plexus.h"

enum { MAXN = 20 };

static long values_exact(struct plx_comm *c)
{
    static char sb[MAXN * 8 * 8 + 8], rb[MAXN * 8 * 8 + 8];
    long bad = 0;
    int cases = 0;
    for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++)
        for (int op = 0; op < PLX_REDOP_COUNT; op++)
            for (size_t n = 1; n <= MAXN && matrix_op_fits(dt, op); n++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    struct matrix_case k = {.coll = PLX_COLL_ALLREDUCE, .dtype = dt, .op = op, .count = n,
                                            .inplace = inplace};
                    long b = matrix_case(c, &k, sb, rb);
                    if (b < 0)
                        return -1;
                    bad += b;
                    cases++;
                }
    if (plx_comm_rank(c) == 0)
        printf("exact: %d cases, %ld wrong elements on rank 0\n", cases, bad);
    return bad;
}

/* x[i] of rank r: a value whose sums and products round. */
static double inexact(int r, size_t i)
{
    return 0.1 * (r + 1) + 1.0 / (3.0 + (double)i) + (r % 2 ? 1e-7 : 0);
}

/* Rank order, in the dtype's own arithmetic. */
static void reference(int P, int dt, int op, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == PLX_F32) {
            float a = (float)inexact(0, i);
            for (int r = 1; r < P; r++)
                a = op == PLX_PROD ? a * (float)inexact(r, i) : a + (float)inexact(r, i);
            ((float *)out)[i] = a;
        } else {
            double a = inexact(0, i);
            for (int r = 1; r < P; r++)
                a = op == PLX_PROD ? a * inexact(r, i) : a + inexact(r, i);
            ((double *)out)[i] = a;
        }
    }
}

static long values_bits(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    const int dts[] = {PLX_F32, PLX_F64}, ops[] = {PLX_SUM, PLX_PROD, PLX_AVG, PLX_MIN, PLX_MAX};
    long bad = 0;
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 5; o++)
            for (size_t n = 1; n <= MAXN / 2; n++) {
                int dt = dts[d], op = ops[o];
                size_t es = plx_dtype_size(dt), bytes = n * es;
                unsigned char in[MAXN * 8], out[MAXN * 8], ref[MAXN * 8], *all = malloc(bytes * (size_t)P);
                for (size_t i = 0; i < n; i++) {
                    if (dt == PLX_F32)
                        ((float *)in)[i] = (float)inexact(me, i);
                    else
                        ((double *)in)[i] = inexact(me, i);
                }
                if (!all || plx_allreduce(c, in, out, n, dt, op) != 0 ||
                    plx_allgather(c, out, all, bytes, PLX_U8) != 0) {
                    printf("rank %d: %s %s n=%zu: %s\n", me, plx_dtype_name(dt), plx_redop_name(op), n,
                           plx_last_error());
                    free(all);
                    return -1;
                }
                for (int r = 0; r < P; r++)
                    if (memcmp(all + (size_t)r * bytes, out, bytes)) {
                        printf("rank %d: %s %s n=%zu: rank %d's result differs from this rank's\n", me,
                               plx_dtype_name(dt), plx_redop_name(op), n, r);
                        bad++;
                    }
                if (op == PLX_SUM || op == PLX_PROD) {
                    reference(P, dt, op, n, ref);
                    if (memcmp(ref, out, bytes)) {
                        printf("rank %d: %s %s n=%zu: not the bits of the rank-order reduction\n", me,
                               plx_dtype_name(dt), plx_redop_name(op), n);
                        bad++;
                    }
                }
                free(all);
            }
    if (me == 0)
        printf("bits: %ld differences on rank 0\n", bad);
    return bad;
}

/* One disagreement on its own communicator: both ranks must fail with a
 * mismatch that names both calls. */
static int disagree(struct plx_comm *c, int which)
{
    int me = plx_comm_rank(c);
    float f[100] = {0}, g[100];
    int32_t i[100] = {0}, j[100];
    const char *want0, *want1;
    int rc;
    switch (which) {
    case 0:
        rc = plx_allreduce(c, f, g, me ? 3 : 2, PLX_F32, PLX_SUM);
        want0 = "count 2";
        want1 = "count 3";
        break;
    case 1:
        rc = me ? plx_allreduce(c, i, j, 2, PLX_I32, PLX_SUM) : plx_allreduce(c, f, g, 2, PLX_F32, PLX_SUM);
        want0 = "f32";
        want1 = "i32";
        break;
    default:
        rc = plx_allreduce(c, f, g, me ? 100 : 2, PLX_F32, PLX_SUM);
        want0 = "count 2";
        want1 = "count 100";
        break;
    }
    const char *msg = plx_last_error();
    printf("rank %d: case %d: %s: %s\n", me, which, plx_err_name(rc), msg);
    if (rc != PLX_ERR_MISMATCH || !strstr(msg, want0) || !strstr(msg, want1)) {
        printf("rank %d: case %d: expected PLX_ERR_MISMATCH naming '%s' and '%s'\n", me, which, want0, want1);
        return 1;
    }
    return 0;
}

static int mismatch(struct plx_comm *world)
{
    int me = plx_comm_rank(world), bad = 0;
    if (plx_comm_size(world) != 2) {
        printf("mismatch: needs 2 ranks\n");
        return 1;
    }
    struct plx_comm *sub[4] = {0};
    for (int k = 0; k < 4; k++)
        if (plx_comm_split(world, 0, me, &sub[k]) != 0) {
            printf("rank %d: split: %s\n", me, plx_last_error());
            return 1;
        }
    for (int k = 0; k < 3; k++)
        bad += disagree(sub[k], k);
    float x = (float)(me + 1), y = 0;
    if (plx_allreduce(sub[3], &x, &y, 1, PLX_F32, PLX_SUM) != 0 || y != 3.0f) {
        printf("rank %d: the fresh communicator: %s, %g\n", me, plx_last_error(), (double)y);
        bad++;
    }
    for (int k = 0; k < 4; k++)
        plx_comm_destroy(sub[k]);
    return bad;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "values";
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "shm";
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        fprintf(stderr, "small: init: %s\n", plx_last_error());
        return 1;
    }
    long bad;
    int me = plx_comm_rank(c);
    if (!strcmp(mode, "mismatch")) {
        bad = mismatch(c);
    } else {
        bad = values_exact(c);
        long b = bad < 0 ? -1 : values_bits(c);
        bad = b < 0 ? -1 : bad + b;
    }
    plx_comm_destroy(c);
    if (bad) {
        printf("rank %d: small %s: FAILED (%ld)\n", me, mode, bad);
        return 1;
    }
    printf("rank %d: small %s: ok\n", me, mode);
    return 0;
}
