/* alltoallv.c - vector alltoall by pairwise exchange and vector allgather
 * by a ring, for per-rank counts (struct plx__vspec, collv.h). Blocks of
 * zero elements are not sent: both ends know the count, so both skip. */
#include <stdlib.h>

#include "collv.h"
#include "error.h"
#include "internal.h"

/* Pairwise exchange: in step s rank r sends to r+s and receives from r-s.
 * Every receive and send is posted up front (in step order), then waited
 * for, so a slow pair does not hold up the others. */
int plx__alltoallv(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    const struct plx__vspec *v = plx__vspec_of(a);
    const struct plx__p2p *p = x->p;
    int P = x->size, r = x->rank, rc = 0;
    size_t es = x->esize;
    const char *send = a->send;
    char *recv = a->recv;
    if (send == recv) { /* in place: keep the outgoing blocks safe first */
        size_t ext = 0;
        for (int i = 0; i < P; i++)
            if (v->scounts[i] && v->sdispls[i] + v->scounts[i] > ext)
                ext = v->sdispls[i] + v->scounts[i];
        char *copy = ext ? plx__scratch_get(x->scratch, ext * es) : NULL;
        if (ext && !copy)
            return PLX_ERR_NOMEM;
        if (ext)
            memcpy(copy, send, ext * es);
        send = copy;
    }
    if (v->scounts[r])
        memmove(recv + v->rdispls[r] * es, send + v->sdispls[r] * es, v->scounts[r] * es);
    if (P == 1)
        return 0;
    void **req = calloc(2 * (size_t)P, sizeof *req);
    if (!req)
        return plx__err(PLX_ERR_NOMEM, "alltoallv: out of memory");
    int n = 0, done = 0;
    uint64_t tag = step_tag(x, 0, 0); /* one message per ordered pair */
    for (int s = 1; s < P && rc == 0; s++) {
        int from = mod(r - s, P);
        if (v->rcounts[from] &&
            (rc = p->irecv(p->ctx, from, recv + v->rdispls[from] * es, v->rcounts[from] * es, tag, &req[n])) == 0)
            n++;
    }
    for (int s = 1; s < P && rc == 0; s++) {
        int to = mod(r + s, P);
        if (v->scounts[to] &&
            (rc = p->isend(p->ctx, to, send + v->sdispls[to] * es, v->scounts[to] * es, tag, &req[n])) == 0)
            n++;
    }
    for (; rc == 0 && done < n; done++)
        rc = p->wait(p->ctx, req[done], x->deadline);
    for (; done < n; done++)
        p->discard(p->ctx, req[done]);
    free(req);
    return rc;
}

/* Ring: in step k rank r passes block r-k on to r+1 and takes block r-k-1
 * from r-1, straight into its place in recv. */
int plx__allgatherv(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    const struct plx__vspec *v = plx__vspec_of(a);
    int P = x->size, r = x->rank, rc;
    size_t es = x->esize;
    char *recv = a->recv;
    if (v->send_count)
        memmove(recv + v->rdispls[r] * es, a->send, v->send_count * es);
    int to = mod(r + 1, P), from = mod(r - 1, P);
    for (int k = 0; k < P - 1; k++) {
        int sb = mod(r - k, P), rb = mod(r - k - 1, P);
        size_t sn = v->rcounts[sb] * es, rn = v->rcounts[rb] * es;
        uint64_t tag = step_tag(x, (uint32_t)k, 0);
        if (sn && rn)
            rc = plx__sendrecv(x, to, recv + v->rdispls[sb] * es, sn, from, recv + v->rdispls[rb] * es, rn, tag);
        else if (sn)
            rc = plx__send(x, to, recv + v->rdispls[sb] * es, sn, tag);
        else if (rn)
            rc = plx__recv(x, from, recv + v->rdispls[rb] * es, rn, tag);
        else
            rc = 0;
        if (rc)
            return rc;
    }
    return 0;
}
