/* ddp_buckets.c - DDP's bucket layout and storage, as PyTorch's reducer
 * assigns buckets: gradients taken in reverse registration order (the order
 * backward produces them), each dtype filling its own open bucket, a bucket
 * closed once it holds at least its cap (the gradient crossing the cap stays
 * in), each dtype's first bucket capped by first_bucket_bytes so the first
 * allreduce starts early. Buckets are numbered in the order they opened. */
#include <stdlib.h>
#include <string.h>

#include "ddp_internal.h"

/* Open bucket of each dtype while laying out (-1: none). */
struct open_state {
    int open[PLX_DTYPE_COUNT];
    int closed[PLX_DTYPE_COUNT]; /* buckets of that dtype closed so far */
};

int plx__ddp_layout(struct plx_ddp *d)
{
    if (d->laid_out)
        return 0;
    int n = d->ngrads ? d->ngrads : 1;
    d->buckets = calloc((size_t)n, sizeof *d->buckets);
    d->members = calloc((size_t)n, sizeof *d->members);
    if (!d->buckets || !d->members) {
        plx__ddp_free_layout(d);
        return plx_set_error(PLX_ERR_NOMEM, "ddp: out of memory laying out %d gradients", d->ngrads);
    }
    size_t cap = d->opt.bucket_cap_bytes, first = d->opt.first_bucket_bytes;
    if (first > cap)
        first = cap;
    struct open_state st;
    for (int t = 0; t < PLX_DTYPE_COUNT; t++) {
        st.open[t] = -1;
        st.closed[t] = 0;
    }
    /* Pass 1: which bucket each gradient joins, and its offset there. */
    for (int i = d->ngrads - 1; i >= 0; i--) {
        struct ddp_grad *g = &d->grads[i];
        int t = g->dtype;
        if (st.open[t] < 0) {
            struct ddp_bucket *k = &d->buckets[d->nbuckets];
            k->dtype = t;
            k->cap_bytes = st.closed[t] ? cap : first;
            st.open[t] = d->nbuckets++;
        }
        struct ddp_bucket *k = &d->buckets[st.open[t]];
        g->bucket = st.open[t];
        g->off = k->count;
        k->count += g->count;
        k->n++;
        if (k->count * plx_dtype_size(t) >= k->cap_bytes) {
            st.open[t] = -1;
            st.closed[t]++;
        }
    }
    /* Pass 2: members grouped by bucket, each group in bucket order. */
    int at = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        d->buckets[b].first = at;
        at += d->buckets[b].n;
        d->buckets[b].n = 0;
    }
    for (int i = d->ngrads - 1; i >= 0; i--) {
        struct ddp_bucket *k = &d->buckets[d->grads[i].bucket];
        d->members[k->first + k->n++] = i;
    }
    /* Storage: a flat buffer per bucket, except a lone gradient reduced in
     * place when it is not a bucket view. */
    for (int b = 0; b < d->nbuckets; b++) {
        struct ddp_bucket *k = &d->buckets[b];
        if (k->n == 1 && !d->opt.gradient_as_bucket_view)
            continue;
        if (!(k->buf = calloc(k->count ? k->count : 1, plx_dtype_size(k->dtype)))) {
            plx__ddp_free_layout(d);
            return plx_set_error(PLX_ERR_NOMEM, "ddp: out of memory for bucket %d of %zu elements", b, k->count);
        }
    }
    if (d->opt.gradient_as_bucket_view)
        for (int i = 0; i < d->ngrads; i++) {
            struct ddp_grad *g = &d->grads[i];
            void *slot = plx__ddp_slot(d, g);
            if (g->ptr)
                memcpy(slot, g->ptr, g->count * plx_dtype_size(g->dtype));
            g->ptr = slot;
        }
    d->laid_out = 1;
    return 0;
}

void plx__ddp_free_layout(struct plx_ddp *d)
{
    for (int b = 0; d->buckets && b < d->nbuckets; b++) {
        plx_work_free(d->buckets[b].work);
        free(d->buckets[b].buf);
    }
    free(d->buckets);
    free(d->members);
    d->buckets = NULL;
    d->members = NULL;
    d->nbuckets = 0;
}

/* The gradient's place in its bucket's flat storage (its own buffer when
 * the bucket has none). */
void *plx__ddp_slot(const struct plx_ddp *d, const struct ddp_grad *g)
{
    const struct ddp_bucket *k = &d->buckets[g->bucket];
    return k->buf ? (char *)k->buf + g->off * plx_dtype_size(g->dtype) : g->ptr;
}

void *plx__ddp_bucket_data(const struct plx_ddp *d, const struct ddp_bucket *k)
{
    return k->buf ? k->buf : d->grads[d->members[k->first]].ptr;
}

/* Before the reduction: every member's contribution into its slot. An
 * unused gradient contributes zero unless NO_SYNC steps accumulated into it. */
void plx__ddp_fill(struct plx_ddp *d, struct ddp_bucket *k)
{
    for (int m = k->first; m < k->first + k->n; m++) {
        struct ddp_grad *g = &d->grads[d->members[m]];
        void *slot = plx__ddp_slot(d, g);
        size_t bytes = g->count * plx_dtype_size(g->dtype);
        if (g->unused && !g->accumulated)
            memset(slot, 0, bytes);
        else if (slot != g->ptr)
            memcpy(slot, g->ptr, bytes);
    }
}

/* After it: the result back into every gradient that lives outside its
 * bucket (unused ones too, as PyTorch writes the bucket into every grad). */
void plx__ddp_unfill(struct plx_ddp *d, struct ddp_bucket *k)
{
    for (int m = k->first; m < k->first + k->n; m++) {
        struct ddp_grad *g = &d->grads[d->members[m]];
        void *slot = plx__ddp_slot(d, g);
        if (slot != g->ptr)
            memcpy(g->ptr, slot, g->count * plx_dtype_size(g->dtype));
    }
}
