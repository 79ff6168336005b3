/* ring.c - ring reduce-scatter, ring allgather and the segmented ring step
 * they share. A ring moves 2(P-1)/P of the data per rank, the bandwidth
 * optimum; segments let receiving, reducing and sending overlap. */
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "reduce.h"

size_t plx__seg_elems(const struct algo_ctx *x, size_t max_elems)
{
    /* Smaller segments start the overlap of receiving, reducing and
     * sending sooner; larger ones mean fewer messages, and fewer waits for a
     * peer that is not running when ranks outnumber the cores. Two ranks
     * gain more from the first, more ranks from the second:
     * `sh bench/tuning.sh build segment` measures both (bench/tuning.md). */
    size_t bytes = x->t->segment_bytes ? x->t->segment_bytes : x->size == 2 ? 128u << 10 : 1u << 20;
    size_t seg = bytes / x->esize;
    if (seg > max_elems) /* one segment holds the block: scratch for more is waste */
        seg = max_elems;
    if (seg == 0)
        seg = 1;
    if (max_elems / seg >= 4096) /* tags hold 4096 segments per step */
        seg = max_elems / 4095 + 1;
    return seg;
}

int plx__ring_step(struct algo_ctx *x, const struct ring_io *io)
{
    const struct plx__p2p *p = x->p;
    size_t es = x->esize;
    if (!io->dst)
        return plx__sendrecv(x, io->to, io->sbuf, io->selems * es, io->from, io->rbuf, io->relems * es,
                             step_tag(x, io->tag_step, 0));

    /* Iteration k posts receives up to k + RING_WINDOW - 1 and send k,
     * reduces segment k, then retires send k - RING_WINDOW + 1. Send k
     * completes once the next rank posted receive k, which it did by its
     * iteration k - RING_WINDOW + 1; receive k needs only the previous rank's
     * iteration k. So no rank waits on one that waits on it, even where a send
     * completes only after the receiver posted (Gloo's notify protocol,
     * MPI's rendezvous), and up to RING_WINDOW segments are in flight. */
    size_t seg = io->seg;
    size_t nss = (io->selems + seg - 1) / seg, nrs = (io->relems + seg - 1) / seg;
    size_t n = nss > nrs ? nss : nrs;
    size_t spost = 0, sdone = 0, rpost = 0, rdone = 0;
    void *sreq[RING_WINDOW], *rreq[RING_WINDOW];
    int rc = 0;
    for (size_t k = 0; k < n + RING_WINDOW - 1; k++) {
        while (rpost < nrs && rpost < k + RING_WINDOW) {
            size_t len = seg_len(io->relems, rpost, seg);
            rc = plx__irecv(x, io->from, io->tmp + (rpost % RING_WINDOW) * seg * es, len * es,
                          step_tag(x, io->tag_step, (uint32_t)rpost), &rreq[rpost % RING_WINDOW]);
            if (rc)
                goto fail;
            rpost++;
        }
        if (k < nss) {
            size_t off = k * seg, len = seg_len(io->selems, k, seg);
            rc = plx__isend(x, io->to, io->sbuf + off * es, len * es, step_tag(x, io->tag_step, (uint32_t)k),
                          &sreq[k % RING_WINDOW]);
            if (rc)
                goto fail;
            spost++;
        }
        if (k < nrs) {
            rc = p->wait(p->ctx, rreq[k % RING_WINDOW], x->deadline);
            rdone++;
            if (rc)
                goto fail;
            size_t off = k * seg, len = seg_len(io->relems, k, seg);
            rc = plx__algo_reduce3(x, io->dst + off * es, io->src + off * es, io->tmp + (k % RING_WINDOW) * seg * es, len,
                              x->a->dtype, x->a->op);
            if (rc)
                goto fail;
        }
        if (k + 1 >= RING_WINDOW && sdone < spost && sdone == k + 1 - RING_WINDOW) {
            rc = p->wait(p->ctx, sreq[sdone % RING_WINDOW], x->deadline);
            sdone++;
            if (rc)
                goto fail;
        }
    }
    return 0;
fail:
    for (; rdone < rpost; rdone++)
        p->discard(p->ctx, rreq[rdone % RING_WINDOW]);
    for (; sdone < spost; sdone++)
        p->discard(p->ctx, sreq[sdone % RING_WINDOW]);
    return rc;
}

int plx__ring_reduce_scatter(struct algo_ctx *x, const char *src, struct layout l, char *full_out, char *out)
{
    int P = x->size, r = x->rank;
    size_t es = x->esize, maxblk = lo_len(l, P, 0);
    size_t seg = plx__seg_elems(x, maxblk);
    size_t partial_bytes = full_out ? 0 : 2 * maxblk * es;
    char *scratch = plx__algo_scratch(x, partial_bytes + RING_WINDOW * seg * es);
    if (!scratch)
        return PLX_ERR_NOMEM;
    char *partial[2] = {scratch, scratch + maxblk * es};
    const char *prev = NULL;
    for (int s = 0; s < P - 1; s++) {
        int sb = mod(r - s - 1, P), rb = mod(r - s - 2, P);
        char *dst = full_out ? full_out + lo_off(l, P, rb) * es : s == P - 2 ? out : partial[s & 1];
        struct ring_io io = {
            .to = mod(r + 1, P), .from = mod(r - 1, P),
            .sbuf = s == 0 ? src + lo_off(l, P, sb) * es : prev, .selems = lo_len(l, P, sb),
            .relems = lo_len(l, P, rb), .dst = dst, .src = src + lo_off(l, P, rb) * es,
            .tmp = scratch + partial_bytes, .seg = seg, .tag_step = (uint32_t)s,
        };
        int rc = plx__ring_step(x, &io);
        if (rc)
            return rc;
        prev = dst;
    }
    return 0;
}

int plx__ring_allgather(struct algo_ctx *x, char *buf, struct layout l, uint32_t step0)
{
    int P = x->size, r = x->rank;
    size_t es = x->esize;
    for (int s = 0; s < P - 1; s++) {
        int sb = mod(r - s, P), rb = mod(r - s - 1, P);
        struct ring_io io = {
            .to = mod(r + 1, P), .from = mod(r - 1, P),
            .sbuf = buf + lo_off(l, P, sb) * es, .selems = lo_len(l, P, sb),
            .rbuf = buf + lo_off(l, P, rb) * es, .relems = lo_len(l, P, rb),
            .tag_step = step0 + (uint32_t)s,
        };
        int rc = plx__ring_step(x, &io);
        if (rc)
            return rc;
    }
    return 0;
}

int plx__reduce_scatter(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    if (a->count == 0)
        return 0;
    if (x->size == 1) {
        if (a->recv != a->send)
            plx__algo_copy(x, a->recv, a->send, a->count * x->esize);
        return 0;
    }
    struct layout l = {a->count, 1};
    return plx__ring_reduce_scatter(x, a->send, l, NULL, a->recv);
}

int plx__allgather(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t bytes = a->count * x->esize;
    char *mine = (char *)a->recv + (size_t)x->rank * bytes;
    if (bytes == 0)
        return 0;
    if ((const char *)a->send != mine)
        plx__algo_copy(x, mine, a->send, bytes);
    struct layout l = {a->count, 1};
    return plx__ring_allgather(x, a->recv, l, 0);
}
