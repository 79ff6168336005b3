/* DDP and FSDP on sim ranks: units of size 1, P-1, a prime above 1000 and
 * 1 MiB + 3; gather, prefetch, reduce-scatter (mean), regather, clipping,
 * memory statistics, NO_SYNC accumulation and the usage errors.
 * usage: test_strategy P */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/strategy.h"
#include "ranks.h"

static int failures, P;

/* Deterministic values: parameter i of unit u; gradient on rank r. */
static float param_val(int u, size_t i)
{
    return (float)((i * 7 + (size_t)u * 13) % 101) / 8.0f;
}

static float grad_val(int u, size_t i, int r)
{
    return (float)((i + (size_t)u + (size_t)r * 3) % 17) - 8.0f;
}

static int fsdp_case(struct rank_ctx *ctx, int strategy, struct plx_mesh *mesh)
{
    struct plx_comm *c = ctx->comm;
    int me = ctx->rank;
    size_t counts[] = {1, (size_t)(P > 1 ? P - 1 : 1), 1009, (1u << 20) + 3};
    int n = 4, units[4];
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.strategy = strategy;
    o.mesh = mesh;
    struct plx_fsdp *f;
    CHECK(plx_fsdp_create(c, &o, &f) == 0);
    float *full = malloc(counts[3] * sizeof(float)), *out = malloc(counts[3] * sizeof(float)),
          *g = malloc(counts[3] * sizeof(float));
    size_t total = 0, biggest = counts[3];
    for (int u = 0; u < n; u++) {
        for (size_t i = 0; i < counts[u]; i++)
            full[i] = param_val(u, i);
        CHECK(plx_fsdp_add_unit(f, full, counts[u], PLX_F32, &units[u]) == 0);
        total += counts[u];
    }
    double sq = 0;
    for (int u = 0; u < n; u++) {
        /* gather == the original; prefetch == gather */
        memset(out, 0, counts[u] * sizeof(float));
        CHECK(plx_fsdp_gather(f, units[u], out) == 0);
        int same = 1;
        for (size_t i = 0; i < counts[u]; i++)
            same &= out[i] == param_val(u, i);
        CHECK(same);
        memset(out, 0, counts[u] * sizeof(float));
        CHECK(plx_fsdp_prefetch(f, units[u], out) == 0);
        CHECK(plx_fsdp_gather(f, units[u], out) == 0);
        same = 1;
        for (size_t i = 0; i < counts[u]; i++)
            same &= out[i] == param_val(u, i);
        CHECK(same);
        /* reduce_grad: the shard holds the mean over ranks */
        for (size_t i = 0; i < counts[u]; i++)
            g[i] = grad_val(u, i, me);
        CHECK(plx_fsdp_reduce_grad(f, units[u], g) == 0);
        size_t len, off = plx_fsdp_shard_offset(f, units[u]);
        float *gs = plx_fsdp_grad_shard(f, units[u], &len);
        int right = 1;
        for (size_t i = 0; i < len; i++) {
            double want = 0;
            for (int r = 0; r < P; r++)
                want += grad_val(u, off + i, r);
            want /= P;
            right &= fabs(gs[i] - want) <= 1e-6 * fabs(want) + 1e-6;
        }
        CHECK(right);
        for (size_t i = 0; i < counts[u]; i++) {
            double m = 0;
            for (int r = 0; r < P; r++)
                m += grad_val(u, i, r);
            m /= P;
            sq += m * m;
        }
    }
    /* clipping: the norm over the whole mean gradient, as one process sees it */
    double norm = 0;
    CHECK(plx_fsdp_clip_grad_norm(f, 0, &norm) == 0);
    CHECK(fabs(norm - sqrt(sq)) <= 1e-6 * sqrt(sq));
    double after = 0;
    CHECK(plx_fsdp_clip_grad_norm(f, norm / 2, NULL) == 0);
    CHECK(plx_fsdp_clip_grad_norm(f, 0, &after) == 0);
    CHECK(fabs(after - norm / 2) <= 1e-4 * norm);
    /* ZeRO-2: an update of the shards shows in the kept full copy after regather */
    if (strategy == PLX_FSDP_SHARD_GRAD_OP) {
        size_t len;
        float *s = plx_fsdp_shard(f, units[2], &len);
        for (size_t i = 0; i < len; i++)
            s[i] += 1.0f;
        CHECK(plx_fsdp_regather(f, units[2]) == 0);
        float *kept = plx_fsdp_full_params(f, units[2]);
        int ok = kept != NULL;
        for (size_t i = 0; ok && i < counts[2]; i++)
            ok &= kept[i] == param_val(2, i) + 1.0f;
        CHECK(ok);
    }
    struct plx_fsdp_memstats m = {.struct_size = sizeof m};
    CHECK(plx_fsdp_memory(f, &m) == 0);
    if (strategy == PLX_FSDP_FULL_SHARD) {
        /* Held bytes <= 1/P of the total + padding + one gathered unit. Padding:
         * each unit rounds up to a multiple of P, so a shard is ceil(count/P). */
        size_t shares = 0;
        for (int u = 0; u < n; u++)
            shares += (counts[u] + (size_t)P - 1) / (size_t)P * 4;
        size_t gathered = (biggest + (size_t)P - 1) / (size_t)P * (size_t)P * 4;
        CHECK(m.param_bytes <= shares);
        CHECK(m.param_bytes + m.gather_bytes <= shares + gathered);
        CHECK(m.grad_bytes <= shares);
        if (me == 0)
            printf("FULL_SHARD P=%d: params %zu B + gather %zu B held (of %zu B in total), padding %zu B, "
                   "optimizer estimate %.0f B\n", P, m.param_bytes, m.gather_bytes, total * 4, m.padding_bytes,
                   m.optim_estimate_bytes);
    }
    plx_fsdp_destroy(f);
    free(full);
    free(out);
    free(g);
    return 0;
}

static int ddp_case(struct rank_ctx *ctx)
{
    struct plx_comm *c = ctx->comm;
    int me = ctx->rank;
    size_t counts[] = {1, 1009, 300, 5};
    float *grads[4];
    struct plx_ddp_options o;
    plx_ddp_options_init(&o);
    o.bucket_cap_bytes = 1009 * 4; /* buckets: {5, 300, 1009}, {1} in reverse order (the gradient that crosses the cap stays in) */
    struct plx_ddp *d;
    CHECK(plx_ddp_create(c, &o, &d) == 0);
    for (int k = 0; k < 4; k++) {
        grads[k] = calloc(counts[k], sizeof(float));
        CHECK(plx_ddp_register(d, grads[k], counts[k], PLX_F32, NULL) == 0);
    }
    /* NO_SYNC micro-batch, then a synchronised one: the mean of the sums */
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < counts[k]; i++)
            grads[k][i] = grad_val(k, i, me);
    CHECK(plx_ddp_begin(d, PLX_DDP_NO_SYNC) == 0);
    for (int k = 3; k >= 0; k--)
        CHECK(plx_ddp_ready(d, k) == 0);
    CHECK(plx_ddp_finish(d) == 0);
    CHECK(grads[1][0] == grad_val(1, 0, me)); /* untouched */
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < counts[k]; i++)
            grads[k][i] += grad_val(k, i + 1, me);
    CHECK(plx_ddp_begin(d, PLX_DDP_OVERLAP) == 0);
    for (int k = 3; k >= 0; k--)
        CHECK(plx_ddp_ready(d, k) == 0);
    CHECK(plx_ddp_finish(d) == 0);
    CHECK(plx_ddp_bucket_count(d) == 2);
    int ok = 1;
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < counts[k]; i++) {
            double want = 0;
            for (int r = 0; r < P; r++)
                want += grad_val(k, i, r) + grad_val(k, i + 1, r);
            want /= P;
            ok &= fabs(grads[k][i] - want) <= 1e-6 * fabs(want) + 1e-6;
        }
    CHECK(ok);
    /* Usage errors name the gradient. */
    CHECK(plx_ddp_begin(d, PLX_DDP_SYNC) == 0);
    CHECK(plx_ddp_ready(d, 2) == 0);
    CHECK(plx_ddp_ready(d, 2) == PLX_ERR_INVALID_USAGE);
    CHECK(strstr(plx_last_error(), "gradient 2 marked ready twice") != NULL);
    CHECK(plx_ddp_finish(d) == PLX_ERR_INVALID_USAGE);
    CHECK(strstr(plx_last_error(), "gradient 0 is not ready") != NULL);
    plx_ddp_destroy(d);
    for (int k = 0; k < 4; k++)
        free(grads[k]);
    return 0;
}

static int rank_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    ddp_case(ctx);
    fsdp_case(ctx, PLX_FSDP_FULL_SHARD, NULL);
    fsdp_case(ctx, PLX_FSDP_SHARD_GRAD_OP, NULL);
    fsdp_case(ctx, PLX_FSDP_NO_SHARD, NULL);
    if (P % 2 == 0) {
        struct plx_mesh *m = NULL;
        CHECK(plx_mesh_create(ctx->comm, 2, &m) == 0);
        if (m) {
            CHECK(plx_mesh_nodes(m) == P / 2);
            CHECK(plx_comm_size(plx_mesh_intra(m)) == 2);
            fsdp_case(ctx, PLX_FSDP_HYBRID_SHARD, m);
        }
        plx_mesh_destroy(m);
    } else if (P > 1) {
        struct plx_mesh *m = NULL;
        CHECK(plx_mesh_create(ctx->comm, 2, &m) == PLX_ERR_INVALID_ARG);
        CHECK(strstr(plx_last_error(), "is not a multiple of the node size 2") != NULL);
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
        printf("strategy checks passed on %d ranks\n", P);
    return rc || failures;
}
