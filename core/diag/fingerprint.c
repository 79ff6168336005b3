/* fingerprint.c - what every rank must agree on for one collective, and how
 * the core checks it.
 *
 * In-band (the generic algorithms: tcp, sim without native collectives, any
 * backend with point-to-point): the first message a rank sends each peer in
 * a collective goes to a tag of its own, plx__algo_tag(seq, FP_STEP), which
 * no algorithm step uses, and starts with a 56-byte header holding the
 * sender's fingerprint. The receiver posts its first receive from each peer
 * on that tag too, whatever its algorithm expects first, so two ranks that
 * run different algorithms (a broadcast against an allreduce, 8 elements
 * against 6) still meet on it, and the receiver names both calls instead of
 * mis-delivering data or calling the frame malformed. Where the backend
 * takes a head in front of a message (PLX_CAP_P2P_HEAD), the header is the
 * head of the first message, whatever its size: the payload goes from and
 * lands in the caller's buffer, and a mismatched sender's longer message
 * still delivers the header (the backend fails the receive after it). Else
 * up to FP_INLINE bytes of payload ride behind the header, copied through a
 * per-peer bounce buffer (no extra frame, so nothing extra at 8 bytes), and
 * a larger payload follows under its own tag with the header alone just
 * before it; that receive is posted with room for header + FP_INLINE, so a
 * mismatched sender's first message always fits. (The header alone costs a
 * stream transport a second write, and its receiver a second wake-up.)
 *
 * A rank that finds a mismatch publishes it in the store; ranks that wait on
 * it instead of talking to the mismatched rank find it there within a
 * fraction of a second (the slow-wait hook of p2p.c's waits), and fail
 * with the same message. A rank that only sends in the collective (a broadcast's root)
 * cannot learn of it before returning; its next operation fails with it.
 *
 * Native collectives (mpi, nccl, ucc): [core] fingerprint_native = every
 * allgathers the fingerprints through the backend before each operation,
 * so every rank fails alike; timeout (the default) compares what the ranks
 * published in the store when a wait fails (ledger.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callname.h"
#include "comm.h"
#include "diag.h"
#include "error.h"
#include "host.h"
#include "log.h"
#include "store.h"

#define FP_MAGIC 0x31465850u /* "PXF1" */
#define FP_STEP 0xffffffu
#define FP_INLINE 8192u
#define MISMATCH_KEY "diag/mismatch"

struct fp_wire {
    uint32_t magic, hash;
    uint64_t seq, count;
    int32_t coll, dtype, op, root;
    uint64_t payload;     /* bytes of the operation's first message */
    uint32_t inline_data; /* 1: they follow this header; 0: in their own message */
    uint32_t pad;
};

_Static_assert(sizeof(struct fp_wire) + FP_INLINE <= PLX_TIMING_SAMPLED_BYTES,
               "a timing-only backend must still deliver every fingerprint header");

/* One per peer and direction in the communicator's diag (a collective has
 * one first message each way with each peer): no allocation per message. */
struct plx__fp_io {
    int is_send, peer;
    int head;          /* the header rides as the message's head (PLX_CAP_P2P_HEAD) */
    void *hreq, *preq; /* the fingerprint's message, the separate payload (or NULL) */
    char *bounce;      /* the header, then (without head) the inline payload */
    void *buf;
    size_t bytes;
    unsigned char *req_mem; /* two backend requests of req_size bytes (ABI 1.5), or NULL */
};

/* An io, its bounce buffer and the backend's two requests, in one block. */
#define IO_BOUNCE_AT ((sizeof(struct plx__fp_io) + 63) & ~(size_t)63)
#define IO_REQS_AT (IO_BOUNCE_AT + ((sizeof(struct fp_wire) + FP_INLINE + 63) & ~(size_t)63))

static void to_wire(const struct plx__fp *f, struct fp_wire *w)
{
    *w = (struct fp_wire){.magic = FP_MAGIC, .hash = plx__fp_hash(f), .seq = f->seq, .count = f->count,
                          .coll = f->coll, .dtype = f->dtype, .op = f->op, .root = f->root};
}

static struct plx__fp from_wire(const struct fp_wire *w)
{
    return (struct plx__fp){.seq = w->seq, .count = w->count, .coll = w->coll, .dtype = w->dtype, .op = w->op,
                            .root = w->root};
}

/* ---- in-band ------------------------------------------------------------ */

void plx__fp_begin(struct plx_comm *c, const struct plx__fp *fp)
{
    struct plx__diag_state *d = plx__diag_of(c);
    if (!d || !d->inband)
        return;
    if (fp) {
        d->cur = *fp;
        d->ident = c->stands_for ? *c->stands_for : *fp;
    }
    d->cur_on = fp != NULL;
}

int plx__fp_wants(const struct plx_comm *c, int is_send, int peer, uint64_t tag)
{
    const struct plx__diag_state *d = plx__diag_of(c);
    if (!d || !d->cur_on || peer == c->rank || !(tag & PLX_TAG_CORE_BIT))
        return 0;
    uint64_t mine = plx__algo_tag(d->cur.seq, 0) >> 24;
    if (tag >> 24 != mine)
        return 0; /* not this collective's (a tag of its own seq) */
    return (is_send ? d->sent : d->rcvd)[peer] != d->cur.seq + 1;
}

/* The peer's io and bounce buffer for this direction, made on first use. */
static struct plx__fp_io *io_get(struct plx__diag_state *d, int is_send, int peer, size_t req_size)
{
    void **slot = (void **)&(is_send ? d->sbounce : d->rbounce)[peer];
    if (!*slot)
        *slot = calloc(1, IO_REQS_AT + 2 * req_size);
    struct plx__fp_io *io = *slot;
    if (io) {
        io->bounce = (char *)io + IO_BOUNCE_AT;
        io->req_mem = req_size ? (unsigned char *)io + IO_REQS_AT : NULL;
    }
    return io;
}

/* Whether the backend takes a head in front of a message (ABI 1.5). */
static int head_ok(const struct plx_comm *c)
{
    return c->be->abi_minor >= 5 && (c->caps.flags & PLX_CAP_P2P_HEAD);
}

int plx__fp_start(struct plx_comm *c, int is_send, int peer, void *buf, size_t bytes, uint64_t tag, plx__post_fn post,
                  plx__free_fn release, struct plx__fp_io **out)
{
    struct plx__diag_state *d = plx__diag_of(c);
    size_t rs = c->be->ops.req_size;
    struct plx__fp_io *io = io_get(d, is_send, peer, rs);
    if (!io)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    char *b = io->bounce;
    io->is_send = is_send;
    io->peer = peer;
    io->hreq = io->preq = NULL;
    io->buf = buf;
    io->bytes = bytes;
    uint64_t ftag = plx__algo_tag(d->cur.seq, FP_STEP);
    /* With a head, the payload stays in the caller's buffer: the header goes
     * in front of it on the wire, not in memory. */
    io->head = bytes && head_ok(c);
    int inl = io->head || bytes <= FP_INLINE, rc;
    void *m0 = io->req_mem, *m1 = io->req_mem ? io->req_mem + rs : NULL;
    const size_t W = sizeof(struct fp_wire);
    if (is_send) {
        struct fp_wire w;
        to_wire(&d->ident, &w);
        w.payload = bytes;
        w.inline_data = (uint32_t)inl;
        memcpy(b, &w, sizeof w);
        if (io->head)
            rc = post(c, 1, peer, b, W, buf, bytes, ftag, m0, &io->hreq);
        else {
            if (inl && bytes)
                memcpy(b + sizeof w, buf, bytes);
            rc = post(c, 1, peer, NULL, 0, b, W + (inl ? bytes : 0), ftag, m0, &io->hreq);
        }
        if (rc == 0 && !inl)
            rc = post(c, 1, peer, NULL, 0, buf, bytes, tag, m1, &io->preq);
        d->sent[peer] = d->cur.seq + 1;
    } else {
        memset(b, 0, W); /* no stale header from the last collective if the peer sends less */
        rc = io->head ? post(c, 0, peer, b, W, buf, bytes, ftag, m0, &io->hreq)
                      : post(c, 0, peer, NULL, 0, b, W + FP_INLINE, ftag, m0, &io->hreq);
        if (rc == 0 && !inl)
            rc = post(c, 0, peer, NULL, 0, buf, bytes, tag, m1, &io->preq);
        d->rcvd[peer] = d->cur.seq + 1;
    }
    if (rc != 0) {
        if (io->hreq)
            release(c, io->hreq);
        return rc;
    }
    *out = io;
    return 0;
}

/* The peer's header against ours. */
static int check(struct plx_comm *c, struct plx__fp_io *io)
{
    struct plx__diag_state *d = plx__diag_of(c);
    struct fp_wire w;
    memcpy(&w, io->bounce, sizeof w);
    if (w.magic != FP_MAGIC)
        return plx__err(PLX_ERR_PROTOCOL,
                        "rank %d's first message of seq %llu carries no fingerprint (is [core] fingerprint set "
                        "alike on every rank?)", io->peer, (unsigned long long)d->cur.seq);
    struct plx__fp theirs = from_wire(&w);
    if (!plx__fp_equal(&theirs, &d->ident)) {
        char msg[400];
        const int *pr = c->parent_rank;
        plx__fp_mismatch_msg(&d->ident, pr ? pr[c->rank] : c->rank, &theirs, pr ? pr[io->peer] : io->peer, msg,
                             sizeof msg);
        plx__diag_publish_mismatch(c, msg);
        return plx__err(PLX_ERR_MISMATCH, "%s", msg);
    }
    if (w.payload != io->bytes || (w.inline_data != 0) != (io->head || io->bytes <= FP_INLINE))
        return plx__err(PLX_ERR_PROTOCOL, "rank %d sent %llu bytes where %zu were expected in seq %llu", io->peer,
                        (unsigned long long)w.payload, io->bytes, (unsigned long long)d->cur.seq);
    if (w.inline_data && io->bytes && !io->head)
        memcpy(io->buf, io->bounce + sizeof w, io->bytes);
    return 0;
}

int plx__fp_wait(struct plx_comm *c, struct plx__fp_io *io, uint64_t deadline_ns, plx__wait_fn wait,
                 plx__free_fn release)
{
    int rc = wait(c, io->hreq, deadline_ns, io->peer);
    io->hreq = NULL;
    /* A longer message than a head receive holds (another collective's)
     * still left its header: name both calls rather than the sizes. */
    if (!io->is_send && (rc == 0 || (rc == PLX_ERR_INVALID_ARG && io->head))) {
        int crc = check(c, io);
        rc = crc ? crc : rc;
    }
    if (io->preq) {
        if (rc == 0)
            rc = wait(c, io->preq, deadline_ns, io->peer);
        else
            release(c, io->preq);
    }
    io->preq = NULL;
    return rc;
}

void plx__fp_discard(struct plx_comm *c, struct plx__fp_io *io, plx__free_fn release)
{
    if (io->hreq)
        release(c, io->hreq);
    if (io->preq)
        release(c, io->preq);
    io->hreq = io->preq = NULL;
}

/* ---- mismatches found elsewhere --------------------------------------- */

void plx__diag_publish_mismatch(struct plx_comm *c, const char *msg)
{
    if (!plx__diag_store_usable(c))
        return;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", plx_last_error());
    uint64_t t0 = plx__clock_ns();
    int rc = c->store->ops->check(c->store, MISMATCH_KEY);
    /* A set gets no reply (torch's store protocol): the check after it, on
     * the same connection, returns once the server has it, so a rank that
     * hears this one give up (which follows) finds it there. */
    if (rc == 0 && (rc = plx__store_set(c->store, MISMATCH_KEY, msg, strlen(msg) + 1)) == 0)
        rc = c->store->ops->check(c->store, MISMATCH_KEY);
    plx__diag_store_done(c, t0, rc < 0 ? rc : 0);
    plx__err(0, "%s", keep); /* the store's own errors are not the caller's */
}

/* 1 and the message in msg if a rank published a mismatch. */
int plx__diag_mismatch_published(struct plx_comm *c, char *msg, size_t len)
{
    if (!plx__diag_store_usable(c))
        return 0;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", plx_last_error());
    int found = 0;
    uint64_t t0 = plx__clock_ns();
    int rc = c->store->ops->check(c->store, MISMATCH_KEY);
    if (rc == 1) {
        void *v = NULL;
        size_t n = 0;
        if ((rc = plx__store_get(c->store, MISMATCH_KEY, &v, &n, 1000)) == 0 && v) {
            snprintf(msg, len, "%.*s", (int)n, (const char *)v);
            found = 1;
        }
        free(v);
    }
    plx__diag_store_done(c, t0, rc < 0 ? rc : 0);
    plx__err(0, "%s", keep);
    return found;
}

/* ---- native collectives ------------------------------------------------ */

int plx__fp_native_mode(const struct plx_comm *c)
{
    return c->diag ? plx__diag_of(c)->native_mode : PLX__FP_NATIVE_OFF;
}

int plx__fp_native_check(struct plx_comm *c, const struct plx__fp *fp)
{
    struct fp_wire mine, *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    to_wire(fp, &mine);
    struct plx_coll_args g = {.struct_size = sizeof g, .coll = PLX_COLL_ALLGATHER, .send = &mine, .recv = all,
                              .count = sizeof mine / 8, .dtype = PLX_U64, .root = 0, .seq = fp->seq,
                              .timeout_ms = c->timeout_ms, .mem_kind = PLX_MEM_HOST,
                              .flags = PLX_COLL_FLAG_BLOCKING};
    void *req = NULL;
    struct plx_work *w = NULL;
    int rc = c->be->ops.collective(c->bc, &g, &req);
    if (rc == 0 && (rc = plx__work_native(c, &g, 0, NULL, req, &w)) == 0) {
        rc = plx_work_wait(w, c->timeout_ms + 500);
        if (!w->done) { /* cancel: all is ours to free */
            c->be->ops.req_free(c->bc, w->req);
            w->req = NULL;
            w->done = 1;
        }
        plx_work_free(w);
    }
    if (rc != 0) {
        plx__err_prefix("%s: exchanging fingerprints ([core] fingerprint_native = every): ",
                        plx_coll_name(fp->coll));
        free(all);
        return rc;
    }
    for (int r = 1; r < c->size; r++) {
        struct plx__fp f0 = from_wire(&all[0]), fr = from_wire(&all[r]);
        if (all[r].hash != all[0].hash || !plx__fp_equal(&f0, &fr)) {
            char msg[400];
            plx__fp_mismatch_msg(&f0, 0, &fr, r, msg, sizeof msg);
            free(all);
            return plx__err(PLX_ERR_MISMATCH, "%s", msg);
        }
    }
    free(all);
    return 0;
}
