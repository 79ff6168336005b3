/* FSDP memory statistics on sim ranks:
 *  - a caller built against the first version of struct plx_fsdp_memstats
 *    (through optim_estimate_bytes) gets it filled and nothing past it
 *    written (the old code refused any struct_size below the newest);
 *    anything smaller than the first version is refused;
 *  - categories: master shards, kept full copies, gradient shards and
 *    communication buffers add up to what the old fields report, with the
 *    byte counts this test derives from the unit sizes, dtypes and strategy;
 *    reduction buffers are counted while ireduce_grad is in flight and
 *    released by the wait;
 *  - offload placement: NONE puts everything on the device, PARAMS the
 *    parameter shards on the host, FULL the shards, gradient shards and
 *    optimizer state on the host; kept full copies and communication
 *    buffers stay with the gathered parameters on the device.
 * usage: test_fsdp_memory P */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/strategy.h"
#include "ranks.h"

static int failures, P;

/* The struct as the first release declared it. */
struct memstats_v1 {
    uint32_t struct_size;
    size_t param_bytes, grad_bytes, gather_bytes, peak_bytes, padding_bytes;
    double optim_estimate_bytes;
};

static void old_struct_case(struct plx_fsdp *f)
{
    union {
        struct plx_fsdp_memstats m;
        unsigned char raw[sizeof(struct plx_fsdp_memstats) + 64];
    } buf;
    memset(&buf, 0xab, sizeof buf);
    struct memstats_v1 *v1 = (struct memstats_v1 *)&buf;
    v1->struct_size = sizeof *v1;
    CHECK(plx_fsdp_memory(f, (struct plx_fsdp_memstats *)v1) == 0);
    struct plx_fsdp_memstats now = {.struct_size = sizeof now};
    CHECK(plx_fsdp_memory(f, &now) == 0);
    CHECK(v1->struct_size == sizeof *v1);
    CHECK(v1->param_bytes == now.param_bytes && v1->grad_bytes == now.grad_bytes);
    CHECK(v1->optim_estimate_bytes == now.optim_estimate_bytes);
    int untouched = 1;
    for (size_t i = sizeof *v1; i < sizeof buf.raw; i++)
        untouched &= buf.raw[i] == 0xab;
    CHECK(untouched);
    v1->struct_size = sizeof *v1 - 1;
    CHECK(plx_fsdp_memory(f, (struct plx_fsdp_memstats *)v1) == PLX_ERR_INVALID_ARG);
}

static void placement_case(struct rank_ctx *ctx, int strategy, int offload, int pdt)
{
    const size_t counts[] = {1, 1009, 70001};
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.strategy = strategy;
    o.offload = offload;
    o.param_dtype = pdt;
    struct plx_fsdp *f = NULL;
    CHECK(plx_fsdp_create(ctx->comm, &o, &f) == 0);
    if (!f)
        return;
    size_t S = strategy == PLX_FSDP_NO_SHARD ? 1 : (size_t)P, shard = 0, kept = 0, valid = 0;
    size_t pes = pdt == PLX_BF16 ? 2 : 4;
    float *full = calloc(counts[2], sizeof(float)), *g = calloc(counts[2], sizeof(float));
    int units[3];
    for (int u = 0; u < 3; u++) {
        CHECK(plx_fsdp_add_unit(f, full, counts[u], PLX_F32, &units[u]) == 0);
        size_t len = (counts[u] + S - 1) / S, off = len * (size_t)ctx->rank % (len * S);
        shard += len * 4;
        valid += off >= counts[u] ? 0 : counts[u] - off < len ? counts[u] - off : len;
        if (strategy == PLX_FSDP_SHARD_GRAD_OP || (strategy == PLX_FSDP_NO_SHARD && pdt == PLX_BF16))
            kept += counts[u] * pes;
    }
    old_struct_case(f);
    struct plx_fsdp_memstats m = {.struct_size = sizeof m};
    CHECK(plx_fsdp_memory(f, &m) == 0);
    CHECK(m.offload == offload && m.device_alloc == 0);
    CHECK(m.shard_host_bytes + m.shard_device_bytes == shard);
    CHECK(m.grad_host_bytes + m.grad_device_bytes == shard);
    CHECK(m.full_host_bytes + m.full_device_bytes == kept);
    CHECK(m.param_bytes == shard + kept && m.grad_bytes == shard);
    CHECK(m.optim_estimate_bytes == 8.0 * (double)valid);
    int sh = offload != PLX_FSDP_OFFLOAD_NONE, rest = offload == PLX_FSDP_OFFLOAD_FULL;
    CHECK(m.shard_host_bytes == (sh ? shard : 0));
    CHECK(m.grad_host_bytes == (rest ? shard : 0));
    CHECK(m.optim_host_bytes == (rest ? m.optim_estimate_bytes : 0));
    CHECK(m.optim_device_bytes == (rest ? 0 : m.optim_estimate_bytes));
    CHECK(m.full_host_bytes == 0 && m.comm_host_bytes == 0);
    /* A reduction in flight holds its buffers until the wait. */
    CHECK(plx_fsdp_ireduce_grad(f, units[2], g) == 0);
    CHECK(plx_fsdp_memory(f, &m) == 0);
    size_t len2 = (counts[2] + S - 1) / S, padded = len2 * S;
    /* the received shard, and a zero-padded copy of the gradient (already in
     * the reduce dtype, which defaults to param_dtype) only when padding */
    size_t want_reduce = len2 * pes + (padded != counts[2] ? padded * pes : 0);
    CHECK(m.reduce_bytes == want_reduce);
    CHECK(m.comm_host_bytes + m.comm_device_bytes == m.gather_bytes + m.reduce_bytes);
    CHECK(m.host_bytes + m.device_bytes == m.param_bytes + m.grad_bytes + m.gather_bytes + m.reduce_bytes);
    CHECK(m.peak_bytes >= m.host_bytes + m.device_bytes);
    CHECK(plx_fsdp_wait_grad(f, -1) == 0);
    CHECK(plx_fsdp_memory(f, &m) == 0);
    CHECK(m.reduce_bytes == 0);
    if (ctx->rank == 0 && strategy == PLX_FSDP_FULL_SHARD && pdt == PLX_BF16)
        printf("FULL_SHARD P=%d offload %d: host %zu B (shards %zu, grads %zu), device %zu B, optimizer host %.0f B "
               "device %.0f B, peak %zu B\n", P, offload, m.host_bytes, m.shard_host_bytes, m.grad_host_bytes,
               m.device_bytes, m.optim_host_bytes, m.optim_device_bytes, m.peak_bytes);
    free(full);
    free(g);
    plx_fsdp_destroy(f);
}

static int rank_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    int strategies[] = {PLX_FSDP_FULL_SHARD, PLX_FSDP_SHARD_GRAD_OP, PLX_FSDP_NO_SHARD};
    for (int s = 0; s < 3; s++)
        for (int off = PLX_FSDP_OFFLOAD_NONE; off <= PLX_FSDP_OFFLOAD_FULL; off++) {
            placement_case(ctx, strategies[s], off, -1);
            placement_case(ctx, strategies[s], off, PLX_BF16);
        }
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.offload = 3;
    struct plx_fsdp *f = NULL;
    CHECK(plx_fsdp_create(ctx->comm, &o, &f) == PLX_ERR_INVALID_ARG);
    return failures != 0;
}

int main(int argc, char **argv)
{
    P = argc > 1 ? atoi(argv[1]) : 2;
    int rc = run_ranks(P, "sim", NULL, 60000, rank_fn, NULL);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("fsdp memory checks passed on %d ranks\n", P);
    return rc || failures;
}
