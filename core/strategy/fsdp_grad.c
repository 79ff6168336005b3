/* fsdp_grad.c - gradients: a unit's full gradient (param dtype) is copied
 * into the reduce dtype and padded where needed, reduce-scattered (mean)
 * over the shard group (NO_SHARD: allreduced over the world), averaged
 * across nodes for HYBRID_SHARD, and added to the gradient shard in the
 * master dtype, as PyTorch accumulates sharded gradients across
 * micro-batches until zero_grad. ireduce_grad leaves the collective in
 * flight so backward overlaps it; the wait does the accumulation. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fsdp_internal.h"

static int start_reduce(struct plx_fsdp *f, struct fsdp_unit *u, const void *full_grad)
{
    struct fsdp_reduce *r = &u->rs;
    size_t res = plx_dtype_size(u->rdtype), n = f->shards > 1 ? u->padded : u->count;
    const void *send = full_grad;
    memset(r, 0, sizeof *r);
    if (u->rdtype != u->pdtype || n != u->count) { /* converted and / or zero-padded copy */
        if (!(r->send = malloc(n ? n * res : 1)))
            return plx__err(PLX_ERR_NOMEM, "fsdp: out of memory for a gradient of %zu elements", n);
        plx__fsdp_convert(r->send, u->rdtype, full_grad, u->pdtype, u->count);
        memset((char *)r->send + u->count * res, 0, (n - u->count) * res);
        send = r->send;
        r->bytes += n * res;
    }
    if (!(r->recv = malloc(u->len ? u->len * res : 1))) {
        free(r->send);
        r->send = NULL;
        return plx__err(PLX_ERR_NOMEM, "fsdp: out of memory for a gradient shard of %zu elements", u->len);
    }
    r->bytes += u->len * res;
    f->reduce_bytes += r->bytes;
    plx__fsdp_note_peak(f);
    int rc = f->shards > 1
                 ? plx_ireduce_scatter(f->shard_comm, send, r->recv, u->len, u->rdtype, PLX_AVG, NULL, &r->work)
                 : plx_iallreduce(f->world, send, r->recv, u->count, u->rdtype, PLX_AVG, NULL, &r->work);
    if (rc) {
        f->reduce_bytes -= r->bytes;
        free(r->send);
        free(r->recv);
        memset(r, 0, sizeof *r);
    }
    return rc;
}

int plx__fsdp_finish_reduce(struct plx_fsdp *f, struct fsdp_unit *u)
{
    struct fsdp_reduce *r = &u->rs;
    if (!r->work)
        return 0;
    int rc = plx_work_wait(r->work, PLX_TIMEOUT_DEFAULT);
    plx_work_free(r->work);
    r->work = NULL;
    if (rc == 0 && f->repl_comm && plx_comm_size(f->repl_comm) > 1)
        rc = plx_allreduce(f->repl_comm, r->recv, r->recv, u->len, u->rdtype, PLX_AVG);
    if (rc == 0)
        plx__fsdp_accumulate(u->grad, u->dtype, r->recv, u->rdtype, u->len);
    f->reduce_bytes -= r->bytes;
    free(r->send);
    free(r->recv);
    memset(r, 0, sizeof *r);
    return rc;
}

PLX_API int plx_fsdp_ireduce_grad(struct plx_fsdp *f, int unit, const void *full_grad)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (!u || (!full_grad && u->count))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_ireduce_grad: no unit %d or no gradient", unit);
    int rc = plx__fsdp_finish_reduce(f, u); /* one in flight per unit; sums stay in call order */
    return rc ? rc : start_reduce(f, u, full_grad);
}

PLX_API int plx_fsdp_reduce_grad(struct plx_fsdp *f, int unit, const void *full_grad)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (!u || (!full_grad && u->count))
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_reduce_grad: no unit %d or no gradient", unit);
    int rc = plx_fsdp_ireduce_grad(f, unit, full_grad);
    return rc ? rc : plx__fsdp_finish_reduce(f, u);
}

PLX_API int plx_fsdp_wait_grad(struct plx_fsdp *f, int unit)
{
    if (!f || unit < -1 || unit >= f->nunits)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_wait_grad: no unit %d", unit);
    int rc = 0;
    for (int k = unit < 0 ? 0 : unit; k < (unit < 0 ? f->nunits : unit + 1); k++) {
        int w = plx__fsdp_finish_reduce(f, &f->units[k]);
        if (w && !rc)
            rc = w;
    }
    return rc;
}

PLX_API int plx_fsdp_zero_grad(struct plx_fsdp *f, int unit)
{
    if (!f || unit < -1 || unit >= f->nunits)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_fsdp_zero_grad: no unit %d", unit);
    int rc = plx_fsdp_wait_grad(f, unit);
    for (int k = unit < 0 ? 0 : unit; k < (unit < 0 ? f->nunits : unit + 1); k++) {
        struct fsdp_unit *u = &f->units[k];
        memset(u->grad, 0, (u->len ? u->len : 1) * plx_dtype_size(u->dtype));
    }
    return rc;
}
