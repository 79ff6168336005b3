/* fsdp.c - fully sharded data parallel over flat units. Each unit is padded
 * to a multiple of the shard group's size, so any count works; rank i of
 * the group keeps elements [i*len, (i+1)*len). Gathers allgather the shards,
 * gradients are reduce-scattered (mean); HYBRID_SHARD shards inside a node
 * and averages shards across nodes. Every byte the strategy allocates is
 * counted, so the memory statistics are measured, not estimated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plexus/backend.h" /* PLX_HAS_FIELD */
#include "plexus/strategy.h"

struct unit {
    size_t count, padded, len, off, valid;
    int dtype;
    void *shard, *grad, *full; /* full: the kept copy (SHARD_GRAD_OP, NO_SHARD) */
};

struct plx_fsdp {
    struct plx_comm *world, *shard_comm, *repl_comm;
    int strategy, shards, shard_rank;
    double optim_factor;
    struct unit *units;
    int nunits;
    void *scratch;          /* padded gather / reduce buffer, sized to the largest unit */
    size_t scratch_bytes;
    struct plx_work *pf_work; /* one prefetch in flight */
    int pf_unit;
    void *pf_full;
    size_t param_bytes, grad_bytes, padding_bytes, peak;
};

static void note_peak(struct plx_fsdp *f)
{
    size_t now = f->param_bytes + f->grad_bytes + f->scratch_bytes;
    if (now > f->peak)
        f->peak = now;
}

static void *scratch(struct plx_fsdp *f, size_t bytes)
{
    if (bytes > f->scratch_bytes) {
        void *p = realloc(f->scratch, bytes);
        if (!p)
            return NULL;
        f->scratch = p;
        f->scratch_bytes = bytes;
        note_peak(f);
    }
    return f->scratch;
}

PLX_API void plx_fsdp_options_init(struct plx_fsdp_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->strategy = PLX_FSDP_FULL_SHARD;
    o->optim_bytes_per_param = 8.0;
}

PLX_API int plx_fsdp_create(struct plx_comm *comm, const struct plx_fsdp_options *o, struct plx_fsdp **out)
{
    struct plx_fsdp_options opt;
    plx_fsdp_options_init(&opt);
    if (o)
        memcpy(&opt, o, o->struct_size < sizeof opt ? o->struct_size : sizeof opt);
    if (!comm || !out || opt.strategy < PLX_FSDP_FULL_SHARD || opt.strategy > PLX_FSDP_HYBRID_SHARD)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_create: bad communicator, output or strategy %d", opt.strategy);
    if (opt.strategy == PLX_FSDP_HYBRID_SHARD && !opt.mesh)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_create: HYBRID_SHARD needs a device mesh (plx_mesh_create)");
    struct plx_fsdp *f = calloc(1, sizeof *f);
    if (!f)
        return plx__err(PLX_ERR_NOMEM, "plx_fsdp_create: out of memory");
    f->world = comm;
    f->strategy = opt.strategy;
    f->optim_factor = opt.optim_bytes_per_param > 0 ? opt.optim_bytes_per_param : 8.0;
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
    for (int u = 0; u < f->nunits; u++) {
        if (f->units[u].full != f->units[u].shard)
            free(f->units[u].full);
        free(f->units[u].shard);
        free(f->units[u].grad);
    }
    free(f->units);
    free(f->scratch);
    free(f);
}

PLX_API int plx_fsdp_add_unit(struct plx_fsdp *f, const void *full, size_t count, int dtype, int *unit)
{
    if (!f || (!full && count) || (dtype != PLX_F32 && dtype != PLX_F64))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_add_unit: bad buffer or dtype %s (f32 and f64 are supported)",
                        plx_dtype_name(dtype));
    struct unit *nu = realloc(f->units, (size_t)(f->nunits + 1) * sizeof *nu);
    if (!nu)
        return plx__err(PLX_ERR_NOMEM, "plx_fsdp_add_unit: out of memory");
    f->units = nu;
    struct unit *u = &f->units[f->nunits];
    size_t es = plx_dtype_size(dtype), S = (size_t)f->shards;
    memset(u, 0, sizeof *u);
    u->count = count;
    u->dtype = dtype;
    u->len = (count + S - 1) / S;
    u->padded = u->len * S;
    u->off = u->len * (size_t)f->shard_rank;
    u->valid = u->off >= count ? 0 : (count - u->off < u->len ? count - u->off : u->len);
    u->shard = calloc(u->len ? u->len : 1, es);
    u->grad = calloc(u->len ? u->len : 1, es);
    if (f->strategy == PLX_FSDP_SHARD_GRAD_OP)
        u->full = malloc(count ? count * es : 1);
    if (!u->shard || !u->grad || (f->strategy == PLX_FSDP_SHARD_GRAD_OP && !u->full)) {
        free(u->shard);
        free(u->grad);
        free(u->full);
        return plx__err(PLX_ERR_NOMEM, "plx_fsdp_add_unit: out of memory for %zu elements", count);
    }
    memcpy(u->shard, (const char *)full + u->off * es, u->valid * es);
    if (f->strategy == PLX_FSDP_NO_SHARD)
        u->full = u->shard;
    else if (u->full)
        memcpy(u->full, full, count * es);
    f->param_bytes += u->len * es + (u->full && u->full != u->shard ? count * es : 0);
    f->grad_bytes += u->len * es;
    f->padding_bytes += (u->len - u->valid) * es;
    note_peak(f);
    if (unit)
        *unit = f->nunits;
    f->nunits++;
    return 0;
}

static struct unit *get_unit(const struct plx_fsdp *f, int unit)
{
    return f && unit >= 0 && unit < f->nunits ? &f->units[unit] : NULL;
}

PLX_API void *plx_fsdp_shard(struct plx_fsdp *f, int unit, size_t *count)
{
    struct unit *u = get_unit(f, unit);
    if (count)
        *count = u ? u->valid : 0;
    return u ? u->shard : NULL;
}

PLX_API void *plx_fsdp_grad_shard(struct plx_fsdp *f, int unit, size_t *count)
{
    struct unit *u = get_unit(f, unit);
    if (count)
        *count = u ? u->valid : 0;
    return u ? u->grad : NULL;
}

PLX_API size_t plx_fsdp_shard_offset(const struct plx_fsdp *f, int unit)
{
    struct unit *u = get_unit(f, unit);
    return u ? u->off : 0;
}

PLX_API void *plx_fsdp_full_params(struct plx_fsdp *f, int unit)
{
    struct unit *u = get_unit(f, unit);
    return u ? u->full : NULL;
}

/* Allgather unit's shards; into full directly when no padding is needed. */
static int start_gather(struct plx_fsdp *f, struct unit *u, void *full, struct plx_work **w)
{
    size_t es = plx_dtype_size(u->dtype);
    void *dst = full;
    if (u->padded != u->count && !(dst = scratch(f, u->padded * es)))
        return plx__err(PLX_ERR_NOMEM, "fsdp: out of memory for a gathered unit of %zu elements", u->padded);
    return plx_iallgather(f->shard_comm, u->shard, dst, u->len, u->dtype, NULL, w);
}

static void finish_gather(struct plx_fsdp *f, struct unit *u, void *full)
{
    if (u->padded != u->count)
        memcpy(full, f->scratch, u->count * plx_dtype_size(u->dtype));
}

PLX_API int plx_fsdp_prefetch(struct plx_fsdp *f, int unit, void *full)
{
    struct unit *u = get_unit(f, unit);
    if (!u || (!full && u->count))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_prefetch: no unit %d or no buffer", unit);
    if (f->pf_work)
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_fsdp_prefetch: unit %d is still being prefetched", f->pf_unit);
    if (f->shards == 1) /* nothing to fetch */
        return plx_fsdp_gather(f, unit, full);
    int rc = start_gather(f, u, full, &f->pf_work);
    if (rc == 0) {
        f->pf_unit = unit;
        f->pf_full = full;
    }
    return rc;
}

PLX_API int plx_fsdp_gather(struct plx_fsdp *f, int unit, void *full)
{
    struct unit *u = get_unit(f, unit);
    if (!u || (!full && u->count))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_gather: no unit %d or no buffer", unit);
    size_t es = plx_dtype_size(u->dtype);
    if (f->pf_work && f->pf_unit == unit) {
        int rc = plx_work_wait(f->pf_work, PLX_TIMEOUT_DEFAULT);
        plx_work_free(f->pf_work);
        f->pf_work = NULL;
        if (rc)
            return rc;
        finish_gather(f, u, f->pf_full);
        if (f->pf_full != full)
            memcpy(full, f->pf_full, u->count * es);
        return 0;
    }
    if (f->pf_work) /* the scratch belongs to the prefetch in flight */
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_fsdp_gather(%d): unit %d is being prefetched; gather it first",
                        unit, f->pf_unit);
    if (f->shards == 1) { /* the shard is the whole unit and the truth */
        if (full != u->shard)
            memcpy(full, u->shard, u->count * es);
        return 0;
    }
    struct plx_work *w;
    int rc = start_gather(f, u, full, &w);
    if (rc)
        return rc;
    rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
    plx_work_free(w);
    if (rc == 0)
        finish_gather(f, u, full);
    return rc;
}

PLX_API int plx_fsdp_reduce_grad(struct plx_fsdp *f, int unit, const void *full_grad)
{
    struct unit *u = get_unit(f, unit);
    if (!u || (!full_grad && u->count))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_reduce_grad: no unit %d or no gradient", unit);
    if (f->pf_work)
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_fsdp_reduce_grad: a prefetch of unit %d is in flight", f->pf_unit);
    size_t es = plx_dtype_size(u->dtype);
    if (f->shards == 1) /* NO_SHARD: plain allreduce, as DDP */
        return plx_allreduce(f->world, full_grad, u->grad, u->count, u->dtype, PLX_AVG);
    const void *src = full_grad;
    if (u->padded != u->count) { /* zero padding so the shards line up */
        char *s = scratch(f, u->padded * es);
        if (!s)
            return plx__err(PLX_ERR_NOMEM, "fsdp: out of memory");
        memcpy(s, full_grad, u->count * es);
        memset(s + u->count * es, 0, (u->padded - u->count) * es);
        src = s;
    }
    int rc = plx_reduce_scatter(f->shard_comm, src, u->grad, u->len, u->dtype, PLX_AVG);
    if (rc == 0 && f->repl_comm && plx_comm_size(f->repl_comm) > 1)
        rc = plx_allreduce(f->repl_comm, u->grad, u->grad, u->len, u->dtype, PLX_AVG);
    return rc;
}

PLX_API int plx_fsdp_regather(struct plx_fsdp *f, int unit)
{
    struct unit *u = get_unit(f, unit);
    if (!u)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_regather: no unit %d", unit);
    if (f->strategy != PLX_FSDP_SHARD_GRAD_OP)
        return 0;
    return plx_fsdp_gather(f, unit, u->full);
}

PLX_API int plx_fsdp_clip_grad_norm(struct plx_fsdp *f, double max_norm, double *norm)
{
    if (!f)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_clip_grad_norm: fsdp is NULL");
    double sq = 0;
    for (int k = 0; k < f->nunits; k++) {
        struct unit *u = &f->units[k];
        for (size_t i = 0; i < u->valid; i++) { /* padding never counts */
            double g = u->dtype == PLX_F32 ? ((float *)u->grad)[i] : ((double *)u->grad)[i];
            sq += g * g;
        }
    }
    /* Shards of one group are disjoint; groups (nodes) hold the same values. */
    if (f->shard_comm) {
        int rc = plx_allreduce(f->shard_comm, &sq, &sq, 1, PLX_F64, PLX_SUM);
        if (rc)
            return rc;
    }
    double total = sqrt(sq);
    if (norm)
        *norm = total;
    if (max_norm > 0 && total > max_norm) {
        double scale = max_norm / (total + 1e-6);
        for (int k = 0; k < f->nunits; k++) {
            struct unit *u = &f->units[k];
            for (size_t i = 0; i < u->valid; i++) {
                if (u->dtype == PLX_F32)
                    ((float *)u->grad)[i] = (float)(((float *)u->grad)[i] * scale);
                else
                    ((double *)u->grad)[i] *= scale;
            }
        }
    }
    return 0;
}

PLX_API int plx_fsdp_memory(const struct plx_fsdp *f, struct plx_fsdp_memstats *out)
{
    if (!f || !out || out->struct_size < sizeof *out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_memory: bad arguments");
    double elems = 0;
    for (int k = 0; k < f->nunits; k++)
        elems += (double)f->units[k].valid;
    out->param_bytes = f->param_bytes;
    out->grad_bytes = f->grad_bytes;
    out->gather_bytes = f->scratch_bytes;
    out->peak_bytes = f->peak;
    out->padding_bytes = f->padding_bytes;
    out->optim_estimate_bytes = elems * f->optim_factor;
    return 0;
}
