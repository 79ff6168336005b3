/* FSDP gradients on sim ranks, for FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and
 * (P even) HYBRID_SHARD, units of 1, P-1, 1009 and 4099 elements:
 *  - accumulation: two reduce_grad calls before zero_grad leave the sum of
 *    both means in the gradient shard (the old reduce_grad overwrote it);
 *    zero_grad of one unit or of every unit clears it;
 *  - ireduce_grad issued while a prefetch is in flight, as backward does,
 *    gives bit-identical shards and gathers to blocking reduce_grad, also
 *    when one rank lags (so ranks of one node see reductions complete at
 *    different calls, other nodes not) and reductions are waited for in the reverse of
 *    their issue order (HYBRID_SHARD's inter-node stages must still pair up);
 *  - clip_grad_norm with norm types 2, 1 and inf against the norm of the
 *    whole mean gradient computed here, PyTorch's coefficient
 *    max_norm / (total + 1e-6) applied only when below 1.
 * usage: test_fsdp_grad P */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/strategy.h"
#include "ranks.h"

static int failures, P;
enum { NU = 4 };

static size_t count_of(int u)
{
    size_t c[NU] = {1, (size_t)(P > 1 ? P - 1 : 1), 1009, 4099};
    return c[u];
}

static float param_val(int u, size_t i)
{
    return (float)((i * 7 + (size_t)u * 13) % 101) / 8.0f;
}

/* Gradient of micro-batch b on rank r: small integers, so sums are exact. */
static float grad_val(int u, size_t i, int r, int b)
{
    return (float)((i + (size_t)u + (size_t)r * 3 + (size_t)b * 5) % 17) - 8.0f;
}

static double mean_grad(int u, size_t i, int b)
{
    double m = 0;
    for (int r = 0; r < P; r++)
        m += grad_val(u, i, r, b);
    return m / P;
}

static struct plx_fsdp *make(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh, int *units)
{
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.strategy = strategy;
    o.mesh = mesh;
    struct plx_fsdp *f = NULL;
    CHECK(plx_fsdp_create(ctx->comm, &o, &f) == 0);
    if (!f)
        return NULL;
    float *full = malloc(count_of(NU - 1) * sizeof(float));
    for (int u = 0; u < NU; u++) {
        for (size_t i = 0; i < count_of(u); i++)
            full[i] = param_val(u, i);
        CHECK(plx_fsdp_add_unit(f, full, count_of(u), PLX_F32, &units[u]) == 0);
    }
    free(full);
    return f;
}

static void fill_grad(float *g, int u, int r, int b)
{
    for (size_t i = 0; i < count_of(u); i++)
        g[i] = grad_val(u, i, r, b);
}

/* Does every unit's shard hold sum over batches in mask of the mean? */
static int shards_hold(struct plx_fsdp *f, const int *units, unsigned mask)
{
    int ok = 1;
    for (int u = 0; u < NU; u++) {
        size_t len, off = plx_fsdp_shard_offset(f, units[u]);
        const float *gs = plx_fsdp_grad_shard(f, units[u], &len);
        for (size_t i = 0; i < len; i++) {
            double want = 0;
            for (int b = 0; b < 3; b++)
                if (mask & (1u << b))
                    want += mean_grad(u, off + i, b);
            ok &= fabs(gs[i] - want) <= 1e-6 * fabs(want) + 1e-6;
        }
    }
    return ok;
}

static void accumulation_case(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh)
{
    int units[NU];
    struct plx_fsdp *f = make(ctx, strategy, mesh, units);
    if (!f)
        return;
    float *g = malloc(count_of(NU - 1) * sizeof(float));
    CHECK(shards_hold(f, units, 0)); /* shards start zeroed */
    for (int b = 0; b < 2; b++) /* two micro-batches */
        for (int u = NU - 1; u >= 0; u--) {
            fill_grad(g, u, ctx->rank, b);
            CHECK(plx_fsdp_reduce_grad(f, units[u], g) == 0);
        }
    CHECK(shards_hold(f, units, 1u | 2u));
    CHECK(plx_fsdp_zero_grad(f, -1) == 0);
    CHECK(shards_hold(f, units, 0));
    for (int u = 0; u < NU; u++) {
        fill_grad(g, u, ctx->rank, 2);
        CHECK(plx_fsdp_reduce_grad(f, units[u], g) == 0);
    }
    CHECK(shards_hold(f, units, 4u));
    /* zero_grad of one unit leaves the others */
    CHECK(plx_fsdp_zero_grad(f, units[2]) == 0);
    size_t len;
    const float *gs = plx_fsdp_grad_shard(f, units[2], &len);
    int zero = 1;
    for (size_t i = 0; i < len; i++)
        zero &= gs[i] == 0.0f;
    CHECK(zero);
    gs = plx_fsdp_grad_shard(f, units[3], &len);
    CHECK(len == 0 || gs[0] == (float)mean_grad(3, plx_fsdp_shard_offset(f, units[3]), 2));
    CHECK(plx_fsdp_zero_grad(f, NU) == PLX_ERR_INVALID_ARG);
    CHECK(plx_fsdp_zero_grad(f, -2) == PLX_ERR_INVALID_ARG);
    free(g);
    plx_fsdp_destroy(f);
}

/* Backward of FULL_SHARD: gather unit u (prefetched), prefetch u-1, reduce
 * u's gradient; blocking (a) and nonblocking (b) must agree bit for bit. */
static void ireduce_case(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh)
{
    int ua[NU], ub[NU];
    struct plx_fsdp *a = make(ctx, strategy, mesh, ua), *b = make(ctx, strategy, mesh, ub);
    if (!a || !b)
        return;
    size_t big = count_of(NU - 1);
    float *ga[NU], *gb[NU], *fa = malloc(big * sizeof(float)), *fb[NU];
    for (int u = 0; u < NU; u++) {
        ga[u] = malloc(count_of(u) * sizeof(float));
        gb[u] = malloc(count_of(u) * sizeof(float));
        fb[u] = calloc(count_of(u), sizeof(float));
    }
    for (int mb = 0; mb < 2; mb++) {
        CHECK(plx_fsdp_prefetch(b, ub[NU - 1], fb[NU - 1]) == 0);
        for (int u = NU - 1; u >= 0; u--) {
            CHECK(plx_fsdp_gather(a, ua[u], fa) == 0);
            fill_grad(ga[u], u, ctx->rank, mb);
            CHECK(plx_fsdp_reduce_grad(a, ua[u], ga[u]) == 0);

            CHECK(plx_fsdp_gather(b, ub[u], fb[u]) == 0);
            if (u > 0) /* in flight together with the reduction below */
                CHECK(plx_fsdp_prefetch(b, ub[u - 1], fb[u - 1]) == 0);
            fill_grad(gb[u], u, ctx->rank, mb); /* borrowed until the wait */
            CHECK(plx_fsdp_ireduce_grad(b, ub[u], gb[u]) == 0);
            if (ctx->rank % 4 == 1) /* one node out of step inside, the other not */
                nanosleep(&(struct timespec){0, 2000000}, NULL);
            int same = 1;
            for (size_t i = 0; i < count_of(u); i++)
                same &= fb[u][i] == param_val(u, i);
            CHECK(same);
        }
        if (mb == 1) /* the first issued last: HYBRID_SHARD launches earlier stages first */
            for (int u = 0; u < NU; u++)
                CHECK(plx_fsdp_wait_grad(b, ub[u]) == 0);
        CHECK(plx_fsdp_wait_grad(b, -1) == 0);
        CHECK(plx_fsdp_wait_grad(b, -1) == 0); /* nothing in flight: no-op */
    }
    /* A burst: every reduction issued back to back while one rank lags, a
     * pause in which every reduce-scatter completes, then one call that
     * polls (a gather): ranks of the lagging node find several complete at
     * once, the others one by one, and still launch HYBRID_SHARD's second
     * stages in the same order. */
    for (int u = NU - 1; u >= 0; u--) {
        fill_grad(ga[u], u, ctx->rank, 2);
        CHECK(plx_fsdp_reduce_grad(a, ua[u], ga[u]) == 0);
    }
    for (int u = NU - 1; u >= 0; u--) {
        fill_grad(gb[u], u, ctx->rank, 2);
        CHECK(plx_fsdp_ireduce_grad(b, ub[u], gb[u]) == 0);
        if (ctx->rank % 4 == 1)
            nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    nanosleep(&(struct timespec){0, 30000000}, NULL);
    CHECK(plx_fsdp_gather(b, ub[0], fb[0]) == 0);
    for (int u = 0; u < NU; u++)
        CHECK(plx_fsdp_wait_grad(b, ub[u]) == 0);
    /* a second ireduce of a unit in flight completes the first */
    fill_grad(ga[1], 1, ctx->rank, 2);
    CHECK(plx_fsdp_reduce_grad(a, ua[1], ga[1]) == 0);
    CHECK(plx_fsdp_reduce_grad(a, ua[1], ga[1]) == 0);
    fill_grad(gb[1], 1, ctx->rank, 2);
    CHECK(plx_fsdp_ireduce_grad(b, ub[1], gb[1]) == 0);
    CHECK(plx_fsdp_ireduce_grad(b, ub[1], gb[1]) == 0);
    CHECK(plx_fsdp_wait_grad(b, ub[1]) == 0);
    int same = 1;
    for (int u = 0; u < NU; u++) {
        size_t la, lb;
        const float *sa = plx_fsdp_grad_shard(a, ua[u], &la), *sb = plx_fsdp_grad_shard(b, ub[u], &lb);
        same &= la == lb && memcmp(sa, sb, la * sizeof(float)) == 0;
    }
    CHECK(same);
    CHECK(plx_fsdp_wait_grad(b, NU) == PLX_ERR_INVALID_ARG);
    for (int u = 0; u < NU; u++) {
        free(ga[u]);
        free(gb[u]);
        free(fb[u]);
    }
    free(fa);
    plx_fsdp_destroy(a);
    plx_fsdp_destroy(b);
}

static void clip_case(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh)
{
    const double types[] = {2.0, 1.0, INFINITY};
    for (int t = 0; t < 3; t++) {
        double p = types[t];
        int units[NU];
        struct plx_fsdp *f = make(ctx, strategy, mesh, units);
        if (!f)
            return;
        float *g = malloc(count_of(NU - 1) * sizeof(float));
        double acc = 0;
        for (int u = 0; u < NU; u++) {
            fill_grad(g, u, ctx->rank, 1);
            CHECK(plx_fsdp_reduce_grad(f, units[u], g) == 0);
            for (size_t i = 0; i < count_of(u); i++) {
                double m = fabs(mean_grad(u, i, 1));
                acc = isinf(p) ? fmax(acc, m) : acc + pow(m, p);
            }
        }
        double want = isinf(p) ? acc : pow(acc, 1 / p), norm = -1;
        /* max_norm above the norm: measured, nothing scaled */
        CHECK(plx_fsdp_clip_grad_norm_p(f, 2 * want, p, &norm) == 0);
        CHECK(fabs(norm - want) <= 1e-6 * want);
        CHECK(shards_hold(f, units, 2u));
        /* max_norm below: every element times max_norm / (norm + 1e-6) */
        double max_norm = want / 3, coef = max_norm / (norm + 1e-6);
        CHECK(plx_fsdp_clip_grad_norm_p(f, max_norm, p, &norm) == 0);
        int ok = 1;
        for (int u = 0; u < NU; u++) {
            size_t len, off = plx_fsdp_shard_offset(f, units[u]);
            const float *gs = plx_fsdp_grad_shard(f, units[u], &len);
            for (size_t i = 0; i < len; i++) {
                double w = mean_grad(u, off + i, 1) * coef;
                ok &= fabs(gs[i] - w) <= 1e-6 * fabs(w) + 1e-7;
            }
        }
        CHECK(ok);
        double after = -1;
        CHECK(plx_fsdp_clip_grad_norm_p(f, -1, p, &after) == 0); /* measure only */
        CHECK(fabs(after - max_norm) <= 1e-5 * max_norm);
        CHECK(plx_fsdp_clip_grad_norm_p(f, 1, 0, NULL) == PLX_ERR_INVALID_ARG);
        if (ctx->rank == 0 && strategy == PLX_FSDP_FULL_SHARD)
            printf("clip norm %g over %d ranks: %.9g (reference %.9g)\n", p, P, norm, want);
        free(g);
        plx_fsdp_destroy(f);
    }
}

static int rank_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    int strategies[] = {PLX_FSDP_FULL_SHARD, PLX_FSDP_SHARD_GRAD_OP, PLX_FSDP_NO_SHARD, PLX_FSDP_HYBRID_SHARD};
    for (int s = 0; s < 4; s++) {
        struct plx_mesh *m = NULL;
        if (strategies[s] == PLX_FSDP_HYBRID_SHARD) {
            if (P % 2)
                continue;
            CHECK(plx_mesh_create(ctx->comm, 2, &m) == 0);
        }
        accumulation_case(ctx, strategies[s], m);
        ireduce_case(ctx, strategies[s], m);
        clip_case(ctx, strategies[s], m);
        plx_mesh_destroy(m);
    }
    return failures != 0;
}

int main(int argc, char **argv)
{
    P = argc > 1 ? atoi(argv[1]) : 2;
    int rc = run_ranks(P, "sim", NULL, 60000, rank_fn, NULL);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("fsdp gradient checks passed on %d ranks\n", P);
    return rc || failures;
}
