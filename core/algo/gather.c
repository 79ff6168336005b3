/* gather.c - direct gather and scatter (root talks to every rank at once)
 * and pairwise-exchange alltoall. */
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "reduce.h"

/* Root posts one transfer per peer, then waits for all. */
static int root_fanout(struct algo_ctx *x, int is_gather, char *blocks, size_t bytes)
{
    const struct plx__p2p *p = x->p;
    int P = x->size, rc = 0;
    void **req = calloc((size_t)P, sizeof *req);
    int n = 0, done = 0;
    if (!req)
        return plx__err(PLX_ERR_NOMEM, "%s: out of memory", is_gather ? "gather" : "scatter");
    for (int i = 0; i < P && rc == 0; i++) {
        if (i == x->rank)
            continue;
        rc = is_gather ? plx__irecv(x, i, blocks + (size_t)i * bytes, bytes, step_tag(x, 0, 0), &req[n])
                       : plx__isend(x, i, blocks + (size_t)i * bytes, bytes, step_tag(x, 0, 0), &req[n]);
        if (rc == 0)
            n++;
    }
    for (; rc == 0 && done < n; done++)
        rc = p->wait(p->ctx, req[done], x->deadline);
    for (; done < n; done++)
        p->discard(p->ctx, req[done]);
    free(req);
    return rc;
}

int plx__gather(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t bytes = a->count * x->esize;
    if (bytes == 0)
        return 0;
    if (x->rank != a->root)
        return plx__send(x, a->root, a->send, bytes, step_tag(x, 0, 0));
    char *mine = (char *)a->recv + (size_t)x->rank * bytes;
    if ((const char *)a->send != mine)
        plx__algo_copy(x, mine, a->send, bytes);
    return root_fanout(x, 1, a->recv, bytes);
}

int plx__scatter(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t bytes = a->count * x->esize;
    if (bytes == 0)
        return 0;
    if (x->rank != a->root)
        return plx__recv(x, a->root, a->recv, bytes, step_tag(x, 0, 0));
    const char *mine = (const char *)a->send + (size_t)x->rank * bytes;
    if ((char *)a->recv != mine)
        plx__algo_copy(x, a->recv, mine, bytes);
    return root_fanout(x, 0, (char *)a->send, bytes);
}

int plx__alltoall(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    int P = x->size, r = x->rank, rc;
    size_t bytes = a->count * x->esize;
    if (bytes == 0)
        return 0;
    const char *send = a->send;
    char *recv = a->recv;
    if (send == recv) { /* in place: keep the outgoing blocks safe first */
        char *copy = plx__algo_scratch(x, bytes * (size_t)P);
        if (!copy)
            return PLX_ERR_NOMEM;
        plx__algo_copy(x, copy, send, bytes * (size_t)P);
        send = copy;
    }
    plx__algo_copy(x, recv + (size_t)r * bytes, send + (size_t)r * bytes, bytes);
    for (int s = 1; s < P; s++) {
        int to = mod(r + s, P), from = mod(r - s, P);
        rc = plx__sendrecv(x, to, send + (size_t)to * bytes, bytes, from, recv + (size_t)from * bytes, bytes,
                           step_tag(x, (uint32_t)s, 0));
        if (rc)
            return rc;
    }
    return 0;
}
