/* fsdp.c - fully sharded data parallel over flat units: creation, units and
 * their shards. Each unit is padded to a multiple of the shard group's size,
 * so any count works; rank i of the group keeps elements [i*len, (i+1)*len).
 * Gathers (fsdp_gather.c) allgather the shards in the param dtype,
 * gradients (fsdp_grad.c) are reduce-scattered (mean) in the reduce dtype
 * and accumulated into the gradient shard; HYBRID_SHARD shards inside a
 * node and averages shards across nodes. Clipping: fsdp_clip.c; conversions:
 * fsdp_precision.c; memory statistics: fsdp_memory.c. Every byte the
 * strategy allocates is counted, so the statistics are measured. */
#include <stdlib.h>
#include <string.h>

#include "fsdp_internal.h"

void plx__fsdp_note_peak(struct plx_fsdp *f)
{
    size_t now = f->shard_bytes + f->full_bytes + f->grad_bytes + f->gbuf_bytes + f->gsend_bytes + f->reduce_bytes;
    if (now > f->peak)
        f->peak = now;
}

struct fsdp_unit *plx__fsdp_unit(const struct plx_fsdp *f, int unit)
{
    return f && unit >= 0 && unit < f->nunits ? &f->units[unit] : NULL;
}

struct plx_comm *plx__fsdp_reduce_comm(const struct plx_fsdp *f)
{
    return f->shards > 1 ? f->shard_comm : f->world;
}

PLX_API void plx_fsdp_options_init(struct plx_fsdp_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->strategy = PLX_FSDP_FULL_SHARD;
    o->optim_bytes_per_param = 8.0;
    o->param_dtype = -1;
    o->reduce_dtype = -1;
    o->offload = PLX_FSDP_OFFLOAD_NONE;
}

PLX_API int plx_fsdp_create(struct plx_comm *comm, const struct plx_fsdp_options *o, struct plx_fsdp **out)
{
    struct plx_fsdp_options opt;
    plx_fsdp_options_init(&opt);
    if (o) /* append-only: the fields the caller's struct has, defaults for the rest */
        memcpy(&opt, o, o->struct_size < sizeof opt ? o->struct_size : sizeof opt);
    if (!comm || !out || opt.strategy < PLX_FSDP_FULL_SHARD || opt.strategy > PLX_FSDP_HYBRID_SHARD)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_create: bad communicator, output or strategy %d", opt.strategy);
    if (opt.strategy == PLX_FSDP_HYBRID_SHARD && !opt.mesh)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_create: HYBRID_SHARD needs a device mesh (plx_mesh_create)");
    if ((opt.param_dtype != -1 && !plx__fsdp_dtype_ok(opt.param_dtype)) ||
        (opt.reduce_dtype != -1 && !plx__fsdp_dtype_ok(opt.reduce_dtype)))
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_fsdp_create: param_dtype %s / reduce_dtype %s: f32, f64, f16, bf16 or -1 are supported",
                        plx_dtype_name(opt.param_dtype), plx_dtype_name(opt.reduce_dtype));
    if (opt.offload < PLX_FSDP_OFFLOAD_NONE || opt.offload > PLX_FSDP_OFFLOAD_FULL)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_create: bad offload policy %d", opt.offload);
    struct plx_fsdp *f = calloc(1, sizeof *f);
    if (!f)
        return plx_set_error(PLX_ERR_NOMEM, "plx_fsdp_create: out of memory");
    f->world = comm;
    f->strategy = opt.strategy;
    f->optim_factor = opt.optim_bytes_per_param > 0 ? opt.optim_bytes_per_param : 8.0;
    f->param_dtype = opt.param_dtype;
    f->reduce_dtype = opt.reduce_dtype;
    f->offload = opt.offload;
    f->pf_unit = -1;
    switch (opt.strategy) {
    case PLX_FSDP_NO_SHARD: f->shard_comm = NULL; break;
    case PLX_FSDP_HYBRID_SHARD:
        f->shard_comm = plx_mesh_intra(opt.mesh);
        f->repl_comm = plx_mesh_inter(opt.mesh);
        break;
    default: f->shard_comm = comm; break;
    }
    f->shards = f->shard_comm ? plx_comm_size(f->shard_comm) : 1;
    f->shard_rank = f->shard_comm ? plx_comm_rank(f->shard_comm) : 0;
    *out = f;
    return 0;
}

PLX_API void plx_fsdp_destroy(struct plx_fsdp *f)
{
    if (!f)
        return;
    if (f->pf_work) {
        plx_work_wait(f->pf_work, PLX_TIMEOUT_DEFAULT);
        plx_work_free(f->pf_work);
    }
    for (int k = 0; k < f->nunits; k++) {
        struct fsdp_unit *u = &f->units[k];
        if (u->rs.work) { /* the buffers stay the backend's until it is done */
            plx_work_wait(u->rs.work, PLX_TIMEOUT_DEFAULT);
            plx_work_free(u->rs.work);
        }
        free(u->rs.send);
        free(u->rs.recv);
        if (u->full != u->shard)
            free(u->full);
        free(u->shard);
        free(u->grad);
    }
    free(f->units);
    free(f->rq);
    free(f->gbuf);
    free(f->gsend);
    free(f);
}

PLX_API int plx_fsdp_add_unit(struct plx_fsdp *f, const void *full, size_t count, int dtype, int *unit)
{
    if (!f || (!full && count) || !plx__fsdp_dtype_ok(dtype))
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_fsdp_add_unit: bad buffer or dtype %s (f32, f64, f16 and bf16 are supported)",
                        plx_dtype_name(dtype));
    if (f->pf_work)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_fsdp_add_unit: a prefetch of unit %d is in flight", f->pf_unit);
    for (int k = 0; k < f->nunits; k++) /* realloc moves the units; no reduction may point into them */
        if (f->units[k].rs.work)
            return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_fsdp_add_unit: a reduction of unit %d is in flight", k);
    struct fsdp_unit *nu = realloc(f->units, (size_t)(f->nunits + 1) * sizeof *nu);
    if (!nu)
        return plx_set_error(PLX_ERR_NOMEM, "plx_fsdp_add_unit: out of memory");
    f->units = nu;
    struct fsdp_unit *u = &f->units[f->nunits];
    size_t es = plx_dtype_size(dtype), S = (size_t)f->shards;
    memset(u, 0, sizeof *u);
    u->count = count;
    u->dtype = dtype;
    u->pdtype = f->param_dtype >= 0 ? f->param_dtype : dtype;
    u->rdtype = f->reduce_dtype >= 0 ? f->reduce_dtype : u->pdtype;
    u->len = (count + S - 1) / S;
    u->padded = u->len * S;
    u->off = u->len * (size_t)f->shard_rank;
    u->valid = u->off >= count ? 0 : (count - u->off < u->len ? count - u->off : u->len);
    size_t pes = plx_dtype_size(u->pdtype);
    /* The full copy is kept by SHARD_GRAD_OP, and by NO_SHARD when the
     * gathered dtype differs from the master's (else it is the shard). */
    int keep = f->strategy == PLX_FSDP_SHARD_GRAD_OP || (f->strategy == PLX_FSDP_NO_SHARD && u->pdtype != dtype);
    u->shard = calloc(u->len ? u->len : 1, es);
    u->grad = calloc(u->len ? u->len : 1, es);
    if (keep)
        u->full = malloc(count ? count * pes : 1);
    if (!u->shard || !u->grad || (keep && !u->full)) {
        free(u->shard);
        free(u->grad);
        free(u->full);
        return plx_set_error(PLX_ERR_NOMEM, "plx_fsdp_add_unit: out of memory for %zu elements", count);
    }
    memcpy(u->shard, (const char *)full + u->off * es, u->valid * es);
    if (!keep && f->strategy == PLX_FSDP_NO_SHARD)
        u->full = u->shard;
    else if (keep) /* what a gather of the master shards gives */
        plx__fsdp_convert(u->full, u->pdtype, full, dtype, count);
    f->shard_bytes += u->len * es;
    f->full_bytes += keep ? count * pes : 0;
    f->grad_bytes += u->len * es;
    f->padding_bytes += (u->len - u->valid) * es;
    plx__fsdp_note_peak(f);
    if (unit)
        *unit = f->nunits;
    f->nunits++;
    return 0;
}

PLX_API void *plx_fsdp_shard(struct plx_fsdp *f, int unit, size_t *count)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (count)
        *count = u ? u->valid : 0;
    return u ? u->shard : NULL;
}

PLX_API void *plx_fsdp_grad_shard(struct plx_fsdp *f, int unit, size_t *count)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (count)
        *count = u ? u->valid : 0;
    return u ? u->grad : NULL;
}

PLX_API size_t plx_fsdp_shard_offset(const struct plx_fsdp *f, int unit)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    return u ? u->off : 0;
}

PLX_API void *plx_fsdp_full_params(struct plx_fsdp *f, int unit)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    return u ? u->full : NULL;
}
