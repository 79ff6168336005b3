/* FSDP in 16 bits on sim ranks (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and,
 * for even P, HYBRID_SHARD):
 *  - f16 and bf16 units: gathers return the values bit for bit, the reduced
 *    gradient is the mean within one 16-bit rounding, two reductions
 *    accumulate, clipping reads and scales 16-bit shards;
 *  - mixed precision (f32 masters, param_dtype bf16): gathered parameters
 *    and kept full copies are the masters rounded to bf16 (rounded here by
 *    an independent round-to-nearest-even), also after an update of the
 *    masters and a regather; gradients passed in bf16 and reduced in bf16
 *    land in the f32 gradient shard within bf16's rounding of the mean; with
 *    reduce_dtype f32 within f32's;
 *  - an options struct of the first version (before param_dtype) is read
 *    only as far as its struct_size: garbage past it changes nothing.
 * usage: test_fsdp_precision P */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/strategy.h"
#include "ranks.h"

static int failures, P;
enum { NU = 3 };

static size_t count_of(int u)
{
    size_t c[NU] = {1, (size_t)(P > 1 ? 2 * P - 1 : 3), 1031};
    return c[u];
}

static uint16_t to_bf16(float x) /* round to nearest even; no NaNs here */
{
    uint32_t b;
    memcpy(&b, &x, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

static uint16_t to_f16_exact(float x) /* x representable in f16 and normal or zero */
{
    uint32_t b;
    memcpy(&b, &x, 4);
    uint16_t s = (uint16_t)((b >> 16) & 0x8000u);
    if ((b & 0x7fffffffu) == 0)
        return s;
    int e = (int)((b >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(s | (uint16_t)(e << 10) | (uint16_t)((b >> 13) & 0x3ffu));
}

static float from_f16(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

/* Values exact in both 16-bit types: k/8 for k < 101 (at most 7 bits). */
static float exact_param(int u, size_t i)
{
    return (float)((i * 7 + (size_t)u * 13) % 101) / 8.0f - 6.0f;
}

static float exact_grad(int u, size_t i, int r, int b)
{
    return (float)((i + (size_t)u + (size_t)r * 3 + (size_t)b * 5) % 17) - 8.0f;
}

/* f32 masters that bf16 cannot hold. */
static float master_param(int u, size_t i)
{
    return 1.0f + (float)((i * 37 + (size_t)u * 11) % 1000) * 1.37e-3f - (float)(i % 3);
}

static float fine_grad(int u, size_t i, int r)
{
    return (float)sin((double)(i * 3 + (size_t)u + (size_t)r * 7)) * 3.3f;
}

static struct plx_fsdp *create(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh, int pdt, int rdt)
{
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.strategy = strategy;
    o.mesh = mesh;
    o.param_dtype = pdt;
    o.reduce_dtype = rdt;
    struct plx_fsdp *f = NULL;
    CHECK(plx_fsdp_create(ctx->comm, &o, &f) == 0);
    return f;
}

static uint16_t enc(float x, int dt)
{
    return dt == PLX_BF16 ? to_bf16(x) : to_f16_exact(x);
}

static float dec(uint16_t h, int dt)
{
    return dt == PLX_BF16 ? from_bf16(h) : from_f16(h);
}

/* Units stored in 16 bits. */
static void lowp_units(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh, int dt)
{
    struct plx_fsdp *f = create(ctx, strategy, mesh, -1, -1);
    if (!f)
        return;
    size_t big = count_of(NU - 1);
    uint16_t *buf = malloc(big * 2), *out = malloc(big * 2);
    int units[NU];
    for (int u = 0; u < NU; u++) {
        for (size_t i = 0; i < count_of(u); i++)
            buf[i] = enc(exact_param(u, i), dt);
        CHECK(plx_fsdp_add_unit(f, buf, count_of(u), dt, &units[u]) == 0);
    }
    double half_ulp = dt == PLX_BF16 ? 1.0 / 256 : 1.0 / 2048; /* relative, plus the f32 sum's error */
    for (int b = 0; b < 2; b++)
        for (int u = 0; u < NU; u++) {
            memset(out, 0xff, big * 2);
            CHECK(plx_fsdp_gather(f, units[u], out) == 0);
            int same = 1;
            for (size_t i = 0; i < count_of(u); i++)
                same &= out[i] == enc(exact_param(u, i), dt);
            CHECK(same);
            for (size_t i = 0; i < count_of(u); i++)
                buf[i] = enc(exact_grad(u, i, ctx->rank, b) / 4, dt);
            CHECK(plx_fsdp_reduce_grad(f, units[u], buf) == 0);
        }
    int ok = 1;
    for (int u = 0; u < NU; u++) {
        size_t len, off = plx_fsdp_shard_offset(f, units[u]);
        const uint16_t *gs = plx_fsdp_grad_shard(f, units[u], &len);
        for (size_t i = 0; i < len; i++) {
            double want = 0;
            for (int b = 0; b < 2; b++)
                for (int r = 0; r < P; r++)
                    want += exact_grad(u, off + i, r, b) / 4.0 / P;
            /* each mean rounds once, the sum once more */
            ok &= fabs(dec(gs[i], dt) - want) <= 3 * half_ulp * fabs(want) + 1e-7;
        }
    }
    CHECK(ok);
    double norm = 0;
    CHECK(plx_fsdp_clip_grad_norm_p(f, 0.5, INFINITY, &norm) == 0);
    CHECK(norm > 0.5);
    CHECK(plx_fsdp_clip_grad_norm_p(f, -1, INFINITY, &norm) == 0);
    CHECK(fabs(norm - 0.5) <= 2 * half_ulp);
    free(buf);
    free(out);
    plx_fsdp_destroy(f);
}

/* f32 masters, bf16 parameters, gradients reduced in rdt. */
static void mixed(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh, int rdt)
{
    struct plx_fsdp *f = create(ctx, strategy, mesh, PLX_BF16, rdt);
    if (!f)
        return;
    size_t big = count_of(NU - 1);
    float *m = malloc(big * 4);
    uint16_t *out = malloc(big * 2), *g = malloc(big * 2);
    int units[NU];
    for (int u = 0; u < NU; u++) {
        for (size_t i = 0; i < count_of(u); i++)
            m[i] = master_param(u, i);
        CHECK(plx_fsdp_add_unit(f, m, count_of(u), PLX_F32, &units[u]) == 0);
    }
    for (int u = 0; u < NU; u++) {
        size_t len, off = plx_fsdp_shard_offset(f, units[u]);
        const float *ms = plx_fsdp_shard(f, units[u], &len);
        int exact = 1; /* masters stay f32 */
        for (size_t i = 0; i < len; i++)
            exact &= ms[i] == master_param(u, off + i);
        CHECK(exact);
        CHECK(plx_fsdp_prefetch(f, units[u], out) == 0);
        CHECK(plx_fsdp_gather(f, units[u], out) == 0);
        int same = 1;
        for (size_t i = 0; i < count_of(u); i++)
            same &= out[i] == to_bf16(master_param(u, i));
        CHECK(same);
        const uint16_t *kept = plx_fsdp_full_params(f, units[u]);
        if (strategy == PLX_FSDP_SHARD_GRAD_OP || strategy == PLX_FSDP_NO_SHARD) {
            CHECK(kept != NULL && memcmp(kept, out, count_of(u) * 2) == 0);
            /* an optimizer step on the masters shows rounded after regather */
            float *w = plx_fsdp_shard(f, units[u], &len);
            for (size_t i = 0; i < len; i++)
                w[i] += 0.01f;
            CHECK(plx_fsdp_regather(f, units[u]) == 0);
            same = kept != NULL;
            for (size_t i = 0; same && i < count_of(u); i++)
                same &= kept[i] == to_bf16(master_param(u, i) + 0.01f);
            CHECK(same);
        }
        for (size_t i = 0; i < count_of(u); i++)
            g[i] = to_bf16(fine_grad(u, i, ctx->rank));
        CHECK(plx_fsdp_ireduce_grad(f, units[u], g) == 0);
    }
    CHECK(plx_fsdp_wait_grad(f, -1) == 0);
    /* bf16 rounds the mean once (by at most 2^-8 of its magnitude); HYBRID_SHARD
     * twice: the node's mean (bounded by the largest input), then the mean
     * across nodes. f32: the mean of bf16 inputs to f32's rounding. */
    int rounds = rdt != PLX_BF16 ? 0 : strategy == PLX_FSDP_HYBRID_SHARD ? 2 : 1;
    int ok = 1;
    for (int u = 0; u < NU; u++) {
        size_t len, off = plx_fsdp_shard_offset(f, units[u]);
        const float *gs = plx_fsdp_grad_shard(f, units[u], &len);
        for (size_t i = 0; i < len; i++) {
            double want = 0, big = 0;
            for (int r = 0; r < P; r++) {
                double x = from_bf16(to_bf16(fine_grad(u, off + i, r)));
                want += x;
                big = fmax(big, fabs(x));
            }
            want /= P;
            double tol = rounds == 0 ? 1e-6 * big + 1e-7 : rounds == 1 ? fabs(want) / 256 + 1e-7 : 2 * big / 256;
            if (!(fabs(gs[i] - want) <= tol) && ok)
                fprintf(stderr, "strategy %d rdt %d unit %d element %zu: %.9g, want %.9g\n", strategy, rdt, u,
                        off + i, gs[i], want);
            ok &= fabs(gs[i] - want) <= tol;
        }
    }
    CHECK(ok);
    free(m);
    free(out);
    free(g);
    plx_fsdp_destroy(f);
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
        lowp_units(ctx, strategies[s], m, PLX_F16);
        lowp_units(ctx, strategies[s], m, PLX_BF16);
        mixed(ctx, strategies[s], m, PLX_BF16);
        mixed(ctx, strategies[s], m, PLX_F32);
        plx_mesh_destroy(m);
    }
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.param_dtype = PLX_I32;
    struct plx_fsdp *f = NULL;
    CHECK(plx_fsdp_create(ctx->comm, &o, &f) == PLX_ERR_INVALID_ARG);
    /* A caller built against the first options struct (no param_dtype,
     * reduce_dtype, offload): whatever lies past it is not read. */
    memset(&o, 0x55, sizeof o);
    o.struct_size = (uint32_t)offsetof(struct plx_fsdp_options, param_dtype);
    o.strategy = PLX_FSDP_FULL_SHARD;
    o.mesh = NULL;
    o.optim_bytes_per_param = 8;
    CHECK(plx_fsdp_create(ctx->comm, &o, &f) == 0);
    if (f) {
        float x[5] = {1.5f, 2.5f, 3.5f, 4.5f, 5.5f}, y[5] = {0};
        CHECK(plx_fsdp_add_unit(f, x, 5, PLX_F32, NULL) == 0);
        CHECK(plx_fsdp_gather(f, 0, y) == 0);
        CHECK(memcmp(x, y, sizeof x) == 0);
        plx_fsdp_destroy(f);
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
        printf("fsdp precision checks passed on %d ranks\n", P);
    return rc || failures;
}
