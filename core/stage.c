/* stage.c - a collective on CUDA buffers for a backend that takes host
 * memory only ([core] cuda_staging = true): copy what this rank sends to a
 * host buffer kept by the communicator, run the core's generic algorithm
 * there, copy what it receives back. Costs two copies and a stream sync;
 * meant for correctness on any backend, not for speed. */
#include "comm.h"
#include "cuda_mem.h"
#include "error.h"

/* Elements this rank sends and receives, and whether it does either. */
static void extent(const struct plx_comm *c, const struct plx_coll_args *a, size_t *sn, size_t *rn, int *use_send,
                   int *use_recv)
{
    size_t n = a->count, np = a->count * (size_t)c->size; /* coll.c checked the product */
    int root = c->rank == a->root;
    *sn = *rn = n;
    *use_send = *use_recv = 1;
    switch (a->coll) {
    case PLX_COLL_BROADCAST: *use_send = root; break;
    case PLX_COLL_REDUCE: *use_recv = root; break;
    case PLX_COLL_ALLGATHER: *rn = np; break;
    case PLX_COLL_REDUCE_SCATTER: *sn = np; break;
    case PLX_COLL_GATHER: *rn = np; *use_recv = root; break;
    case PLX_COLL_SCATTER: *sn = np; *use_send = root; break;
    case PLX_COLL_ALLTOALL: *sn = *rn = np; break;
    case PLX_COLL_BARRIER: *sn = *rn = 0; break;
    default: break;
    }
}

int plx__stage_run(struct plx_comm *c, const struct plx_coll_args *a, uint64_t deadline_ns)
{
    size_t es = plx_dtype_size(a->dtype), sn, rn;
    int use_send, use_recv;
    extent(c, a, &sn, &rn, &use_send, &use_recv);
    int inplace = a->send == a->recv;
    size_t sbytes = sn * es, rbytes = rn * es;
    size_t total = inplace ? (sbytes > rbytes ? sbytes : rbytes) : sbytes + rbytes;
    char *h = plx__scratch_get(&c->stage, total ? total : 1);
    if (!h)
        return plx__err(PLX_ERR_NOMEM, "CUDA staging: cannot allocate %zu bytes of host memory", total);
    struct plx_coll_args ha = *a;
    ha.flags &= ~PLX__COLL_FLAG_STAGED;
    ha.mem_kind = PLX_MEM_HOST;
    ha.send = h;
    ha.recv = inplace ? h : h + sbytes;
    int rc = 0;
    /* In place, the whole buffer goes in: the algorithm may read the receive part too. */
    size_t in = inplace ? total : sbytes;
    if (use_send && in && a->send)
        rc = plx__cuda_copy(h, a->send, in, 1, a->stream);
    if (rc == 0)
        rc = plx__algo_run(&c->p2p, &c->tuning, &c->scratch, &ha, deadline_ns);
    if (rc == 0 && use_recv && rbytes && a->recv)
        rc = plx__cuda_copy(a->recv, ha.recv, rbytes, 0, a->stream);
    return rc;
}
