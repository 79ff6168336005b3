/* ring.c - the frames of point-to-point on a pair's ring: writing what a
 * rank has queued for a peer, reading what a peer wrote, every frame
 * checked before use.
 *
 * A ring (struct shm_ring, shm.h) carries frames from one sender to one
 * receiver: a 64-byte struct frame, then its payload rounded up to 64
 * bytes. A frame never wraps; a sender that reaches the end writes a SKIP
 * frame over the rest. The sender owns head, the receiver tail; both count
 * bytes, so free space is ring_bytes - (head - tail).
 *
 *   DATA    (tag, total, seq, off, len) a fragment of message seq; a
 *           message's fragments follow each other in order, and messages
 *           follow each other in the order they were sent, so matching on
 *           the first fragment keeps MPI's non-overtaking order per
 *           (source, tag). Small messages are one fragment written at isend
 *           (eager); bigger ones are written as the receiver drains.
 *   RTS     (tag, total, seq, addr) single copy: the receiver reads total
 *           bytes at addr in the sender's process with process_vm_readv
 *           straight into its buffer, then answers ACK.
 *   ACK     (seq, status) in the other direction's ring: the sender's
 *           request for seq completes with status.
 *   CANCEL  (seq) the sender gave up message seq (its request was freed
 *           or timed out): a receiver drops what it has of it.
 *
 * Every frame is copied out of the ring and checked before use (type,
 * bounds against the ring and the bytes the sender published, sequence,
 * fragment offset, totals): a corrupt or malicious peer fails the ops with
 * PLX_ERR_PROTOCOL naming it; nothing it writes is used as an index or a
 * length past a check against this rank's own buffers. A remote address
 * only ever goes to process_vm_readv as the remote side. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p.h"


static void corrupt(struct shm_comm *c, int s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void corrupt(struct shm_comm *c, int s, const char *fmt, ...)
{
    char why[200], msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "rank %d's ring to rank %d on shm holds a corrupt frame (%s): protocol error", s, c->rank,
             why);
    c->host->log(c->host->ctx, PLX_LOG_WARN, "shm: comm '%s': %s", c->name, msg);
    shm__p2p_fail_all(c, PLX_ERR_PROTOCOL, msg);
    shm__fail(c, PLX_ERR_PROTOCOL, -1);
}

int shm__ring_ctl_push(struct shm_comm *c, int d, uint32_t type, uint64_t seq, int32_t status)
{
    struct outbound *o = &c->p2p->out[d];
    if (o->nctl == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        struct ctlmsg *n = realloc(o->ctl, cap * sizeof *n);
        if (!n) {
            shm__p2p_fail_all(c, PLX_ERR_NOMEM, "out of memory queueing a control frame");
            return PLX_ERR_NOMEM;
        }
        o->ctl = n;
        o->cap = cap;
    }
    o->ctl[o->nctl++] = (struct ctlmsg){.type = type, .status = status, .seq = seq};
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

/* Room in the ring to d for a frame with up to want payload bytes (at
 * least min(want, 4 KiB) of it, so big messages go in big pieces): the
 * frame's place, with *len the payload it may carry; NULL if the ring is
 * too full now. Writes a SKIP frame where the end of the ring is too short. */
static char *reserve(struct shm_comm *c, int d, uint64_t tail, size_t want, size_t *len)
{
    struct outbound *o = &c->p2p->out[d];
    size_t R = c->seg->ring_bytes, least = want < 4096 ? want : 4096;
    char *data = shm__ring_data(c, c->rank, d);
    for (;;) {
        size_t free = R - (size_t)(o->head - tail), pos = (size_t)(o->head % R), contig = R - pos;
        size_t room = free < contig ? free : contig;
        if (room >= FRAME + round64(least)) {
            size_t fit = room - FRAME;
            *len = want < fit ? want : fit;
            return data + pos;
        }
        if (contig >= free || contig == R)
            return NULL; /* the reader has to free more first */
        struct frame f = {.type = FR_SKIP, .len = contig - FRAME};
        memcpy(data + pos, &f, sizeof f);
        o->head += contig;
    }
}

static void put_frame(struct shm_comm *c, int d, char *at, struct frame *f, const void *payload)
{
    struct shm_p2p *p = c->p2p;
    size_t len = (size_t)f->len;
    if (len)
        plx_plugin_copy(at + FRAME, payload, len);
    if ((f->type == FR_DATA && f->off == 0) || f->type == FR_RTS) {
        p->msgs++;
        if (c->cfg.p2p_corrupt_rank == c->rank && p->msgs == c->cfg.p2p_corrupt_at) {
            /* Fault injection ([shm] p2p_corrupt_rank/p2p_corrupt_at): a
             * header whose length runs past the ring. */
            struct frame bad = *f;
            bad.len = (uint64_t)c->seg->ring_bytes * 16 + 64;
            memcpy(at, &bad, sizeof bad);
            c->p2p->out[d].head += FRAME + round64(len);
            return;
        }
    }
    memcpy(at, f, sizeof *f);
    c->p2p->out[d].head += FRAME + round64(len);
}

/* Write what is queued for d while the ring has room. */
void shm__ring_write_out(struct shm_comm *c, int d)
{
    struct shm_p2p *p = c->p2p;
    struct outbound *o = &p->out[d];
    if (p->broken || (!o->nctl && !o->sendq.head))
        return;
    struct shm_ring *rg = shm__ring(c, c->rank, d);
    uint64_t tail = __atomic_load_n(&rg->tail, __ATOMIC_ACQUIRE), head0 = o->head;
    if (o->head - tail > c->seg->ring_bytes || (tail & 63)) {
        corrupt(c, d, "its tail %llu of the ring from rank %d is not within the %llu bytes written",
                (unsigned long long)tail, c->rank, (unsigned long long)o->head);
        return;
    }
    size_t len, i = 0;
    char *at;
    for (; i < o->nctl && (at = reserve(c, d, tail, 0, &len)); i++) {
        struct frame f = {.type = o->ctl[i].type, .status = o->ctl[i].status, .seq = o->ctl[i].seq};
        put_frame(c, d, at, &f, NULL);
    }
    if (i && i < o->nctl) /* o->ctl is NULL until the first control frame queues */
        memmove(o->ctl, o->ctl + i, (o->nctl - i) * sizeof *o->ctl);
    o->nctl -= i;
    struct req *r;
    size_t max_frag = c->seg->ring_bytes / 4;
    while (!o->nctl && (r = o->sendq.head)) {
        if (r->rndv) {
            if (!(at = reserve(c, d, tail, 0, &len)))
                break;
            struct frame f = {.type = FR_RTS, .tag = r->tag, .seq = r->seq, .total = r->bytes,
                              .addr = (uint64_t)(uintptr_t)r->buf};
            put_frame(c, d, at, &f, NULL);
            lremove(&o->sendq, r);
            r->q = Q_RNDV;
            lpush(&p->rndv, r);
            continue;
        }
        size_t left = r->bytes - r->sent;
        if (!(at = reserve(c, d, tail, left < max_frag ? left : max_frag, &len)))
            break;
        struct frame f = {.type = FR_DATA, .tag = r->tag, .seq = r->seq, .total = r->bytes, .off = r->sent,
                          .len = len};
        put_frame(c, d, at, &f, r->buf + r->sent);
        r->sent += len;
        if (r->sent == r->bytes)
            shm__p2p_complete(c, r, 0, NULL);
    }
    if (o->head != head0) {
        __atomic_store_n(&rg->head, o->head, __ATOMIC_RELEASE);
        shm__bell_ring(c, d);
    }
}

/* ---- reading ------------------------------------------------------------ */

static void data_done(struct shm_comm *c, struct inbound *in)
{
    in->active = 0;
    if (in->req)
        shm__p2p_complete(c, in->req, 0, NULL);
    in->req = NULL;
    in->ux = NULL;
}

/* A data frame: the start or the next fragment of message in->seq, copied
 * to the posted receive or the unexpected message. */
static int on_data(struct shm_comm *c, int s, const struct frame *f, const char *at, size_t room, size_t *size)
{
    struct shm_p2p *p = c->p2p;
    struct inbound *in = &p->in[s];
    if (f->len > room - FRAME || FRAME + round64((size_t)f->len) > room || f->len > f->total ||
        f->off > f->total - f->len || f->total > SIZE_MAX / 2) {
        corrupt(c, s, "data frame: %llu bytes at offset %llu of %llu, with %zu bytes readable", (unsigned long long)f->len,
                (unsigned long long)f->off, (unsigned long long)f->total, room - FRAME);
        return -1;
    }
    if (f->off == 0) {
        if (in->active || f->seq != in->next_seq) {
            corrupt(c, s, "message %llu starts where message %llu was due%s", (unsigned long long)f->seq,
                    (unsigned long long)(in->active ? in->seq : in->next_seq), in->active ? " to go on" : "");
            return -1;
        }
        in->next_seq++;
        in->active = 1;
        in->seq = f->seq;
        in->tag = f->tag;
        in->total = f->total;
        in->got = 0;
        shm__p2p_arrive(c, s, f, 0);
        if (p->broken)
            return -1;
    } else if (!in->active || f->seq != in->seq || f->off != in->got || f->total != in->total || f->tag != in->tag) {
        corrupt(c, s, "fragment of message %llu at offset %llu (expected message %llu at %llu)",
                (unsigned long long)f->seq, (unsigned long long)f->off, (unsigned long long)in->seq,
                (unsigned long long)in->got);
        return -1;
    }
    size_t len = (size_t)f->len;
    if (len && in->req)
        plx_plugin_copy(in->req->buf + f->off, at + FRAME, len);
    else if (len && in->ux)
        plx_plugin_copy(in->ux->data + f->off, at + FRAME, len);
    in->got += len;
    if (in->ux)
        in->ux->got = in->got;
    if (in->got == in->total)
        data_done(c, in);
    *size = FRAME + round64(len);
    return 0;
}

/* A single-copy request: the receiver reads the sender's buffer itself. */
static int on_rts(struct shm_comm *c, int s, const struct frame *f)
{
    struct shm_p2p *p = c->p2p;
    struct inbound *in = &p->in[s];
    if (f->len || f->off || in->active || f->seq != in->next_seq || f->total > SIZE_MAX / 2) {
        corrupt(c, s, "single-copy request for message %llu (%llu bytes, payload %llu, offset %llu) where message "
                "%llu was due%s", (unsigned long long)f->seq, (unsigned long long)f->total,
                (unsigned long long)f->len, (unsigned long long)f->off, (unsigned long long)in->next_seq,
                in->active ? " to go on" : "");
        return -1;
    }
    in->next_seq++;
    shm__p2p_arrive(c, s, f, 1);
    return p->broken ? -1 : 0;
}

/* The receiver of a single-copy send is done with this rank's buffer. */
static int on_ack(struct shm_comm *c, int s, const struct frame *f)
{
    struct shm_p2p *p = c->p2p;
    if (f->len || f->seq >= p->out[s].next_seq) {
        corrupt(c, s, "acknowledgement of message %llu, which was never sent", (unsigned long long)f->seq);
        return -1;
    }
    struct req *r = p->rndv.head;
    while (r && !(r->peer == s && r->seq == f->seq))
        r = r->next;
    if (!r) /* cancelled here since */
        return 0;
    char w[120];
    int st = f->status == 0 || f->status == PLX_ERR_PEER_LOST || f->status == PLX_ERR_PROTOCOL ? f->status
                                                                                             : PLX_ERR_PROTOCOL;
    if (st)
        shm__p2p_complete(c, r, PLX_ERR_REMOTE, "%s: rank %d could not read this rank's buffer (single copy): %s",
                          shm__p2p_what(r, w, sizeof w), s, shm__status_name(st));
    else
        shm__p2p_complete(c, r, 0, NULL);
    return 0;
}

/* The sender gave up message f->seq: fail its receive, or forget it. */
static int on_cancel(struct shm_comm *c, int s, const struct frame *f)
{
    struct shm_p2p *p = c->p2p;
    struct inbound *in = &p->in[s];
    if (f->len || f->seq >= in->next_seq) {
        corrupt(c, s, "cancel of message %llu, which never came", (unsigned long long)f->seq);
        return -1;
    }
    if (!(in->active && in->seq == f->seq)) {
        for (struct unex *u = p->ux_head; u; u = u->next)
            if (u->src == s && u->seq == f->seq && u->rndv) {
                shm__p2p_unex_remove(p, u);
                free(u);
                break;
            }
        return 0;
    }
    if (in->req) {
        char w[120];
        shm__p2p_complete(c, in->req, PLX_ERR_REMOTE, "%s: rank %d gave up its send after %llu of %llu bytes",
                          shm__p2p_what(in->req, w, sizeof w), s, (unsigned long long)in->got,
                          (unsigned long long)in->total);
    }
    if (in->ux) {
        shm__p2p_unex_remove(p, in->ux);
        free(in->ux->data);
        free(in->ux);
    }
    in->active = 0;
    in->req = NULL;
    in->ux = NULL;
    return 0;
}

/* One frame from s at pos (copied to f): 0 and its size in *size, or -1
 * after corrupt(). */
static int on_frame(struct shm_comm *c, int s, const struct frame *f, const char *at, size_t avail, size_t contig,
                    size_t *size)
{
    *size = FRAME;
    switch (f->type) {
    case FR_SKIP:
        if (f->len != contig - FRAME || contig > avail) {
            corrupt(c, s, "a skip of %llu bytes where %zu remain to the end", (unsigned long long)f->len, contig);
            return -1;
        }
        *size = contig;
        return 0;
    case FR_DATA:
        return on_data(c, s, f, at, avail < contig ? avail : contig, size);
    case FR_RTS:
        return on_rts(c, s, f);
    case FR_ACK:
        return on_ack(c, s, f);
    case FR_CANCEL:
        return on_cancel(c, s, f);
    default:
        corrupt(c, s, "unknown frame type %#x", (unsigned)f->type);
        return -1;
    }
}

/* Take in every frame rank s has written to this rank. */
void shm__ring_drain(struct shm_comm *c, int s)
{
    struct shm_p2p *p = c->p2p;
    struct shm_ring *rg = shm__ring(c, s, c->rank);
    const char *data = shm__ring_data(c, s, c->rank);
    size_t R = c->seg->ring_bytes;
    uint64_t head = __atomic_load_n(&rg->head, __ATOMIC_ACQUIRE), tail = rg->tail, tail0 = tail;
    while (!p->broken && tail != head) {
        size_t avail = (size_t)(head - tail), pos = (size_t)(tail % R), contig = R - pos, size = 0;
        if (head - tail > R || (avail & 63)) {
            corrupt(c, s, "its head %llu is not within %zu bytes past the tail %llu", (unsigned long long)head, R,
                    (unsigned long long)tail);
            break;
        }
        struct frame f;
        memcpy(&f, data + pos, sizeof f); /* the peer may rewrite it: check and use this copy */
        if (on_frame(c, s, &f, data + pos, avail, contig, &size) != 0)
            break;
        tail += size;
        __atomic_store_n(&rg->tail, tail, __ATOMIC_RELEASE);
    }
    if (tail != tail0)
        shm__bell_ring(c, s);
}
