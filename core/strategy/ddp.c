/* ddp.c - distributed data parallel: gradients grouped into buckets of at
 * most bucket_cap_bytes in reverse registration order (the order backward
 * produces them), one allreduce per bucket; OVERLAP starts buckets in bucket
 * order as soon as each is complete, SYNC at finish, NO_SYNC never.
 *
 * Collectives on a communicator pair up by issue order, so every rank must
 * launch bucket k as its k-th allreduce whatever order its gradients became
 * ready in: a bucket that completes early waits until every earlier bucket
 * has been launched (as PyTorch's reducer does). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plexus/backend.h" /* PLX_HAS_FIELD */
#include "plexus/strategy.h"

struct grad {
    void *ptr;
    size_t count;
    int dtype, bucket, ready;
    size_t off; /* element offset inside its bucket */
};

struct bucket {
    int dtype;
    size_t count;
    void *buf;           /* flat copy; NULL when the bucket holds one gradient (reduced in place) */
    int first, n;        /* gradients first .. first - n + 1 (reverse order) */
    int pending;         /* gradients not ready yet this step */
    struct plx_work *work;
};

struct plx_ddp {
    struct plx_comm *comm;
    struct plx_ddp_options opt;
    struct grad *grads;
    int ngrads, cap;
    struct bucket *buckets;
    int nbuckets;
    int next_launch;     /* OVERLAP: the first bucket not launched yet this step */
    int mode, in_step;
    pthread_mutex_t mu;  /* plx_ddp_ready may be called from several threads */
};

PLX_API void plx_ddp_options_init(struct plx_ddp_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->bucket_cap_bytes = 25u << 20;
    o->average = 1;
}

PLX_API int plx_ddp_create(struct plx_comm *comm, const struct plx_ddp_options *o, struct plx_ddp **out)
{
    if (!comm || !out)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_ddp_create: comm or out is NULL");
    struct plx_ddp *d = calloc(1, sizeof *d);
    if (!d)
        return plx__err(PLX_ERR_NOMEM, "plx_ddp_create: out of memory");
    d->comm = comm;
    pthread_mutex_init(&d->mu, NULL);
    plx_ddp_options_init(&d->opt);
    if (o) {
        if (PLX_HAS_FIELD(o, struct plx_ddp_options, bucket_cap_bytes) && o->bucket_cap_bytes)
            d->opt.bucket_cap_bytes = o->bucket_cap_bytes;
        if (PLX_HAS_FIELD(o, struct plx_ddp_options, average))
            d->opt.average = o->average;
    }
    *out = d;
    return 0;
}

PLX_API void plx_ddp_destroy(struct plx_ddp *d)
{
    if (!d)
        return;
    for (int b = 0; b < d->nbuckets; b++) {
        plx_work_free(d->buckets[b].work);
        free(d->buckets[b].buf);
    }
    free(d->buckets);
    free(d->grads);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

PLX_API int plx_ddp_register(struct plx_ddp *d, void *grad, size_t count, int dtype, int *index)
{
    if (!d || (!grad && count) || plx_dtype_size(dtype) == 0)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_ddp_register: bad gradient (buffer %p, dtype %d)", grad, dtype);
    if (d->buckets)
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_ddp_register: gradients must be registered before the first step");
    if (d->ngrads == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        struct grad *g = realloc(d->grads, (size_t)cap * sizeof *g);
        if (!g)
            return plx__err(PLX_ERR_NOMEM, "plx_ddp_register: out of memory");
        d->grads = g;
        d->cap = cap;
    }
    d->grads[d->ngrads] = (struct grad){grad, count, dtype, -1, 0, 0};
    if (index)
        *index = d->ngrads;
    d->ngrads++;
    return 0;
}

/* Buckets in reverse registration order, one dtype each, capped in bytes. */
static int build_buckets(struct plx_ddp *d)
{
    d->buckets = calloc((size_t)(d->ngrads ? d->ngrads : 1), sizeof *d->buckets);
    if (!d->buckets)
        return plx__err(PLX_ERR_NOMEM, "ddp: out of memory");
    struct bucket *cur = NULL;
    for (int i = d->ngrads - 1; i >= 0; i--) {
        struct grad *g = &d->grads[i];
        size_t es = plx_dtype_size(g->dtype);
        if (!cur || cur->dtype != g->dtype || (cur->count + g->count) * es > d->opt.bucket_cap_bytes) {
            cur = &d->buckets[d->nbuckets++];
            cur->dtype = g->dtype;
            cur->first = i;
        }
        g->bucket = (int)(cur - d->buckets);
        g->off = cur->count;
        cur->count += g->count;
        cur->n++;
    }
    for (int b = 0; b < d->nbuckets; b++) {
        struct bucket *k = &d->buckets[b];
        if (k->n > 1 && !(k->buf = malloc(k->count * plx_dtype_size(k->dtype) + 1)))
            return plx__err(PLX_ERR_NOMEM, "ddp: out of memory for a bucket of %zu elements", k->count);
    }
    return 0;
}

PLX_API int plx_ddp_bucket_count(const struct plx_ddp *d)
{
    return d ? d->nbuckets : PLX_ERR_INVALID_ARG;
}

PLX_API int plx_ddp_begin(struct plx_ddp *d, int mode)
{
    if (!d || mode < PLX_DDP_SYNC || mode > PLX_DDP_NO_SYNC)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_ddp_begin: bad mode %d", mode);
    if (d->in_step)
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_ddp_begin: the previous step was not finished");
    int rc;
    if (!d->buckets && (rc = build_buckets(d)) != 0)
        return rc;
    for (int i = 0; i < d->ngrads; i++)
        d->grads[i].ready = 0;
    for (int b = 0; b < d->nbuckets; b++)
        d->buckets[b].pending = d->buckets[b].n;
    d->next_launch = 0;
    d->mode = mode;
    d->in_step = 1;
    return 0;
}

static int start_bucket(struct plx_ddp *d, struct bucket *k)
{
    size_t es = plx_dtype_size(k->dtype);
    void *data = k->buf;
    if (k->buf) {
        for (int i = k->first; i > k->first - k->n; i--)
            memcpy((char *)k->buf + d->grads[i].off * es, d->grads[i].ptr, d->grads[i].count * es);
    } else {
        data = d->grads[k->first].ptr;
    }
    return plx_iallreduce(d->comm, data, data, k->count, k->dtype, d->opt.average ? PLX_AVG : PLX_SUM, NULL, &k->work);
}

PLX_API int plx_ddp_ready(struct plx_ddp *d, int index)
{
    if (!d || index < 0 || index >= d->ngrads)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_ddp_ready: no gradient %d", index);
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    struct grad *g = &d->grads[index];
    if (!d->in_step) {
        rc = plx__err(PLX_ERR_INVALID_USAGE, "plx_ddp_ready(%d): no step begun (call plx_ddp_begin)", index);
    } else if (g->ready) {
        rc = plx__err(PLX_ERR_INVALID_USAGE, "plx_ddp_ready: gradient %d marked ready twice in this step", index);
    } else {
        g->ready = 1;
        d->buckets[g->bucket].pending--;
        /* Launch in bucket order: the completed prefix of buckets, no further. */
        while (d->mode == PLX_DDP_OVERLAP && !rc && d->next_launch < d->nbuckets &&
               d->buckets[d->next_launch].pending == 0)
            rc = start_bucket(d, &d->buckets[d->next_launch++]);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

PLX_API int plx_ddp_finish(struct plx_ddp *d)
{
    if (!d || !d->in_step)
        return plx__err(PLX_ERR_INVALID_USAGE, "plx_ddp_finish: no step begun");
    for (int i = 0; i < d->ngrads; i++)
        if (!d->grads[i].ready) {
            d->in_step = 0;
            for (int b = 0; b < d->nbuckets; b++) { /* do not leave work in flight */
                if (d->buckets[b].work)
                    plx_work_wait(d->buckets[b].work, PLX_TIMEOUT_DEFAULT);
                plx_work_free(d->buckets[b].work);
                d->buckets[b].work = NULL;
            }
            return plx__err(PLX_ERR_INVALID_USAGE, "plx_ddp_finish: gradient %d is not ready", i);
        }
    d->in_step = 0;
    if (d->mode == PLX_DDP_NO_SYNC)
        return 0;
    int rc = 0;
    for (int b = 0; b < d->nbuckets && !rc; b++)
        if (!d->buckets[b].work)
            rc = start_bucket(d, &d->buckets[b]);
    for (int b = 0; b < d->nbuckets; b++) {
        struct bucket *k = &d->buckets[b];
        if (!k->work)
            continue;
        int w = plx_work_wait(k->work, PLX_TIMEOUT_DEFAULT);
        plx_work_free(k->work);
        k->work = NULL;
        if (w && !rc)
            rc = w;
        if (!w && k->buf) {
            size_t es = plx_dtype_size(k->dtype);
            for (int i = k->first; i > k->first - k->n; i--)
                memcpy(d->grads[i].ptr, (char *)k->buf + d->grads[i].off * es, d->grads[i].count * es);
        }
    }
    return rc;
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
