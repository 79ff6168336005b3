/* fsdp_grad.c - gradients: a unit's full gradient (param dtype) is copied
 * into the reduce dtype and padded where needed, reduce-scattered (mean)
 * over the shard group (NO_SHARD: allreduced over the world), averaged
 * across nodes for HYBRID_SHARD, and added to the gradient shard in the
 * master dtype, as PyTorch accumulates sharded gradients across
 * micro-batches until zero_grad. ireduce_grad leaves the collective in
 * flight so backward overlaps it; the wait does the accumulation.
 *
 * HYBRID_SHARD's second stage (the allreduce across nodes) starts when the
 * reduce-scatter has completed, found by the next FSDP call that polls, or
 * at the wait. Collectives pair up by issue order, and reduce-scatters may
 * complete in a different order on different ranks, so second stages are
 * launched strictly in the order the reductions were issued (f->rq): a
 * reduction whose reduce-scatter is done still waits for every earlier one,
 * and waiting for one launches every earlier one first. */
#include <stdlib.h>
#include <string.h>

#include "fsdp_internal.h"

static int start_reduce(struct plx_fsdp *f, struct fsdp_unit *u, const void *full_grad)
{
    struct fsdp_reduce *r = &u->rs;
    size_t res = plx_dtype_size(u->rdtype), n = f->shards > 1 ? u->padded : u->count;
    const void *send = full_grad;
    memset(r, 0, sizeof *r);
    if (u->rdtype != u->pdtype || n != u->count) { /* converted and / or zero-padded copy */
        if (!(r->send = malloc(n ? n * res : 1)))
            return plx_set_error(PLX_ERR_NOMEM, "fsdp: out of memory for a gradient of %zu elements", n);
        plx__fsdp_convert(r->send, u->rdtype, full_grad, u->pdtype, u->count);
        memset((char *)r->send + u->count * res, 0, (n - u->count) * res);
        send = r->send;
        r->bytes += n * res;
    }
    if (!(r->recv = malloc(u->len ? u->len * res : 1))) {
        free(r->send);
        r->send = NULL;
        return plx_set_error(PLX_ERR_NOMEM, "fsdp: out of memory for a gradient shard of %zu elements", u->len);
    }
    r->bytes += u->len * res;
    f->reduce_bytes += r->bytes;
    plx__fsdp_note_peak(f);
    /* two stages when sharded inside nodes and there are several nodes; with
     * one rank per node the world allreduce below already covers them all */
    int two = f->shards > 1 && f->repl_comm && plx_comm_size(f->repl_comm) > 1;
    if (two && f->rq_n == f->rq_cap) {
        int cap = f->rq_cap ? 2 * f->rq_cap : 16;
        int *q = realloc(f->rq, (size_t)cap * sizeof *q);
        if (!q) {
            f->reduce_bytes -= r->bytes;
            free(r->send);
            free(r->recv);
            memset(r, 0, sizeof *r);
            return plx_set_error(PLX_ERR_NOMEM, "fsdp: out of memory");
        }
        f->rq = q;
        f->rq_cap = cap;
    }
    int rc = f->shards > 1
                 ? plx_ireduce_scatter(f->shard_comm, send, r->recv, u->len, u->rdtype, PLX_AVG, NULL, &r->work)
                 : plx_iallreduce(f->world, send, r->recv, u->count, u->rdtype, PLX_AVG, NULL, &r->work);
    if (rc) {
        f->reduce_bytes -= r->bytes;
        free(r->send);
        free(r->recv);
        memset(r, 0, sizeof *r);
        return rc;
    }
    r->stage = two ? 1 : 2;
    if (two)
        f->rq[f->rq_n++] = (int)(u - f->units);
    return 0;
}

/* Stage 1 of the queue's head is complete (or failed): launch its
 * inter-node allreduce and take it off the queue. */
static void launch_stage2(struct plx_fsdp *f, int rc)
{
    struct fsdp_unit *u = &f->units[f->rq[0]];
    struct fsdp_reduce *r = &u->rs;
    plx_work_free(r->work);
    r->work = NULL;
    if (rc == 0)
        rc = plx_iallreduce(f->repl_comm, r->recv, r->recv, u->len, u->rdtype, PLX_AVG, NULL, &r->work);
    r->err = rc;
    r->stage = 2;
    memmove(f->rq, f->rq + 1, (size_t)(--f->rq_n) * sizeof *f->rq);
}

/* Launch second stages in issue order: those whose reduce-scatter is done
 * and, when upto is a queued unit, every one up to it (waiting). */
static void advance(struct plx_fsdp *f, int upto)
{
    int pos = -1;
    for (int i = 0; i < f->rq_n; i++)
        if (f->rq[i] == upto)
            pos = i;
    while (f->rq_n > 0) {
        struct fsdp_reduce *r = &f->units[f->rq[0]].rs;
        int rc, done = 0;
        if (pos >= 0) {
            rc = plx_work_wait(r->work, PLX_TIMEOUT_DEFAULT);
            pos--;
        } else if ((rc = plx_work_test(r->work, &done)) == 0 && !done) {
            break;
        }
        launch_stage2(f, rc);
    }
}

void plx__fsdp_progress(struct plx_fsdp *f)
{
    advance(f, -1);
}

int plx__fsdp_finish_reduce(struct plx_fsdp *f, struct fsdp_unit *u)
{
    struct fsdp_reduce *r = &u->rs;
    if (!r->work && !r->err)
        return 0;
    if (r->stage == 1)
        advance(f, (int)(u - f->units));
    int rc = r->err;
    if (r->work) {
        int w = plx_work_wait(r->work, PLX_TIMEOUT_DEFAULT);
        plx_work_free(r->work);
        r->work = NULL;
        if (!rc)
            rc = w;
    }
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
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_ireduce_grad: no unit %d or no gradient", unit);
    int rc = plx__fsdp_finish_reduce(f, u); /* one in flight per unit; sums stay in call order */
    plx__fsdp_progress(f);
    return rc ? rc : start_reduce(f, u, full_grad);
}

PLX_API int plx_fsdp_reduce_grad(struct plx_fsdp *f, int unit, const void *full_grad)
{
    struct fsdp_unit *u = plx__fsdp_unit(f, unit);
    if (!u || (!full_grad && u->count))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_reduce_grad: no unit %d or no gradient", unit);
    int rc = plx_fsdp_ireduce_grad(f, unit, full_grad);
    return rc ? rc : plx__fsdp_finish_reduce(f, u);
}

PLX_API int plx_fsdp_wait_grad(struct plx_fsdp *f, int unit)
{
    if (!f || unit < -1 || unit >= f->nunits)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_wait_grad: no unit %d", unit);
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
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_fsdp_zero_grad: no unit %d", unit);
    int rc = plx_fsdp_wait_grad(f, unit);
    for (int k = unit < 0 ? 0 : unit; k < (unit < 0 ? f->nunits : unit + 1); k++) {
        struct fsdp_unit *u = &f->units[k];
        memset(u->grad, 0, (u->len ? u->len : 1) * plx_dtype_size(u->dtype));
    }
    return rc;
}
