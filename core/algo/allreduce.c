/* allreduce.c - allreduce: ring reduce-scatter + allgather for bandwidth,
 * recursive doubling (log2 P steps) for latency, or reduce + broadcast. */
#include "error.h"
#include "internal.h"
#include "reduce.h"

/* Recursive doubling; a non-power-of-two P first folds the extra ranks into
 * their neighbours and unfolds the result at the end. */
static int recursive_doubling(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    int P = x->size, r = x->rank, rc;
    size_t bytes = a->count * x->esize;
    char *buf = a->recv;
    char *tmp = plx__scratch_get(x->scratch, bytes);
    if (!tmp)
        return PLX_ERR_NOMEM;
    if (a->send != a->recv)
        memcpy(buf, a->send, bytes);
    int p2 = 1;
    while (p2 * 2 <= P)
        p2 *= 2;
    int rem = P - p2, vr;
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            if ((rc = plx__send(x, r + 1, buf, bytes, step_tag(x, 0, 0))) != 0)
                return rc;
            vr = -1;
        } else {
            if ((rc = plx__recv(x, r - 1, tmp, bytes, step_tag(x, 0, 0))) != 0)
                return rc;
            if ((rc = plx__reduce3(buf, tmp, buf, a->count, a->dtype, a->op)) != 0)
                return rc;
            vr = r / 2;
        }
    } else {
        vr = r - rem;
    }
    if (vr >= 0) {
        uint32_t step = 1;
        for (int mask = 1; mask < p2; mask <<= 1, step++) {
            int vp = vr ^ mask, peer = vp < rem ? vp * 2 + 1 : vp + rem;
            if ((rc = plx__sendrecv(x, peer, buf, bytes, peer, tmp, bytes, step_tag(x, step, 0))) != 0)
                return rc;
            /* Lower virtual rank first, so both partners compute the same bits. */
            rc = vr < vp ? plx__reduce3(buf, buf, tmp, a->count, a->dtype, a->op)
                         : plx__reduce3(buf, tmp, buf, a->count, a->dtype, a->op);
            if (rc)
                return rc;
        }
    }
    if (r < 2 * rem)
        rc = r % 2 ? plx__send(x, r - 1, buf, bytes, step_tag(x, 63, 0))
                   : plx__recv(x, r + 1, buf, bytes, step_tag(x, 63, 0));
    return rc;
}

int plx__allreduce(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t bytes = a->count * x->esize;
    if (a->count == 0)
        return 0;
    if (x->size == 1) {
        if (a->recv != a->send)
            memmove(a->recv, a->send, bytes);
        return 0;
    }
    int algo = x->t->allreduce_algo;
    if (algo == PLX__AR_AUTO)
        algo = bytes <= x->t->small_bytes || a->count < (size_t)x->size ? PLX__AR_RECDBL : PLX__AR_RING;
    switch (algo) {
    case PLX__AR_RECDBL:
        return recursive_doubling(x);
    case PLX__AR_TREE: {
        int rc = plx__tree_reduce(x, a->send, a->recv, a->recv, 0);
        x->tag_base = 128;
        return rc ? rc : plx__tree_bcast(x, a->recv, 0);
    }
    default: {
        struct layout l = {a->count, 0};
        int rc = plx__ring_reduce_scatter(x, a->send, l, a->recv, NULL);
        return rc ? rc : plx__ring_allgather(x, a->recv, l, (uint32_t)x->size);
    }
    }
}
