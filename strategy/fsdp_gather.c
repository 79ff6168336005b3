/* fsdp_gather.c - gathering a unit's full parameters: the master shards,
 * converted to the param dtype, allgathered over the shard group, blocking
 * or as one prefetch in flight; and the regather that refreshes the full
 * copies SHARD_GRAD_OP and low-precision NO_SHARD keep. */
#include <stdlib.h>
#include <string.h>

#include "fsdp_internal.h"

static void *grow(void **buf, size_t *have, size_t bytes, struct plx_fsdp *f)
{
    if (bytes > *have) {
        void *p = realloc(*buf, bytes);
        if (!p)
            return NULL;
        *buf = p;
        *have = bytes;
        plx__fsdp_note_peak(f);
    }
    return *buf;
}

/* Allgather unit's shards (in the param dtype) into full directly when no
 * padding is needed, else into the gather scratch. */
static int start_gather(struct plx_fsdp *f, struct fsdp_unit *u, void *full, struct plx_work **w)
{
    size_t pes = plx_dtype_size(u->pdtype);
    const void *send = u->shard;
    void *dst = full;
    if (u->pdtype != u->dtype) {
        void *s = grow(&f->gsend, &f->gsend_bytes, (u->len ? u->len : 1) * pes, f);
        if (!s)
            return plx_set_error(PLX_ERR_NOMEM, "fsdp: out of memory for a %s shard of %zu elements",
                            plx_dtype_name(u->pdtype), u->len);
        plx__fsdp_convert(s, u->pdtype, u->shard, u->dtype, u->len);
        send = s;
    }
    if (u->padded != u->count && !(dst = grow(&f->gbuf, &f->gbuf_bytes, u->padded * pes, f)))
        return plx_set_error(PLX_ERR_NOMEM, "fsdp: out of memory for a gathered unit of %zu elements", u->padded);
    return plx_iallgather(f->shard_comm, send, dst, u->len, u->pdtype, NULL, w);
}

static void finish_gather(struct plx_fsdp *f, struct fsdp_unit *u, void *full)
{
    if (u->padded != u->count)
        memcpy(full, f->gbuf, u->count * plx_dtype_size(u->pdtype));
}

PLX_API int plx_fsdp_prefetch(struct plx_fsdp *f, int unit, void *full)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (!u || (!full && u->count))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_prefetch: no unit %d or no buffer", unit);
    if (f->pf_work)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_fsdp_prefetch: unit %d is still being prefetched", f->pf_unit);
    plx__fsdp_progress(f);
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
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (!u || (!full && u->count))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_gather: no unit %d or no buffer", unit);
    size_t pes = plx_dtype_size(u->pdtype);
    plx__fsdp_progress(f);
    if (f->pf_work && f->pf_unit == unit) {
        int rc = plx_work_wait(f->pf_work, PLX_TIMEOUT_DEFAULT);
        plx_work_free(f->pf_work);
        f->pf_work = NULL;
        if (rc)
            return rc;
        finish_gather(f, u, f->pf_full);
        if (f->pf_full != full)
            memcpy(full, f->pf_full, u->count * pes);
        return 0;
    }
    if (f->pf_work) /* the scratch belongs to the prefetch in flight */
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_fsdp_gather(%d): unit %d is being prefetched; gather it first",
                        unit, f->pf_unit);
    if (f->shards == 1) { /* the shard is the whole unit and the truth */
        if (full != u->shard)
            plx__fsdp_convert(full, u->pdtype, u->shard, u->dtype, u->count);
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

PLX_API int plx_fsdp_regather(struct plx_fsdp *f, int unit)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (!u)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_regather: no unit %d", unit);
    if (!u->full || u->full == u->shard)
        return 0;
    return plx_fsdp_gather(f, unit, u->full);
}
