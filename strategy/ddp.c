/* ddp.c - distributed data parallel: the step. Gradients are grouped into
 * buckets (ddp_buckets.c), one reduction per bucket (an allreduce, or a
 * communication hook: ddp_hooks.c); OVERLAP starts buckets in bucket order
 * as soon as each is complete, SYNC at finish, NO_SYNC never.
 *
 * Collectives on a communicator pair up by issue order, so every rank must
 * launch bucket k as its k-th allreduce whatever order its gradients became
 * ready in: a bucket that completes early waits until every earlier bucket
 * has been launched (as PyTorch's reducer does). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_internal.h"

PLX_API void plx_ddp_options_init(struct plx_ddp_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->bucket_cap_bytes = 25u << 20;
    o->average = 1;
    o->first_bucket_bytes = 1u << 20;
}

PLX_API int plx_ddp_create(struct plx_comm *comm, const struct plx_ddp_options *o, struct plx_ddp **out)
{
    if (!comm || !out)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_create: comm or out is NULL");
    struct plx_ddp *d = calloc(1, sizeof *d);
    if (!d)
        return plx_set_error(PLX_ERR_NOMEM, "plx_ddp_create: out of memory");
    d->comm = comm;
    pthread_mutex_init(&d->mu, NULL);
    plx_ddp_options_init(&d->opt);
    if (o) {
        if (PLX_HAS_FIELD(o, struct plx_ddp_options, bucket_cap_bytes) && o->bucket_cap_bytes)
            d->opt.bucket_cap_bytes = o->bucket_cap_bytes;
        if (PLX_HAS_FIELD(o, struct plx_ddp_options, average))
            d->opt.average = o->average;
        if (PLX_HAS_FIELD(o, struct plx_ddp_options, first_bucket_bytes) && o->first_bucket_bytes)
            d->opt.first_bucket_bytes = o->first_bucket_bytes;
        if (PLX_HAS_FIELD(o, struct plx_ddp_options, gradient_as_bucket_view))
            d->opt.gradient_as_bucket_view = o->gradient_as_bucket_view != 0;
    }
    *out = d;
    return 0;
}

PLX_API void plx_ddp_destroy(struct plx_ddp *d)
{
    if (!d)
        return;
    plx__ddp_free_layout(d);
    plx__ddp_hook_free(d);
    free(d->grads);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

PLX_API int plx_ddp_register(struct plx_ddp *d, void *grad, size_t count, int dtype, int *index)
{
    if (!d || (!grad && count && !d->opt.gradient_as_bucket_view) || dtype < 0 || dtype >= PLX_DTYPE_COUNT ||
        plx_dtype_size(dtype) == 0)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_register: bad gradient (buffer %p, dtype %d)", grad, dtype);
    if (d->laid_out)
        return plx_set_error(PLX_ERR_INVALID_USAGE,
                        "plx_ddp_register: gradients must be registered before the first step or grad_buffer call");
    if (d->ngrads == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        struct ddp_grad *g = realloc(d->grads, (size_t)cap * sizeof *g);
        if (!g)
            return plx_set_error(PLX_ERR_NOMEM, "plx_ddp_register: out of memory");
        d->grads = g;
        d->cap = cap;
    }
    d->grads[d->ngrads] = (struct ddp_grad){.ptr = grad, .count = count, .dtype = dtype, .bucket = -1};
    if (index)
        *index = d->ngrads;
    d->ngrads++;
    return 0;
}

PLX_API int plx_ddp_bucket_count(const struct plx_ddp *d)
{
    return d ? d->nbuckets : PLX_ERR_INVALID_ARG;
}

PLX_API int plx_ddp_bucket_grads(const struct plx_ddp *d, int bucket, int *indices, int max)
{
    if (!d || (d->laid_out && (bucket < 0 || bucket >= d->nbuckets)))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_bucket_grads: no bucket %d", bucket);
    if (!d->laid_out)
        return 0;
    const struct ddp_bucket *k = &d->buckets[bucket];
    for (int m = 0; m < k->n && m < max && indices; m++)
        indices[m] = d->members[k->first + m];
    return k->n;
}

PLX_API void *plx_ddp_grad_buffer(struct plx_ddp *d, int index)
{
    if (!d || index < 0 || index >= d->ngrads) {
        plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_grad_buffer: no gradient %d", index);
        return NULL;
    }
    if (plx__ddp_layout(d))
        return NULL;
    return d->grads[index].ptr;
}

PLX_API int plx_ddp_set_grad(struct plx_ddp *d, int index, void *grad)
{
    if (!d || index < 0 || index >= d->ngrads)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_set_grad: no gradient %d", index);
    if (d->in_step)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_set_grad(%d): only between steps", index);
    if (!grad && !d->opt.gradient_as_bucket_view && d->grads[index].count)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_set_grad(%d): NULL needs gradient_as_bucket_view", index);
    int rc = plx__ddp_layout(d);
    if (rc)
        return rc;
    struct ddp_grad *g = &d->grads[index];
    g->ptr = grad ? grad : plx__ddp_slot(d, g);
    return 0;
}

PLX_API int plx_ddp_begin(struct plx_ddp *d, int mode)
{
    if (!d || mode < PLX_DDP_SYNC || mode > PLX_DDP_NO_SYNC)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ddp_begin: bad mode %d", mode);
    if (d->in_step)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_begin: the previous step was not finished");
    int rc = plx__ddp_layout(d);
    if (rc)
        return rc;
    for (int i = 0; i < d->ngrads; i++)
        d->grads[i].ready = d->grads[i].unused = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        d->buckets[b].pending = d->buckets[b].n;
        d->buckets[b].started = 0;
    }
    d->next_launch = 0;
    d->step_error = 0;
    d->mode = mode;
    d->in_step = 1;
    d->steps++;
    return 0;
}

/* Mark one gradient (used or not) and launch the completed prefix of
 * buckets, in bucket order, no further. */
static int mark(struct plx_ddp *d, int index, int unused, const char *what)
{
    if (!d || index < 0 || index >= d->ngrads)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: no gradient %d", what, index);
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    struct ddp_grad *g = &d->grads[index];
    if (!d->in_step) {
        rc = plx_set_error(PLX_ERR_INVALID_USAGE, "%s(%d): no step begun (call plx_ddp_begin)", what, index);
    } else if (g->ready) {
        rc = plx_set_error(PLX_ERR_INVALID_USAGE, "%s: gradient %d marked %s twice in this step", what, index,
                      g->unused || unused ? "ready or unused" : "ready");
    } else {
        g->ready = 1;
        g->unused = unused;
        d->buckets[g->bucket].pending--;
        while (d->mode == PLX_DDP_OVERLAP && !rc && !d->step_error && d->next_launch < d->nbuckets &&
               d->buckets[d->next_launch].pending == 0)
            rc = d->step_error = plx__ddp_hook_start(d, &d->buckets[d->next_launch++]);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

PLX_API int plx_ddp_ready(struct plx_ddp *d, int index)
{
    return mark(d, index, 0, "plx_ddp_ready");
}

PLX_API int plx_ddp_mark_unused(struct plx_ddp *d, int index)
{
    return mark(d, index, 1, "plx_ddp_mark_unused");
}

/* Wait for every launched bucket; returns the first failure. */
static int drain(struct plx_ddp *d, int copy_back)
{
    int rc = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        struct ddp_bucket *k = &d->buckets[b];
        if (!k->started)
            continue;
        int w = k->work ? plx_work_wait(k->work, PLX_TIMEOUT_DEFAULT) : 0;
        plx_work_free(k->work);
        k->work = NULL;
        k->started = 0;
        if (!w && copy_back)
            w = plx__ddp_hook_finish(d, k);
        if (!w && copy_back)
            plx__ddp_unfill(d, k);
        if (w && !rc)
            rc = w;
    }
    return rc;
}

PLX_API int plx_ddp_finish(struct plx_ddp *d)
{
    if (!d || !d->in_step)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_finish: no step begun");
    d->in_step = 0;
    for (int i = 0; i < d->ngrads; i++)
        if (!d->grads[i].ready) {
            drain(d, 0); /* do not leave work in flight */
            return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_ddp_finish: gradient %d is not ready", i);
        }
    if (d->mode == PLX_DDP_NO_SYNC) {
        for (int i = 0; i < d->ngrads; i++)
            d->grads[i].accumulated |= !d->grads[i].unused;
        return 0;
    }
    int rc = d->step_error;
    for (int b = 0; b < d->nbuckets && !rc; b++)
        if (!d->buckets[b].started)
            rc = plx__ddp_hook_start(d, &d->buckets[b]);
    int w = drain(d, !rc); /* a failed launch: results are not copied back */
    for (int i = 0; i < d->ngrads; i++)
        d->grads[i].accumulated = 0;
    return rc ? rc : w;
}

PLX_API int plx_broadcast_params(struct plx_comm *comm, void *const *bufs, const size_t *counts, const int *dtypes,
                                 int n, int root)
{
    for (int i = 0; i < n; i++) {
        int rc = plx_broadcast(comm, bufs[i], counts[i], dtypes[i], root);
        if (rc)
            return rc;
    }
    return 0;
}
