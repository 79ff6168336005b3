/* items.c - describe a strategy's state as checkpoint items in one call:
 * FSDP parameter shards, and replicated buffers (DDP parameters, optimizer
 * state every rank holds whole). */
#include <string.h>

#include "ckpt.h"
#include "plexus/strategy.h"

static void fill(struct plx_ckpt_item *it, const char *name, int dtype, size_t count, int ndim,
                 const int64_t *shape)
{
    plx_ckpt_item_init(it);
    it->name = name;
    it->dtype = dtype;
    if (shape && ndim > 0 && ndim <= PLX_CKPT_MAX_DIMS) {
        it->ndim = ndim;
        memcpy(it->shape, shape, (size_t)ndim * sizeof *shape);
    } else {
        it->ndim = 1;
        it->shape[0] = (int64_t)count;
    }
}

PLX_API int plx_ckpt_fsdp_items(struct plx_fsdp *f, int n, const char *const *names, const size_t *counts,
                                const int *dtypes, const int *ndims, const int64_t *const *shapes,
                                struct plx_ckpt_item *items)
{
    if (!f || n < 0 || (n && (!names || !counts || !dtypes || !items)))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_fsdp_items: missing FSDP instance, names, counts or items");
    for (int u = 0; u < n; u++) {
        fill(&items[u], names[u], dtypes[u], counts[u], ndims ? ndims[u] : 1, shapes ? shapes[u] : NULL);
        size_t real;
        items[u].data = plx_fsdp_shard(f, u, &real);
        items[u].offset = plx_fsdp_shard_offset(f, u);
        items[u].count = real;
        if (!items[u].data)
            return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_fsdp_items: FSDP has no unit %d ('%s')", u, names[u]);
        size_t nelem;
        if (plx__ckpt_nelem(items[u].ndim, items[u].shape, &nelem) || nelem != counts[u])
            return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_fsdp_items: unit %d ('%s'): shape holds %zu elements, count is %zu",
                            u, names[u], nelem, counts[u]);
        if (real == 0)
            items[u].offset = 0; /* an all-padding shard: nothing of this unit here */
    }
    return 0;
}

PLX_API int plx_ckpt_replicated_items(struct plx_comm *comm, int save, int n, const char *const *names,
                                      void *const *bufs, const size_t *counts, const int *dtypes, const int *ndims,
                                      const int64_t *const *shapes, struct plx_ckpt_item *items)
{
    if (n < 0 || (n && (!names || !bufs || !counts || !dtypes || !items)))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_replicated_items: missing names, buffers, counts or items");
    size_t P = comm ? (size_t)plx_comm_size(comm) : 1, r = comm ? (size_t)plx_comm_rank(comm) : 0;
    for (int i = 0; i < n; i++) {
        fill(&items[i], names[i], dtypes[i], counts[i], ndims ? ndims[i] : 1, shapes ? shapes[i] : NULL);
        size_t lo = 0, hi = counts[i];
        if (save) { /* slice r of P: the ranks write disjoint parts in parallel */
            lo = counts[i] * r / P;
            hi = counts[i] * (r + 1) / P;
        }
        items[i].offset = lo;
        items[i].count = hi - lo;
        items[i].data = (char *)bufs[i] + lo * plx_dtype_size(dtypes[i]);
    }
    return 0;
}
