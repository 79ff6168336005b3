/* alltoallv.c - vector alltoall and vector allgather by pairwise exchange
 * (every rank sends each peer its block directly), for per-rank counts in
 * the ABI 1.4 fields of plx_coll_args (collv.h).
 *
 * Ranks may disagree on the counts (rank i sends n to j, j expects m): the
 * receiver must say so, naming both ranks and the index, instead of
 * mis-delivering, truncating or waiting forever for a block its peer thinks
 * is empty. So every pair exchanges a first message of a fixed size, HEAD
 * bytes, whatever the counts (zero included): a header with the sender's
 * count, then the block's first INLINE bytes. The rest of a larger block
 * follows under its own tag, straight from the caller's buffer. Fixed, so
 * both ends post the same size (the in-band fingerprint, fingerprint.c,
 * wraps each pair's first message and insists on that); the cost is one
 * message of HEAD bytes per pair where a block is empty, and a copy of at
 * most INLINE bytes each way. */
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "reduce.h"

#define VX_MAGIC 0x56585031u /* "1PXV" */
enum { HEAD = 256 };

struct vx_hdr {
    uint64_t count; /* elements of the block, as the sender sees it */
    uint32_t magic;
    int32_t from;
};

#define INLINE (HEAD - sizeof(struct vx_hdr))

/* One exchange: what this rank sends peer j (sn[j] elements at sp[j]) and
 * receives from peer i (rn[i] elements at rp[i]). */
struct vx {
    const char *what;
    const char **sp;
    size_t *sn;
    char **rp;
    const size_t *rn;
};

static size_t head_part(size_t bytes)
{
    return bytes < INLINE ? bytes : INLINE;
}

/* The rest of a block whose sender's count disagrees with ours (beyond the
 * head): take what the sender sent off the wire so it finishes, without
 * writing past what the caller's buffer expects. posted: our receive for
 * the rest (expect bytes in all), or NULL. Errors here are not the
 * caller's: the disagreement is. */
static void disagree(struct algo_ctx *x, int from, const char *head, size_t expect, void *posted, uint64_t tag)
{
    struct vx_hdr hd;
    memcpy(&hd, head, sizeof hd);
    size_t es = x->esize, sent = hd.count <= SIZE_MAX / es ? hd.count * es : SIZE_MAX;
    char keep[512];
    snprintf(keep, sizeof keep, "%s", plx_last_error());
    if (posted && sent > INLINE && sent <= expect) { /* fits what we posted: a short receive */
        x->p->wait(x->p->ctx, posted, x->deadline);
    } else {
        if (posted)
            x->p->discard(x->p->ctx, posted);
        void *tmp = sent > INLINE && sent != SIZE_MAX ? malloc(sent - INLINE) : NULL, *req = NULL;
        if (tmp && x->p->irecv(x->p->ctx, from, tmp, sent - INLINE, tag, &req) == 0)
            x->p->wait(x->p->ctx, req, x->deadline);
        free(tmp);
    }
    plx__err(0, "%s", keep);
}

/* One exchange's requests: per peer a send and a receive head, and up to
 * two requests each way, in the order they are waited for. */
struct vx_round {
    char *heads;    /* [0, P): the heads received, [P, 2P): the heads sent */
    void **req;     /* [rhead, rdata, shead, sdata] per step */
    int *kind;      /* > 0: peer kind - 1's head; < 0: the rest of peer -kind - 1's block; 0: a send */
    char *bad;      /* bad[i]: peer i's count disagrees with ours */
    int n;
    uint64_t htag, dtag;
};

/* Receives first (in step order), then sends, so a slow pair does not hold
 * up the others. */
static int post_receives(struct algo_ctx *x, const struct vx *v, struct vx_round *w)
{
    const struct plx__p2p *p = x->p;
    int P = x->size, r = x->rank, rc = 0;
    for (int s = 1; s < P && rc == 0; s++) {
        int from = mod(r - s, P);
        size_t bytes = v->rn[from] * x->esize;
        if ((rc = p->irecv(p->ctx, from, w->heads + (size_t)from * HEAD, HEAD, w->htag, &w->req[w->n])) == 0)
            w->kind[w->n++] = from + 1;
        if (rc == 0 && bytes > INLINE &&
            (rc = p->irecv(p->ctx, from, v->rp[from] + INLINE, bytes - INLINE, w->dtag, &w->req[w->n])) == 0)
            w->kind[w->n++] = -(from + 1);
    }
    return rc;
}

static int post_sends(struct algo_ctx *x, const struct vx *v, struct vx_round *w)
{
    const struct plx__p2p *p = x->p;
    int P = x->size, r = x->rank, rc = 0;
    for (int s = 1; s < P && rc == 0; s++) {
        int to = mod(r + s, P);
        size_t bytes = v->sn[to] * x->esize;
        char *h = w->heads + ((size_t)P + (size_t)to) * HEAD;
        struct vx_hdr hd = {.count = v->sn[to], .magic = VX_MAGIC, .from = r};
        memcpy(h, &hd, sizeof hd);
        if (bytes) /* an empty block may have no buffer at all */
            memcpy(h + sizeof hd, v->sp[to], head_part(bytes));
        memset(h + sizeof hd + head_part(bytes), 0, INLINE - head_part(bytes));
        if ((rc = p->isend(p->ctx, to, h, HEAD, w->htag, &w->req[w->n])) == 0)
            w->kind[w->n++] = 0;
        if (rc == 0 && bytes > INLINE &&
            (rc = p->isend(p->ctx, to, v->sp[to] + INLINE, bytes - INLINE, w->dtag, &w->req[w->n])) == 0)
            w->kind[w->n++] = 0;
    }
    return rc;
}

/* Wait for every request (none if posting failed: rc). A disagreeing peer
 * does not stop the others: this rank still waits for every other request,
 * so its peers finish; only the disagreeing peer's data is handled apart
 * (disagree()). */
static int complete_round(struct algo_ctx *x, const struct vx *v, struct vx_round *w, int rc)
{
    const struct plx__p2p *p = x->p;
    int r = x->rank;
    size_t es = x->esize;
    char msg[400] = "";
    int done = 0;
    for (; rc == 0 && done < w->n; done++) {
        int k = w->kind[done], i = k > 0 ? k - 1 : k < 0 ? -k - 1 : -1;
        if (k < 0 && w->bad[i]) { /* the rest of a disagreeing peer's block */
            disagree(x, i, w->heads + (size_t)i * HEAD, v->rn[i] * es, w->req[done], w->dtag);
            continue;
        }
        if ((rc = p->wait(p->ctx, w->req[done], x->deadline)) != 0 || k <= 0)
            continue;
        struct vx_hdr hd;
        memcpy(&hd, w->heads + (size_t)i * HEAD, sizeof hd);
        if (hd.magic != VX_MAGIC || hd.from != i) {
            rc = plx__err(PLX_ERR_PROTOCOL, "%s: rank %d's first message to rank %d is not a block header", v->what, i,
                          r);
        } else if (hd.count != v->rn[i]) {
            if (!msg[0])
                snprintf(msg, sizeof msg,
                         "%s: rank %d sends %llu elements to rank %d, rank %d expects %zu from rank %d (index %d)",
                         v->what, i, (unsigned long long)hd.count, r, r, v->rn[i], i, i);
            w->bad[i] = 1;
            if (v->rn[i] * es <= INLINE) /* no receive posted for the rest: take it off the wire */
                disagree(x, i, w->heads + (size_t)i * HEAD, v->rn[i] * es, NULL, w->dtag);
        } else if (v->rn[i]) {
            memcpy(v->rp[i], w->heads + (size_t)i * HEAD + sizeof hd, head_part(v->rn[i] * es));
        }
    }
    for (; done < w->n; done++)
        p->discard(p->ctx, w->req[done]);
    /* The disagreement is the cause: a peer that learns this rank gave up
     * and breaks the connections makes the later waits fail, not the reason. */
    if (msg[0])
        rc = plx__err(PLX_ERR_MISMATCH, "%s", msg);
    return rc;
}

static int exchange(struct algo_ctx *x, const struct vx *v)
{
    int P = x->size;
    struct vx_round w = {.heads = malloc(2 * (size_t)P * HEAD),
                         .req = calloc(4 * (size_t)P, sizeof(void *)),
                         .kind = calloc(4 * (size_t)P, sizeof(int)),
                         .bad = calloc((size_t)P, 1),
                         .htag = step_tag(x, 0, 0),
                         .dtag = step_tag(x, 1, 0)};
    int rc = w.heads && w.req && w.kind && w.bad ? 0 : plx__err(PLX_ERR_NOMEM, "%s: out of memory", v->what);
    if (rc == 0) {
        rc = post_receives(x, v, &w);
        if (rc == 0)
            rc = post_sends(x, v, &w);
        rc = complete_round(x, v, &w, rc);
    }
    free(w.heads);
    free(w.req);
    free(w.kind);
    free(w.bad);
    return rc;
}

int plx__alltoallv(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    int P = x->size, r = x->rank, rc;
    size_t es = x->esize;
    const size_t *sc = a->send_counts, *sd = a->send_displs, *rc_ = a->recv_counts, *rd = a->recv_displs;
    const char *send = a->send;
    char *recv = a->recv;
    if (send == recv) { /* in place: keep the outgoing blocks safe first */
        size_t ext = 0;
        for (int i = 0; i < P; i++)
            if (sc[i] && sd[i] + sc[i] > ext)
                ext = sd[i] + sc[i];
        char *copy = ext ? plx__scratch_get(x->scratch, ext * es) : NULL;
        if (ext && !copy)
            return PLX_ERR_NOMEM;
        if (ext)
            plx__algo_copy(x, copy, send, ext * es);
        send = copy;
    }
    if (sc[r])
        plx__algo_copy(x, recv + rd[r] * es, send + sd[r] * es, sc[r] * es);
    if (P == 1)
        return 0;
    const char **sp = malloc((size_t)P * sizeof *sp);
    char **rp = malloc((size_t)P * sizeof *rp);
    if (!sp || !rp) {
        free(sp);
        free(rp);
        return plx__err(PLX_ERR_NOMEM, "alltoallv: out of memory");
    }
    for (int i = 0; i < P; i++) {
        sp[i] = send + sd[i] * es;
        rp[i] = recv + rd[i] * es;
    }
    struct vx v = {.what = "alltoallv", .sp = sp, .sn = (size_t *)sc, .rp = rp, .rn = rc_};
    rc = exchange(x, &v);
    free(sp);
    free(rp);
    return rc;
}

/* Every rank sends its own block (recv_counts[rank] elements) to every
 * peer and takes each peer's block straight into its place. */
int plx__allgatherv(struct algo_ctx *x)
{
    const struct plx_coll_args *a = x->a;
    int P = x->size, r = x->rank, rc;
    size_t es = x->esize;
    const size_t *rc_ = a->recv_counts, *rd = a->recv_displs;
    char *recv = a->recv;
    if (rc_[r] && (const char *)a->send != recv + rd[r] * es)
        plx__algo_copy(x, recv + rd[r] * es, a->send, rc_[r] * es);
    if (P == 1)
        return 0;
    const char **sp = malloc((size_t)P * sizeof *sp);
    char **rp = malloc((size_t)P * sizeof *rp);
    size_t *sn = malloc((size_t)P * sizeof *sn);
    if (!sp || !rp || !sn) {
        free(sp);
        free(rp);
        free(sn);
        return plx__err(PLX_ERR_NOMEM, "allgatherv: out of memory");
    }
    for (int i = 0; i < P; i++) {
        sp[i] = recv + rd[r] * es; /* our block, already in place */
        sn[i] = rc_[r];
        rp[i] = recv + rd[i] * es;
    }
    struct vx v = {.what = "allgatherv", .sp = sp, .sn = sn, .rp = rp, .rn = rc_};
    rc = exchange(x, &v);
    free(sp);
    free(rp);
    free(sn);
    return rc;
}
