/* stage.c - a collective on CUDA buffers for a backend that takes host
 * memory only ([core] cuda_staging = true): copy what this rank sends to a
 * host buffer kept by the communicator, run the core's generic algorithm
 * there, copy what it receives back. Costs two copies and a stream sync;
 * meant for correctness on any backend, not for speed. */
#include "comm.h"
#include "cuda_mem.h"
#include "error.h"

int plx__stage_run(struct plx_comm *c, const struct plx_coll_args *a, uint64_t deadline_ns)
{
    size_t es = plx_dtype_size(a->dtype), sn, rn;
    int use_send, use_recv;
    plx__coll_extent(c, a, &sn, &rn, &use_send, &use_recv);
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
    void *host_recv = ha.recv; /* f16/bf16 AVG runs on f32 copies and rounds back here */
    struct plx__lowp_avg *lowp = NULL;
    if (rc == 0 && plx__lowp_avg_needed(&ha))
        rc = plx__lowp_avg_begin(c, &ha, &lowp);
    if (rc == 0)
        rc = plx__lowp_avg_end(lowp, plx__algo_run(&c->p2p, &c->tuning, &c->scratch, &ha, deadline_ns));
    ha.recv = host_recv;
    if (rc == 0 && use_recv && rbytes && a->recv)
        rc = plx__cuda_copy(a->recv, ha.recv, rbytes, 0, a->stream);
    return rc;
}
