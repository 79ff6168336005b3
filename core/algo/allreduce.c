/* allreduce.c - allreduce: ring reduce-scatter + allgather for bandwidth,
 * Rabenseifner (halving + doubling) for bandwidth in fewer rounds, recursive
 * doubling (log2 P steps) for latency, or reduce + broadcast. */
#include "error.h"
#include "internal.h"
#include "log.h"
#include "reduce.h"

/* The largest power of two <= P. */
static int pow2_floor(int P)
{
    int p2 = 1;
    while (p2 * 2 <= P)
        p2 *= 2;
    return p2;
}

/* Fold a non-power-of-two P onto p2 ranks: of the first 2 * (P - p2) ranks,
 * each even one hands its input (from) to the odd one above, which reduces
 * it into buf and takes virtual rank r / 2; the rest take r - (P - p2).
 * Returns the virtual rank in *vr, -1 for a rank that sits out. */
static int fold(struct algo_ctx *x, const char *from, char *buf, char *tmp, int p2, int *vr)
{
    const struct plx_coll_args *a = x->a;
    int r = x->rank, rem = x->size - p2, rc;
    size_t bytes = a->count * x->esize;
    *vr = r - rem;
    if (r >= 2 * rem) {
        if (from != buf)
            plx__algo_copy(x, buf, from, bytes);
        return 0;
    }
    if (r % 2 == 0) {
        *vr = -1;
        return plx__send(x, r + 1, from, bytes, step_tag(x, 0, 0));
    }
    *vr = r / 2;
    if ((rc = plx__recv(x, r - 1, tmp, bytes, step_tag(x, 0, 0))) != 0)
        return rc;
    return plx__algo_reduce3(x, buf, tmp, from, a->count, a->dtype, a->op);
}

/* The folded-out ranks get the result from their partner. */
static int unfold(struct algo_ctx *x, char *buf, int p2)
{
    int r = x->rank, rem = x->size - p2;
    size_t bytes = x->a->count * x->esize;
    if (r >= 2 * rem)
        return 0;
    return r % 2 ? plx__send(x, r - 1, buf, bytes, step_tag(x, 63, 0))
                 : plx__recv(x, r + 1, buf, bytes, step_tag(x, 63, 0));
}

static int real_rank(int vr, int rem)
{
    return vr < rem ? vr * 2 + 1 : vr + rem;
}

/* Recursive doubling: log2 P exchanges of the whole buffer. */
static int recursive_doubling(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t bytes = a->count * x->esize;
    char *buf = a->recv;
    char *tmp = plx__algo_scratch(x, bytes);
    if (!tmp)
        return PLX_ERR_NOMEM;
    int p2 = pow2_floor(x->size), rem = x->size - p2, vr, rc;
    if ((rc = fold(x, a->send, buf, tmp, p2, &vr)) != 0)
        return rc;
    if (vr >= 0) {
        uint32_t step = 1;
        for (int mask = 1; mask < p2; mask <<= 1, step++) {
            int vp = vr ^ mask, peer = real_rank(vp, rem);
            if ((rc = plx__sendrecv(x, peer, buf, bytes, peer, tmp, bytes, step_tag(x, step, 0))) != 0)
                return rc;
            /* Lower virtual rank first, so both partners compute the same bits. */
            rc = vr < vp ? plx__algo_reduce3(x, buf, buf, tmp, a->count, a->dtype, a->op)
                         : plx__algo_reduce3(x, buf, tmp, buf, a->count, a->dtype, a->op);
            if (rc)
                return rc;
        }
    }
    return unfold(x, buf, p2);
}

/* Rabenseifner's allreduce: reduce-scatter by recursive halving, then
 * allgather by recursive doubling. The ring's 2(P-1)/P of the data per rank
 * in 2 log2 P rounds instead of 2(P-1): with more ranks than cores every
 * round waits for a descheduled peer, so fewer rounds win (4 ranks on 2
 * cores, 1 MiB: see bench/compare.sh). Each element is reduced by one rank
 * only, so every rank ends with the same bits. */
static int rabenseifner(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t es = x->esize, n = a->count;
    int p2 = pow2_floor(x->size), rem = x->size - p2, vr, rc;
    size_t seg = plx__seg_elems(x, block_off(n, 2, 1) + 1);
    size_t tmp_bytes = RING_WINDOW * seg * es;
    if (rem && tmp_bytes < n * es)
        tmp_bytes = n * es; /* the fold receives a whole buffer */
    char *tmp = plx__algo_scratch(x, tmp_bytes);
    if (!tmp)
        return PLX_ERR_NOMEM;
    char *out = a->recv;
    const char *cur = a->send; /* where this rank's partial sums are */
    if (rem) { /* without a fold, the first halving step reads send directly: no copy */
        if ((rc = fold(x, a->send, out, tmp, p2, &vr)) != 0)
            return rc;
        cur = out;
    } else {
        vr = x->rank;
    }
    if (vr >= 0) {
        /* Partners by distance doubling: the first, largest halves go to the
         * nearest ranks, those of the same host where ranks are numbered host
         * by host, and only the smaller ones cross the NICs (halving from
         * the farthest, every rank of a host would put its half of the whole
         * buffer on the host's NIC at once). The ranges stay contiguous: rank
         * vr ends with the block at its bits reversed. */
        uint32_t step = 1;
        int lo = 0; /* this rank's range: blocks [lo, lo + half * 2) of p2 */
        for (int bit = 1, half = p2 / 2; half >= 1; bit <<= 1, half /= 2, step++) {
            int peer = real_rank(vr ^ bit, rem);
            int keep = vr & bit ? lo + half : lo, give = vr & bit ? lo : lo + half;
            size_t koff = block_off(n, p2, keep), goff = block_off(n, p2, give);
            struct ring_io io = {
                .to = peer, .from = peer,
                .sbuf = cur + goff * es, .selems = block_off(n, p2, give + half) - goff,
                .relems = block_off(n, p2, keep + half) - koff, .dst = out + koff * es, .src = cur + koff * es,
                .tmp = tmp, .seg = seg, .tag_step = step,
            };
            if ((rc = plx__ring_step(x, &io)) != 0)
                return rc;
            cur = out;
            lo = keep;
        }
        for (int have = 1; have < p2; have *= 2, step++) { /* the halving's partners, last first */
            int peer = real_rank(vr ^ (p2 / 2 / have), rem), plo = lo ^ have;
            size_t off = block_off(n, p2, lo), poff = block_off(n, p2, plo);
            rc = plx__sendrecv(x, peer, out + off * es, (block_off(n, p2, lo + have) - off) * es, peer,
                               out + poff * es, (block_off(n, p2, plo + have) - poff) * es, step_tag(x, step, 0));
            if (rc)
                return rc;
            lo = lo < plo ? lo : plo;
        }
    }
    return unfold(x, out, p2);
}

/* P = 2 (the ring's case): both phases at once. Each rank sends its copy
 * of the peer's half raw, reduces its own half segment by segment as the
 * peer's copy arrives, and returns each reduced segment at once, while it is
 * still in cache; the peer's reduced half lands straight in the output.
 * Against a reduce-scatter then an allgather this saves a pass over the
 * buffer and the pipeline drain between the phases. Each element is reduced
 * once, so both ranks hold the same bits. In place, a final segment can only
 * arrive after the peer received this rank's raw copy of it, so the receive
 * never overwrites data still being sent. Windows as in plx__ring_step: a
 * wait in iteration k needs only what the peer posted by its iteration k. */
enum { RAW_SEND, RAW_RECV, FINAL_SEND, FINAL_RECV, PAIR_KINDS, PAIR_SLOTS = 2 * RING_WINDOW };
struct pair_state {
    void *req[PAIR_KINDS][PAIR_SLOTS];
    size_t posted[PAIR_KINDS], done[PAIR_KINDS];
};

static int pair_wait(struct algo_ctx *x, struct pair_state *st, int kind)
{
    size_t i = st->done[kind]++;
    return x->p->wait(x->p->ctx, st->req[kind][i % PAIR_SLOTS], x->deadline);
}

static int pair_allreduce(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    const struct plx__p2p *p = x->p;
    size_t es = x->esize, n = a->count;
    int peer = 1 - x->rank;
    size_t moff = block_off(n, 2, x->rank), mlen = block_len(n, 2, x->rank); /* reduced here */
    size_t toff = block_off(n, 2, peer), tlen = block_len(n, 2, peer);       /* reduced there */
    size_t seg = plx__seg_elems(x, mlen > tlen ? mlen : tlen);
    char *tmp = plx__algo_scratch(x, RING_WINDOW * seg * es);
    if (!tmp)
        return PLX_ERR_NOMEM;
    const char *src = a->send;
    char *out = a->recv;
    size_t nm = (mlen + seg - 1) / seg, nt = (tlen + seg - 1) / seg, nk = nm > nt ? nm : nt;
    struct pair_state st = {0};
    int rc = 0;
    for (size_t k = 0; k < nk + RING_WINDOW - 1; k++) {
        for (size_t i; (i = st.posted[RAW_RECV]) < nm && i < k + RING_WINDOW; st.posted[RAW_RECV]++)
            if ((rc = plx__irecv(x, peer, tmp + (i % RING_WINDOW) * seg * es, seg_len(mlen, i, seg) * es,
                               step_tag(x, 0, (uint32_t)i), &st.req[RAW_RECV][i % PAIR_SLOTS])) != 0)
                goto fail;
        for (size_t i; (i = st.posted[FINAL_RECV]) < nt && i < k + RING_WINDOW; st.posted[FINAL_RECV]++)
            if ((rc = plx__irecv(x, peer, out + (toff + i * seg) * es, seg_len(tlen, i, seg) * es,
                               step_tag(x, 1, (uint32_t)i), &st.req[FINAL_RECV][i % PAIR_SLOTS])) != 0)
                goto fail;
        if (k < nt) {
            if ((rc = plx__isend(x, peer, src + (toff + k * seg) * es, seg_len(tlen, k, seg) * es,
                               step_tag(x, 0, (uint32_t)k), &st.req[RAW_SEND][k % PAIR_SLOTS])) != 0)
                goto fail;
            st.posted[RAW_SEND]++;
        }
        if (k < nm) {
            if ((rc = pair_wait(x, &st, RAW_RECV)) != 0)
                goto fail;
            size_t off = (moff + k * seg) * es;
            if ((rc = plx__algo_reduce3(x, out + off, src + off, tmp + (k % RING_WINDOW) * seg * es, seg_len(mlen, k, seg),
                                   a->dtype, a->op)) != 0)
                goto fail;
            if ((rc = plx__isend(x, peer, out + off, seg_len(mlen, k, seg) * es, step_tag(x, 1, (uint32_t)k),
                               &st.req[FINAL_SEND][k % PAIR_SLOTS])) != 0)
                goto fail;
            st.posted[FINAL_SEND]++;
        }
        /* Retire what was posted RING_WINDOW - 1 iterations ago. */
        for (int kind = 0; kind < PAIR_KINDS; kind++)
            if (kind != RAW_RECV && k + 1 >= RING_WINDOW && st.done[kind] < st.posted[kind] &&
                st.done[kind] <= k + 1 - RING_WINDOW && (rc = pair_wait(x, &st, kind)) != 0)
                goto fail;
    }
    return 0;
fail:
    for (int kind = 0; kind < PAIR_KINDS; kind++)
        for (; st.done[kind] < st.posted[kind]; st.done[kind]++)
            p->discard(p->ctx, st.req[kind][st.done[kind] % PAIR_SLOTS]);
    return rc;
}

/* The tuner's algorithm for this allreduce. A count below the ranks takes
 * recursive doubling, as in the built-in choice: the other algorithms split
 * the vector into a block per rank. */
static int tuned(const struct algo_ctx *x, size_t bytes)
{
    int line = 0, algo = plx__tuner_pick(&x->t->tuner, x->size, bytes, &line);
    if (x->a->count < (size_t)x->size)
        algo = PLX__AR_RECDBL;
    if (plx__log_enabled(PLX_LOG_DEBUG, "tuner"))
        plx__log(PLX_LOG_DEBUG, "tuner", "allreduce of %zu B on %d ranks: %s (%s:%d)", bytes, x->size,
                 plx__tuner_algo_name(algo), x->t->tuner.source, line);
    return algo;
}

int plx__allreduce(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    size_t bytes = a->count * x->esize;
    if (a->count == 0)
        return 0;
    if (x->size == 1) {
        if (a->recv != a->send)
            plx__algo_copy(x, a->recv, a->send, bytes);
        return 0;
    }
    int algo = x->t->allreduce_algo;
    if (algo == PLX__AR_AUTO && x->t->tuner.n)
        algo = tuned(x, bytes);
    if (algo == PLX__AR_AUTO) {
        /* Rabenseifner where P is a power of two above 2 (at 2 it is the
         * ring); elsewhere its fold would move the whole buffer twice more. */
        int pow2 = (x->size & (x->size - 1)) == 0;
        algo = bytes <= x->t->small_bytes || a->count < (size_t)x->size ? PLX__AR_RECDBL
               : pow2 && x->size > 2                                   ? PLX__AR_RABENSEIFNER
                                                                       : PLX__AR_RING;
    }
    switch (algo) {
    case PLX__AR_RECDBL:
        return recursive_doubling(x);
    case PLX__AR_RABENSEIFNER:
        return rabenseifner(x);
    case PLX__AR_TREE: {
        int rc = plx__tree_reduce(x, a->send, a->recv, a->recv, 0);
        x->tag_base = 128;
        return rc ? rc : plx__tree_bcast(x, a->recv, 0);
    }
    default: {
        if (x->size == 2)
            return pair_allreduce(x);
        struct layout l = {a->count, 0};
        int rc = plx__ring_reduce_scatter(x, a->send, l, a->recv, NULL);
        return rc ? rc : plx__ring_allgather(x, a->recv, l, (uint32_t)x->size);
    }
    }
}
