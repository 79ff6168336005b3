/* wire.c - the Gloo pair protocol: frames out, frames in, per-slot matching,
 * and the communicator's I/O thread (epoll, non-blocking sockets).
 *
 * Everything here runs under c->mu. Callers' threads write directly when a
 * peer's queue is empty (no wake-up of the I/O thread on the fast path); what
 * the socket does not take is left to the I/O thread through EPOLLOUT. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp.h"

#define IOV_BATCH 64
#define READ_BUDGET (8u << 20) /* bytes per peer per wake-up, for fairness */

/* ---- requests ----------------------------------------------------------- */

static void complete(struct tcp_comm *c, struct tcp_req *r, int status, const char *msg)
{
    r->status = status;
    if (msg)
        snprintf(r->err, sizeof r->err, "%s", msg);
    atomic_store_explicit(&r->done, 1, memory_order_release);
    pthread_cond_broadcast(&c->cv);
    uint64_t one = 1;
    if (c->leader_sleeping && write(c->wake_fd, &one, sizeof one) < 0) {
        /* cannot overflow: the leader drains it on each wake-up */
    }
}

static void unlink_req(struct tcp_req *r)
{
    if (--r->linked == 0 && r->freed)
        free(r);
}

/* Bytes of r's message on the wire: its head, then its buffer. */
static size_t msg_len(const struct tcp_req *r)
{
    return r->head_bytes + r->bytes;
}

/* Put n bytes at offset off of r's message where they belong: its head,
 * then its buffer; what lies past both is dropped (r->overflow). */
static void req_fill(struct tcp_req *r, size_t off, const char *src, size_t n)
{
    if (off < r->head_bytes) {
        size_t k = r->head_bytes - off < n ? r->head_bytes - off : n;
        memcpy(r->head + off, src, k);
        src += k;
        off += k;
        n -= k;
    }
    off -= r->head_bytes;
    if (n && off < r->bytes)
        plx_plugin_copy(r->buf + off, src, r->bytes - off < n ? r->bytes - off : n);
}

/* A whole message of len bytes from src into receive r: 0, or an error for
 * one longer than r holds (a head receive keeps the part that fits). */
static int req_take(struct tcp_comm *c, struct tcp_peer *p, struct tcp_req *r, const char *src, size_t len,
                    char *msg, size_t n)
{
    (void)c;
    if (len > msg_len(r)) {
        snprintf(msg, n, "tcp: rank %d sent %zu bytes (slot %#llx) into a %zu-byte receive", p->rank, len,
                 (unsigned long long)r->slot, msg_len(r));
        if (!r->head_bytes)
            return PLX_ERR_INVALID_ARG;
        r->overflow = 1;
    }
    if (len && !r->freed)
        req_fill(r, 0, src, len);
    return r->overflow ? PLX_ERR_INVALID_ARG : 0;
}

/* ---- slots -------------------------------------------------------------- */

static unsigned bucket(uint64_t slot)
{
    return (unsigned)((slot * UINT64_C(0x9e3779b97f4a7c15)) >> 58) % TCP_SLOT_BUCKETS;
}

static struct tcp_slot *slot_get(struct tcp_peer *p, uint64_t slot, int create)
{
    struct tcp_slot **b = &p->slots[bucket(slot)];
    for (struct tcp_slot *s = *b; s; s = s->next)
        if (s->slot == slot)
            return s;
    if (!create)
        return NULL;
    struct tcp_slot *s = tcp__slot_get(p);
    if (!s)
        return NULL;
    s->slot = slot;
    s->next = *b;
    *b = s;
    return s;
}

static void slot_release(struct tcp_peer *p, struct tcp_slot *s)
{
    if (!s || s->posted || s->pending || s->early || s->recv_ready || s->remote_send || s->expect_send || s->owed ||
        s == p->dst_slot) /* an eager payload for it is still arriving */
        return;
    for (struct tcp_slot **q = &p->slots[bucket(s->slot)]; *q; q = &(*q)->next)
        if (*q == s) {
            *q = s->next;
            tcp__slot_put(p, s);
            return;
        }
}

#define LIST_PUSH(head, tail, x) \
    do {                         \
        (x)->next = NULL;        \
        if (tail)                \
            (tail)->next = (x);  \
        else                     \
            (head) = (x);        \
        (tail) = (x);            \
    } while (0)

static struct tcp_req *pop_req(struct tcp_req **head, struct tcp_req **tail)
{
    struct tcp_req *r = *head;
    if (r && !(*head = r->next))
        *tail = NULL;
    return r;
}

static int remove_req(struct tcp_req **head, struct tcp_req **tail, struct tcp_req *r)
{
    struct tcp_req *prev = NULL;
    for (struct tcp_req *q = *head; q; prev = q, q = q->next)
        if (q == r) {
            if (prev)
                prev->next = q->next;
            else
                *head = q->next;
            if (*tail == q)
                *tail = prev;
            return 1;
        }
    return 0;
}

/* ---- output ------------------------------------------------------------- */

static int enqueue(struct tcp_peer *p, uint64_t op, uint64_t slot, uint64_t len, struct tcp_req *data)
{
    struct tcp_frame *f = tcp__frame_get(p);
    if (!f)
        return -1;
    f->hdr[0] = htole64(TCP_HDR_BYTES + (data ? len : 0));
    f->hdr[1] = htole64(op);
    f->hdr[2] = htole64(slot);
    f->hdr[4] = htole64(len);
    if ((f->req = data))
        data->linked++;
    LIST_PUSH(p->tx, p->tx_tail, f);
    return 0;
}

void tcp__update_events(struct tcp_comm *c, struct tcp_peer *p)
{
    uint32_t want = (c->in_off ? 0u : (uint32_t)EPOLLIN) | (p->tx ? (uint32_t)EPOLLOUT : 0u);
    if (p->ev_mask == want || p->fd < 0 || p->closed)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = (uint64_t)p->rank};
    epoll_ctl(c->ep, EPOLL_CTL_MOD, p->fd, &ev);
    p->ev_mask = want;
}

static size_t frame_len(const struct tcp_frame *f)
{
    return TCP_HDR_BYTES + (f->req ? msg_len(f->req) : 0);
}

static void lost_notice(struct tcp_comm *c, struct tcp_peer *p, int lost, uint64_t why);
static int salvage_notice(struct tcp_comm *c, struct tcp_peer *p, uint64_t *why);

static void peer_closed(struct tcp_comm *c, struct tcp_peer *p, const char *why);

/* p's queue holds notices only (no data of any request): a peer that has
 * already sent all it owed this rank and left needs none of them. */
static int only_notices(const struct tcp_peer *p)
{
    for (const struct tcp_frame *f = p->tx; f; f = f->next)
        if (f->req)
            return 0;
    return 1;
}

/* Writing notices to p failed because p has left (an eager sender finishes
 * before its receivers' RECV_READY arrive): drop them and treat p as closed,
 * so only work that still needs p fails. */
static void left_early(struct tcp_comm *c, struct tcp_peer *p, const char *why)
{
    while (p->tx) {
        struct tcp_frame *f = p->tx;
        p->tx = f->next;
        tcp__frame_put(p, f);
    }
    p->tx_tail = NULL;
    peer_closed(c, p, why);
}

/* Write as much of p's queue as the socket takes, in one sendmsg per batch. */
static void flush(struct tcp_comm *c, struct tcp_peer *p)
{
    while (p->tx && p->fd >= 0) {
        struct iovec iov[IOV_BATCH];
        int n = 0;
        for (struct tcp_frame *f = p->tx; f && n + 3 <= IOV_BATCH; f = f->next) {
            size_t off = f->sent;
            if (off < TCP_HDR_BYTES)
                iov[n++] = (struct iovec){(char *)f->hdr + off, TCP_HDR_BYTES - off};
            const struct tcp_req *r = f->req;
            size_t po = off > TCP_HDR_BYTES ? off - TCP_HDR_BYTES : 0;
            if (r && po < r->head_bytes) { /* the head goes from where it is: no copy beside the payload */
                iov[n++] = (struct iovec){r->head + po, r->head_bytes - po};
                po = r->head_bytes;
            }
            if (r && po < msg_len(r)) {
                size_t bo = po - r->head_bytes;
                iov[n++] = (struct iovec){r->buf + bo, r->bytes - bo};
            }
        }
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t k = sendmsg(p->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            int e = errno, lost = -1;
            uint64_t why = 0;
            if (p->eager && !c->broken && (lost = salvage_notice(c, p, &why)) >= 0)
                lost_notice(c, p, lost, why);
            else if (only_notices(p))
                left_early(c, p, strerror(e));
            else
                tcp__drop_peer(c, p, strerror(e));
            return;
        }
        size_t left = (size_t)k;
        while (p->tx && left) {
            struct tcp_frame *f = p->tx;
            size_t rest = frame_len(f) - f->sent;
            size_t take = left < rest ? left : rest;
            f->sent += take;
            left -= take;
            if (f->sent < frame_len(f))
                break;
            if (!(p->tx = f->next))
                p->tx_tail = NULL;
            if (f->req) {
                complete(c, f->req, 0, NULL);
                unlink_req(f->req);
            }
            tcp__frame_put(p, f);
        }
        /* Zero-length data frames complete once their header went out. */
        while (p->tx && p->tx->sent == frame_len(p->tx)) {
            struct tcp_frame *f = p->tx;
            if (!(p->tx = f->next))
                p->tx_tail = NULL;
            if (f->req) {
                complete(c, f->req, 0, NULL);
                unlink_req(f->req);
            }
            tcp__frame_put(p, f);
        }
    }
    tcp__update_events(c, p);
}

/* ---- posting ------------------------------------------------------------ */

static int nomem(struct tcp_comm *c, struct tcp_req *r)
{
    return c->host->error(c->host->ctx, PLX_ERR_NOMEM, "tcp: out of memory posting to rank %d", r->peer);
}

int tcp__post_send(struct tcp_comm *c, struct tcp_req *r)
{
    struct tcp_peer *p = &c->peers[r->peer];
    struct tcp_slot *s = slot_get(p, r->slot, 1);
    if (!s || enqueue(p, OP_NOTIFY_SEND_READY, r->slot, msg_len(r), NULL))
        return nomem(c, r);
    int rc = 0;
    if (s->recv_ready) {
        s->recv_ready--;
        rc = enqueue(p, OP_SEND_UNBOUND, r->slot, msg_len(r), r);
    } else if (p->eager && r->bytes <= TCP_EAGER_MAX && r->head_bytes <= TCP_EAGER_HEAD_MAX && !s->pending) {
        s->owed++;
        rc = enqueue(p, OP_SEND_UNBOUND, r->slot, msg_len(r), r);
    } else {
        LIST_PUSH(s->pending, s->pending_tail, r);
        r->linked++;
    }
    flush(c, p);
    if (!c->broken) /* a failed write frees every slot */
        slot_release(p, s);
    return rc ? nomem(c, r) : 0;
}

/* Attach receive r to peer p (it announces itself with RECV_READY).
 * explicit_recv: a receive posted for p (or bound by tryRecv), which settles
 * the SEND_READY tallies the way gloo's Pair::recv does. */
static int bind_recv(struct tcp_comm *c, struct tcp_peer *p, struct tcp_req *r, int explicit_recv)
{
    struct tcp_slot *s = slot_get(p, r->slot, 1);
    /* A peer that has left can only have its eager message waiting here. */
    if (!s || (!p->closed && enqueue(p, OP_NOTIFY_RECV_READY, r->slot, msg_len(r), NULL)))
        return nomem(c, r);
    r->peer = p->rank;
    if (explicit_recv) {
        if (s->remote_send)
            s->remote_send--;
        else
            s->expect_send++;
    }
    struct tcp_early *e = s->early;
    if (e) { /* its eager payload is already here */
        if (!(s->early = e->next))
            s->early_tail = NULL;
        p->early_bytes -= e->len;
        char msg[200];
        int st = req_take(c, p, r, e->data, e->len, msg, sizeof msg);
        complete(c, r, st, st ? msg : NULL);
        tcp__early_put(p, e);
    } else {
        LIST_PUSH(s->posted, s->posted_tail, r);
        r->linked++;
    }
    /* Cork the RECV_READY when this thread will most likely lead next (input
     * is off and nobody leads): the send that usually follows, or lead()
     * itself, takes it out in the same sendmsg; the I/O thread's 2 ms tick
     * sends it if neither comes. */
    if (!(explicit_recv && c->in_off && !c->leader))
        flush(c, p);
    if (explicit_recv && !c->broken) /* (on_header releases the slot itself) */
        slot_release(p, s);
    return 0;
}

int tcp__post_recv(struct tcp_comm *c, struct tcp_req *r)
{
    if (r->peer >= 0)
        return bind_recv(c, &c->peers[r->peer], r, 1);
    /* From any: the first peer with an unmatched SEND_READY on this slot. */
    for (int i = 0; i < c->size; i++) {
        struct tcp_slot *s = i == c->rank ? NULL : slot_get(&c->peers[i], r->slot, 0);
        if (s && s->remote_send && (!c->peers[i].closed || s->early))
            return bind_recv(c, &c->peers[i], r, 1);
    }
    LIST_PUSH(c->any, c->any_tail, r);
    r->linked++;
    return 0;
}

/* ---- input -------------------------------------------------------------- */

static void reject(struct tcp_comm *c, struct tcp_peer *p, const char *fmt, unsigned long long a,
                   unsigned long long b)
{
    char why[160];
    snprintf(why, sizeof why, fmt, a, b);
    c->host->log(c->host->ctx, PLX_LOG_WARN, "tcp: rank %d: dropping the connection to rank %d (%s): %s",
                   c->rank, p->rank, p->addr, why);
    char msg[200];
    snprintf(msg, sizeof msg, "malformed frame (%s)", why);
    tcp__drop_peer(c, p, msg);
}

static void payload_done(struct tcp_comm *c, struct tcp_peer *p)
{
    if (p->dst_req) {
        struct tcp_req *r = p->dst_req;
        char msg[200];
        if (r->overflow)
            snprintf(msg, sizeof msg, "tcp: rank %d sent %zu bytes (slot %#llx) into a %zu-byte receive", p->rank,
                     p->pay_len, (unsigned long long)r->slot, msg_len(r));
        complete(c, r, r->overflow ? PLX_ERR_INVALID_ARG : 0, r->overflow ? msg : NULL);
        unlink_req(r);
    } else if (p->dst_early) {
        struct tcp_slot *s = p->dst_slot;
        struct tcp_early *e = p->dst_early;
        struct tcp_req *r = pop_req(&s->posted, &s->posted_tail);
        if (r) { /* its receive was posted while the payload was still arriving */
            p->early_bytes -= e->len;
            char msg[200];
            int st = req_take(c, p, r, e->data, e->len, msg, sizeof msg);
            complete(c, r, st, st ? msg : NULL);
            unlink_req(r);
            tcp__early_put(p, e);
            slot_release(p, s);
        } else {
            LIST_PUSH(s->early, s->early_tail, e);
        }
    }
    p->in_payload = 0;
    p->dst = NULL;
    p->dst_req = NULL;
    p->dst_early = NULL;
    p->dst_slot = NULL;
    p->hdr_got = 0;
}

/* Plexus peer p said that rank lost broke its side of the communicator
 * (why: TCP_LOST_*): fail everything, naming that rank. */
static void lost_notice(struct tcp_comm *c, struct tcp_peer *p, int lost, uint64_t why)
{
    char msg[160];
    if (why == TCP_LOST_ABORTED || why == TCP_LOST_REVOKED) {
        int aborted = why == TCP_LOST_ABORTED;
        int n = snprintf(msg, sizeof msg, "tcp: rank %d %s the communicator", lost, aborted ? "aborted" : "revoked");
        if (lost != p->rank && n > 0 && (size_t)n < sizeof msg)
            snprintf(msg + n, sizeof msg - (size_t)n, " (heard from rank %d)", p->rank);
        if (!c->broken)
            *(aborted ? &c->aborted_by : &c->revoked_by) = lost;
        tcp__fail_all(c, aborted ? PLX_ERR_ABORTED : PLX_ERR_REVOKED, msg);
        return;
    }
    if (why == TCP_LOST_GAVE_UP) {
        int n = snprintf(msg, sizeof msg, "tcp: rank %d gave up on a collective in progress (it timed out waiting, or "
                         "found an error) before this rank completed it", lost);
        if (lost != p->rank && n > 0 && (size_t)n < sizeof msg)
            snprintf(msg + n, sizeof msg - (size_t)n, " (heard from rank %d)", p->rank);
        if (!c->broken)
            c->gave_up_by = lost;
        tcp__fail_all(c, PLX_ERR_TIMEOUT, msg);
        return;
    }
    if (why == TCP_LOST_RENDEZVOUS)
        snprintf(msg, sizeof msg, "tcp: rank %d could not set up this communicator: it waited for rank %d in vain",
                 p->rank, lost);
    else
        snprintf(msg, sizeof msg, "tcp: rank %d reports that its connection to rank %d was lost", p->rank, lost);
    if (!c->broken)
        c->lost_rank = lost;
    tcp__fail_all(c, PLX_ERR_PEER_LOST, msg);
}

/* Writing to plexus peer p failed: it has reset the connection, maybe
 * after a lost-peer notice that is still unread. Read what remains (no
 * waiting; nothing is delivered) and return the rank a notice names, or -1. */
static int salvage_notice(struct tcp_comm *c, struct tcp_peer *p, uint64_t *why)
{
    unsigned char hdr[TCP_HDR_BYTES], buf[4096];
    size_t got = p->in_payload ? 0 : p->hdr_got, avail = p->rx_len - p->rx_pos, budget = 64u << 20;
    uint64_t skip = p->in_payload ? p->pay_len - p->pay_got : 0;
    const unsigned char *in = p->rxbuf + p->rx_pos;
    memcpy(hdr, p->hdr, got);
    for (;;) {
        if (!avail) {
            ssize_t k = budget ? recv(p->fd, buf, sizeof buf, MSG_DONTWAIT) : -1;
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return -1;
            in = buf;
            avail = (size_t)k;
            budget -= (size_t)k < budget ? (size_t)k : budget;
        }
        if (skip) {
            size_t n = skip < avail ? (size_t)skip : avail;
            skip -= n;
            in += n;
            avail -= n;
            continue;
        }
        size_t n = TCP_HDR_BYTES - got < avail ? TCP_HDR_BYTES - got : avail;
        memcpy(hdr + got, in, n);
        got += n;
        in += n;
        avail -= n;
        if (got < TCP_HDR_BYTES)
            continue;
        got = 0;
        uint64_t h[6];
        memcpy(h, hdr, sizeof h);
        for (int i = 0; i < 6; i++)
            h[i] = le64toh(h[i]);
        if (h[1] == OP_PLX_LOST && h[0] == TCP_HDR_BYTES && h[2] < (uint64_t)c->size) {
            *why = h[3];
            return (int)h[2];
        }
        if (h[0] < TCP_HDR_BYTES || (h[1] != OP_SEND_UNBOUND && h[0] != TCP_HDR_BYTES))
            return -1; /* not a stream this side can follow */
        skip = h[0] - TCP_HDR_BYTES;
    }
}

/* Peer p will send on slot (gloo's SEND_READY): a receive from it that
 * expected the notice counts it off; else an any-source receive on the
 * slot binds to p (gloo's findRecvFromAny); else the send is remembered. */
static void on_send_ready(struct tcp_comm *c, struct tcp_peer *p, struct tcp_slot *s, uint64_t slot)
{
    if (s->expect_send) {
        s->expect_send--;
        return;
    }
    struct tcp_req *r = c->any;
    while (r && r->slot != slot)
        r = r->next;
    if (!r) {
        s->remote_send++;
        return;
    }
    remove_req(&c->any, &c->any_tail, r);
    r->linked--;
    if (bind_recv(c, p, r, 0))
        complete(c, r, PLX_ERR_NOMEM, "tcp: out of memory");
}

/* Peer p posted a receive on slot (RECV_READY): it answers a receive
 * announced earlier, or a send waiting for it leaves now, or it is
 * remembered for the next send. */
static void on_recv_ready(struct tcp_comm *c, struct tcp_peer *p, struct tcp_slot *s, uint64_t slot)
{
    if (s->owed) {
        s->owed--;
    } else if (s->pending) {
        struct tcp_req *r = pop_req(&s->pending, &s->pending_tail);
        if (enqueue(p, OP_SEND_UNBOUND, slot, msg_len(r), r))
            complete(c, r, PLX_ERR_NOMEM, "tcp: out of memory");
        unlink_req(r); /* the frame holds it now */
        flush(c, p);
    } else {
        s->recv_ready++;
    }
}

static int on_notify(struct tcp_comm *c, struct tcp_peer *p, uint64_t op, uint64_t nbytes, uint64_t slot)
{
    struct tcp_slot *s;
    if (nbytes != TCP_HDR_BYTES) {
        reject(c, p, "notification with nbytes %llu (opcode %llu)", (unsigned long long)nbytes,
               (unsigned long long)op);
        return -1;
    }
    if (!(s = slot_get(p, slot, 1))) {
        tcp__drop_peer(c, p, "out of memory");
        return -1;
    }
    if (op == OP_NOTIFY_SEND_READY)
        on_send_ready(c, p, s, slot);
    else
        on_recv_ready(c, p, s, slot);
    if (c->broken) /* a write above failed and freed the slots */
        return -1;
    slot_release(p, s);
    return 0;
}

/* A payload of len bytes for the receive posted first on slot s. One that
 * does not fit fails that receive and drops p, unless the receive has a
 * head: then it takes the part that fits and fails after it. Returns 0, or
 * -1 after dropping p. */
static int into_posted(struct tcp_comm *c, struct tcp_peer *p, struct tcp_slot *s, uint64_t slot, uint64_t len)
{
    struct tcp_req *r = pop_req(&s->posted, &s->posted_tail);
    r->overflow = len > msg_len(r) && r->head_bytes;
    if (len > msg_len(r) && !r->head_bytes) {
        size_t want = r->bytes; /* r may be gone after unlink_req */
        char msg[200];
        snprintf(msg, sizeof msg, "tcp: rank %d sent %llu bytes into a %zu-byte receive (slot %#llx)", p->rank,
                 (unsigned long long)len, want, (unsigned long long)slot);
        complete(c, r, PLX_ERR_INVALID_ARG, msg);
        unlink_req(r); /* frees r if its owner already let it go */
        reject(c, p, "%llu bytes for a %llu-byte receive", (unsigned long long)len, (unsigned long long)want);
        return -1;
    }
    p->dst_req = r;
    p->dst = r->freed ? NULL : r->head_bytes ? r->head : r->buf; /* with a head: req_fill scatters */
    slot_release(p, s);
    return 0;
}

/* A payload nobody has asked for yet, from a plexus peer: kept in an early
 * record until a receive is posted, within [tcp] max_early_bytes. Returns
 * 0, or -1 after dropping p. */
static int into_early(struct tcp_comm *c, struct tcp_peer *p, uint64_t slot, uint64_t len)
{
    struct tcp_slot *s;
    if (p->early_bytes + len > c->max_early_bytes) {
        /* A peer that keeps sending what nobody receives would make this
         * rank buffer without end. */
        char why[200];
        snprintf(why, sizeof why, "it sent %zu bytes that no posted receive took ([tcp] max_early_bytes %zu)",
                 p->early_bytes + (size_t)len, c->max_early_bytes);
        tcp__drop_peer(c, p, why); /* logs it with the peer's address */
        return -1;
    }
    struct tcp_early *e = tcp__early_get(p, (size_t)len);
    if (!e || !(s = slot_get(p, slot, 1))) {
        tcp__early_put(p, e);
        tcp__drop_peer(c, p, "out of memory");
        return -1;
    }
    e->len = len;
    p->early_bytes += len;
    c->early_payloads++;
    c->early_payload_bytes += len;
    p->dst_early = e;
    p->dst_slot = s;
    p->dst = e->data;
    return 0;
}

/* A SEND_UNBOUND header: pick where its payload goes, then read it. */
static int on_send(struct tcp_comm *c, struct tcp_peer *p, uint64_t nbytes, uint64_t slot, uint64_t len)
{
    if (nbytes < TCP_HDR_BYTES || nbytes - TCP_HDR_BYTES != len) {
        reject(c, p, "nbytes %llu does not match length %llu", (unsigned long long)nbytes, (unsigned long long)len);
        return -1;
    }
    struct tcp_slot *s = slot_get(p, slot, 0);
    int rc;
    if (s && s->posted) {
        rc = into_posted(c, p, s, slot, len);
    } else if (p->eager && len <= TCP_EAGER_MAX + TCP_EAGER_HEAD_MAX) {
        rc = into_early(c, p, slot, len);
    } else {
        reject(c, p, "%llu bytes for slot %#llx, where no receive was posted", (unsigned long long)len,
               (unsigned long long)slot);
        rc = -1;
    }
    if (rc)
        return -1;
    p->in_payload = 1;
    p->pay_len = len;
    p->pay_got = 0;
    p->bulk = len >= TCP_BULK_BYTES;
    if (len == 0)
        payload_done(c, p);
    return 0;
}

/* A whole preamble is in p->hdr. Returns 0, or -1 after dropping p. */
static int on_header(struct tcp_comm *c, struct tcp_peer *p)
{
    uint64_t h[6];
    memcpy(h, p->hdr, sizeof h);
    for (int i = 0; i < 6; i++)
        h[i] = le64toh(h[i]);
    uint64_t nbytes = h[0], op = h[1], slot = h[2], len = h[4];
    p->hdr_got = 0;
    switch (op) {
    case OP_NOTIFY_SEND_READY:
    case OP_NOTIFY_RECV_READY:
        return on_notify(c, p, op, nbytes, slot);
    case OP_SEND_UNBOUND:
        return on_send(c, p, nbytes, slot, len);
    case OP_PLX_LOST:
        if (!p->eager || nbytes != TCP_HDR_BYTES || slot >= (uint64_t)c->size) {
            reject(c, p, "bad lost-peer notice (nbytes %llu, rank %llu)", (unsigned long long)nbytes,
                   (unsigned long long)slot);
            return -1;
        }
        lost_notice(c, p, (int)slot, h[3]);
        return -1;
    case OP_SEND_BUFFER:
        reject(c, p, "opcode %llu (bound-buffer SEND_BUFFER, slot %#llx) is not supported", (unsigned long long)op,
               (unsigned long long)slot);
        return -1;
    default:
        reject(c, p, "bad opcode %llu (nbytes %llu)", (unsigned long long)op, (unsigned long long)nbytes);
        return -1;
    }
}

static int has_pending(struct tcp_peer *p)
{
    if (p->tx || p->in_payload || p->hdr_got)
        return 1;
    for (int b = 0; b < TCP_SLOT_BUCKETS; b++)
        for (struct tcp_slot *s = p->slots[b]; s; s = s->next)
            if (s->posted || s->pending)
                return 1;
    return 0;
}

/* End of stream. A peer that closes with nothing outstanding between us has
 * just finished with this communicator (ranks leave at different times);
 * anything else is a lost connection that fails the communicator. */
static void peer_closed(struct tcp_comm *c, struct tcp_peer *p, const char *why)
{
    if (has_pending(p)) {
        tcp__drop_peer(c, p, why);
        return;
    }
    epoll_ctl(c->ep, EPOLL_CTL_DEL, p->fd, NULL);
    p->closed = 1;
    snprintf(p->closed_why, sizeof p->closed_why, "%s", why);
}

int tcp__peer_gone(struct tcp_comm *c, struct tcp_peer *p, const struct tcp_req *r)
{
    if (!p->closed)
        return 0;
    struct tcp_slot *s = r->is_send ? NULL : slot_get(p, r->slot, 0);
    if (s && s->early)
        return 0; /* its message arrived before it left */
    /* Work for a rank that has left can never finish: the communicator is
     * broken, and the other ranks hear which rank was lost. */
    char msg[240];
    snprintf(msg, sizeof msg, "tcp: connection to rank %d (%s) lost: %s", p->rank, p->addr, p->closed_why);
    if (!c->broken)
        c->lost_rank = p->rank;
    tcp__fail_all(c, PLX_ERR_PEER_LOST, msg);
    return c->host->error(c->host->ctx, PLX_ERR_PEER_LOST, "%s", c->lost_msg);
}

/* Where the payload's next bytes can be read to straight, and how many fit
 * there (*room), or NULL: into an early buffer or a plain receive, at
 * p->dst; into a receive with a head, once the head is in, at its buffer,
 * up to its end (what overflows it goes through the stage, dropped). */
static char *straight_dst(const struct tcp_peer *p, size_t *room)
{
    const struct tcp_req *r = p->dst_req;
    if (!p->dst)
        return NULL;
    if (!(r && r->head_bytes)) {
        *room = p->pay_len - p->pay_got;
        return p->dst + p->pay_got;
    }
    if (p->pay_got < r->head_bytes || p->pay_got >= msg_len(r))
        return NULL;
    size_t left = p->pay_len - p->pay_got, fits = msg_len(r) - p->pay_got;
    *room = left < fits ? left : fits;
    return r->buf + (p->pay_got - r->head_bytes);
}

static void do_read(struct tcp_comm *c, struct tcp_peer *p)
{
    size_t budget = READ_BUDGET;
    int drained = 0; /* a short read emptied the socket: no need to ask again */
    while (p->fd >= 0 && !p->closed) {
        if (p->rx_pos < p->rx_len) { /* staged bytes first */
            size_t avail = p->rx_len - p->rx_pos;
            if (p->in_payload) {
                size_t n = p->pay_len - p->pay_got;
                n = n < avail ? n : avail;
                if (p->dst && n && p->dst_req && p->dst_req->head_bytes)
                    req_fill(p->dst_req, p->pay_got, (const char *)p->rxbuf + p->rx_pos, n);
                else if (p->dst && n)
                    plx_plugin_copy(p->dst + p->pay_got, p->rxbuf + p->rx_pos, n);
                p->pay_got += n;
                p->rx_pos += n;
                if (p->pay_got == p->pay_len)
                    payload_done(c, p);
            } else {
                size_t n = TCP_HDR_BYTES - p->hdr_got;
                n = n < avail ? n : avail;
                memcpy(p->hdr + p->hdr_got, p->rxbuf + p->rx_pos, n);
                p->hdr_got += n;
                p->rx_pos += n;
                if (p->hdr_got == TCP_HDR_BYTES && on_header(c, p))
                    return;
            }
            continue;
        }
        if (!budget || drained)
            return;
        ssize_t k;
        size_t room = 0;
        char *to = p->in_payload ? straight_dst(p, &room) : NULL;
        if (to && room >= 4096) {
            /* straight into the user's buffer */
            size_t want = room < budget ? room : budget;
            k = recv(p->fd, to, want, MSG_DONTWAIT);
            if (k > 0) {
                drained = (size_t)k < want;
                p->pay_got += (size_t)k;
                budget -= (size_t)k < budget ? (size_t)k : budget;
                if (p->pay_got == p->pay_len)
                    payload_done(c, p);
                continue;
            }
        } else {
            /* Between bulk payloads, read little past the next header: what
             * the stage takes of a payload costs a second copy. A large
             * payload behind a head: only the head, the rest goes straight. */
            size_t want = p->bulk ? TCP_RX_BULK_STAGE : TCP_RXBUF;
            const struct tcp_req *r = p->in_payload ? p->dst_req : NULL;
            if (r && p->pay_got < r->head_bytes && p->pay_len >= r->head_bytes + TCP_BULK_BYTES)
                want = r->head_bytes - p->pay_got;
            k = recv(p->fd, p->rxbuf, want, MSG_DONTWAIT);
            if (k > 0) {
                drained = (size_t)k < want;
                p->rx_pos = 0;
                p->rx_len = (size_t)k;
                budget -= (size_t)k < budget ? (size_t)k : budget;
                continue;
            }
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        peer_closed(c, p, k == 0 ? "Connection closed by peer" : strerror(errno));
        return;
    }
}

void tcp__set_input(struct tcp_comm *c, int on)
{
    c->in_off = !on;
    for (int i = 0; i < c->size; i++)
        if (i != c->rank)
            tcp__update_events(c, &c->peers[i]);
}

void tcp__flush_all(struct tcp_comm *c)
{
    for (int i = 0; i < c->size && !c->broken; i++)
        if (i != c->rank && c->peers[i].tx)
            flush(c, &c->peers[i]);
}

void tcp__progress(struct tcp_comm *c, struct tcp_peer *p)
{
    if (p->fd < 0 || c->broken || p->closed)
        return;
    do_read(c, p);
    if (p->tx && !c->broken)
        flush(c, p);
}

/* ---- failure ------------------------------------------------------------ */

static void fail_req(struct tcp_comm *c, struct tcp_req *r, int status, const char *msg)
{
    if (!atomic_load(&r->done))
        complete(c, r, status, msg);
    unlink_req(r);
}

static void clear_peer(struct tcp_comm *c, struct tcp_peer *p, int status, const char *msg)
{
    for (int b = 0; b < TCP_SLOT_BUCKETS; b++) {
        for (struct tcp_slot *s = p->slots[b], *sn; s; s = sn) {
            sn = s->next;
            for (struct tcp_req *r = s->posted, *n; r; r = n) {
                n = r->next;
                fail_req(c, r, status, msg);
            }
            for (struct tcp_req *r = s->pending, *n; r; r = n) {
                n = r->next;
                fail_req(c, r, status, msg);
            }
            for (struct tcp_early *e = s->early, *n; e; e = n) {
                n = e->next;
                free(e->data);
                free(e);
            }
            free(s);
        }
        p->slots[b] = NULL;
    }
    for (struct tcp_frame *f = p->tx, *n; f; f = n) {
        n = f->next;
        if (f->req)
            fail_req(c, f->req, status, msg);
        free(f);
    }
    p->tx = p->tx_tail = NULL;
    if (p->dst_req)
        fail_req(c, p->dst_req, status, msg);
    if (p->dst_early) {
        free(p->dst_early->data);
        free(p->dst_early);
    }
    p->dst_req = NULL;
    p->dst_early = NULL;
    p->early_bytes = 0;
    p->dst = NULL;
    p->in_payload = 0;
}

/* Write all of buf to p's socket, waiting for room until deadline_ns. */
static int write_until(struct tcp_peer *p, const void *buf, size_t n, uint64_t deadline_ns)
{
    const char *b = buf;
    while (n) {
        ssize_t k = send(p->fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            b += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        uint64_t now = plx_plugin_now_ns();
        if (now >= deadline_ns)
            return -1;
        struct pollfd pf = {p->fd, POLLOUT, 0};
        if (poll(&pf, 1, (int)((deadline_ns - now) / 1000000u) + 1) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

void tcp__notice_frame(uint64_t h[6], int lost_rank, int why)
{
    uint64_t f[6] = {htole64(TCP_HDR_BYTES), htole64(OP_PLX_LOST), htole64((uint64_t)lost_rank),
                     htole64((uint64_t)why), 0, 0};
    memcpy(h, f, sizeof f);
}

/* Tell plexus peer p which rank was lost (or that this one aborted: lost is
 * this rank, why TCP_LOST_ABORTED). A frame half on the wire is
 * finished first (its buffer is still the caller's: its request has not
 * completed), so the notice starts at a frame boundary; every wait ends at
 * deadline_ns, and a peer that does not take the bytes by then only sees
 * the shutdown that follows. */
static void notify_lost(struct tcp_peer *p, int lost, int why, uint64_t deadline_ns)
{
    if (lost < 0 || p->rank == lost || !p->eager || p->fd < 0 || p->closed)
        return;
    struct tcp_frame *f = p->tx;
    if (f && f->sent && f->sent < frame_len(f)) {
        if (f->sent < TCP_HDR_BYTES &&
            write_until(p, (char *)f->hdr + f->sent, TCP_HDR_BYTES - f->sent, deadline_ns))
            return;
        size_t po = f->sent > TCP_HDR_BYTES ? f->sent - TCP_HDR_BYTES : 0;
        if (f->req && write_until(p, f->req->buf + po, f->req->bytes - po, deadline_ns))
            return;
        f->sent = frame_len(f);
    }
    uint64_t h[6];
    tcp__notice_frame(h, lost, why);
    write_until(p, h, sizeof h, deadline_ns);
}

int tcp__hung_up(int fd)
{
    struct pollfd pf = {fd, POLLRDHUP, 0};
    return fd >= 0 && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Peers whose end has closed when this communicator breaks: the shutdowns
 * below hide that from later reads, and a rank that died at about the same
 * time as the one that broke it may be the real cause (comm_losses says so). */
static void note_closed_peers(struct tcp_comm *c)
{
    for (int i = 0; i < c->size; i++) {
        struct tcp_peer *p = &c->peers[i];
        if (i != c->rank && i != c->lost_rank && !p->closed && tcp__hung_up(p->fd)) {
            p->closed = 1;
            snprintf(p->closed_why, sizeof p->closed_why, "seen when this communicator broke");
        }
    }
}

void tcp__fail_all(struct tcp_comm *c, int status, const char *msg)
{
    int first = !c->broken;
    if (first && status == PLX_ERR_PEER_LOST)
        note_closed_peers(c);
    if (!c->broken) {
        c->broken = 1;
        c->broken_status = status;
        snprintf(c->lost_msg, sizeof c->lost_msg, "%s", msg);
        /* A rank that died first may reach this one only through a third
         * that failed because of it and then left: name every peer already
         * gone, not just the connection that broke first. */
        for (int i = 0; status == PLX_ERR_PEER_LOST && i < c->size; i++) {
            const struct tcp_peer *p = &c->peers[i];
            size_t at = strlen(c->lost_msg);
            if (i != c->rank && i != c->lost_rank && p->closed && at + 1 < sizeof c->lost_msg)
                snprintf(c->lost_msg + at, sizeof c->lost_msg - at, "; rank %d (%s) had closed its connection too",
                         i, p->addr);
        }
    }
    uint64_t notice_by = c->host->clock_ns() + TCP_NOTICE_NS;
    /* A local plx_comm_abort tells every peer (c->aborted: not an abort
     * this rank only heard of). */
    int aborting = status == PLX_ERR_ABORTED && c->aborted;
    int revoking = status == PLX_ERR_REVOKED && c->revoked_by >= 0;
    /* A peer's abandoned collective is passed on: the connections closed
     * below would otherwise reach a third rank first, as a lost peer. */
    int passing_on = status == PLX_ERR_TIMEOUT && c->gave_up_by >= 0;
    /* So is a peer's abort, for the same reason. */
    int passing_abort = status == PLX_ERR_ABORTED && !c->aborted && c->aborted_by >= 0;
    int lost = c->lost_rank, why = TCP_LOST_CONNECTION;
    if (revoking)
        lost = c->revoked_by, why = TCP_LOST_REVOKED;
    else if (aborting)
        lost = c->rank, why = TCP_LOST_ABORTED;
    else if (passing_abort)
        lost = c->aborted_by, why = TCP_LOST_ABORTED;
    else if (passing_on)
        lost = c->gave_up_by, why = TCP_LOST_GAVE_UP;
    int tell = status == PLX_ERR_PEER_LOST || aborting || revoking || passing_abort || passing_on;
    for (int i = 0; first && tell && i < c->size; i++)
        if (i != c->rank)
            notify_lost(&c->peers[i], lost, why, notice_by);
    /* The streams may be mid-frame now: close every connection so the other
     * ranks learn about the failure at once instead of at their timeout. */
    for (int i = 0; i < c->size; i++) {
        struct tcp_peer *p = &c->peers[i];
        if (i != c->rank) {
            clear_peer(c, p, c->broken_status, c->lost_msg);
            if (p->fd >= 0) {
                epoll_ctl(c->ep, EPOLL_CTL_DEL, p->fd, NULL);
                shutdown(p->fd, SHUT_RDWR);
            }
        }
    }
    for (struct tcp_req *r = c->any, *n; r; r = n) {
        n = r->next;
        fail_req(c, r, c->broken_status, c->lost_msg);
    }
    c->any = c->any_tail = NULL;
    pthread_cond_broadcast(&c->cv);
    uint64_t one = 1;
    if (c->leader_sleeping && write(c->wake_fd, &one, sizeof one) < 0) {
        /* cannot overflow: the leader drains it on each wake-up */
    }
}

void tcp__drop_peer(struct tcp_comm *c, struct tcp_peer *p, const char *why)
{
    char msg[240];
    snprintf(msg, sizeof msg, "tcp: connection to rank %d (%s) lost: %s", p->rank, p->addr, why);
    if (!c->broken && !c->stop)
        c->host->log(c->host->ctx, PLX_LOG_WARN, "rank %d: %s", c->rank, msg);
    if (!c->broken)
        c->lost_rank = p->rank;
    tcp__fail_all(c, PLX_ERR_PEER_LOST, msg);
}

/* r is pending and the core releases it: stop touching its buffer. */
void tcp__cancel(struct tcp_comm *c, struct tcp_req *r)
{
    r->freed = 1;
    if (r->linked == 0) {
        free(r);
        return;
    }
    /* A pending step of the core's collective is released only when the
     * core gives up on the collective: tell every peer, so a rank that comes
     * late does not complete it with this rank's data already in its socket. */
    if (!c->broken && !c->gave_up && (r->slot & PLX_TAG_CORE_BIT)) {
        c->gave_up = 1;
        uint64_t notice_by = c->host->clock_ns() + TCP_NOTICE_NS;
        for (int i = 0; i < c->size; i++)
            if (i != c->rank)
                notify_lost(&c->peers[i], c->rank, TCP_LOST_GAVE_UP, notice_by);
    }
    if (r->peer < 0) { /* unbound receive from any */
        if (remove_req(&c->any, &c->any_tail, r))
            unlink_req(r);
        return;
    }
    struct tcp_peer *p = &c->peers[r->peer];
    if (!r->is_send) {
        if (p->dst_req == r) /* mid-payload: drain the rest into nothing */
            p->dst = NULL;
        return;              /* a posted one stays in line and is drained when its data comes */
    }
    struct tcp_slot *s = slot_get(p, r->slot, 0);
    if (s && remove_req(&s->pending, &s->pending_tail, r)) {
        unlink_req(r);
        return;
    }
    struct tcp_frame *prev = NULL;
    for (struct tcp_frame *f = p->tx; f; prev = f, f = f->next) {
        if (f->req != r)
            continue;
        if (f->sent) { /* half on the wire: the stream cannot be resumed */
            /* The core gave up on it (a timeout, an abort): nobody was lost,
             * so no notice names p. */
            char msg[160];
            snprintf(msg, sizeof msg, "tcp: a send to rank %d (%s) was cancelled in the middle of its transfer",
                     p->rank, p->addr);
            tcp__fail_all(c, PLX_ERR_PEER_LOST, msg);
            return;
        }
        if (prev)
            prev->next = f->next;
        else
            p->tx = f->next;
        if (p->tx_tail == f)
            p->tx_tail = prev;
        free(f);
        unlink_req(r);
        return;
    }
}

/* In list head..tail, put t where r is. */
static void swap_req(struct tcp_req **head, struct tcp_req **tail, const struct tcp_req *r, struct tcp_req *t)
{
    for (struct tcp_req **q = head; *q; q = &(*q)->next)
        if (*q == r) {
            *q = t;
            break;
        }
    if (*tail == r)
        *tail = t;
}

struct tcp_req *tcp__detach(struct tcp_comm *c, struct tcp_req *r)
{
    struct tcp_req *t = tcp__req_get(c);
    if (!t) {
        tcp__fail_all(c, PLX_ERR_NOMEM, "tcp: out of memory cancelling a request");
        return NULL;
    }
    memcpy(t, r, sizeof *t); /* the core no longer reads r: nothing races on done */
    t->core_mem = 0;
    if (r->peer < 0) {
        swap_req(&c->any, &c->any_tail, r, t);
        return t;
    }
    struct tcp_peer *p = &c->peers[r->peer];
    struct tcp_slot *s = slot_get(p, r->slot, 0);
    if (s) {
        swap_req(&s->posted, &s->posted_tail, r, t);
        swap_req(&s->pending, &s->pending_tail, r, t);
    }
    for (struct tcp_frame *f = p->tx; f; f = f->next)
        if (f->req == r)
            f->req = t;
    if (p->dst_req == r)
        p->dst_req = t;
    return t;
}

void tcp__free_state(struct tcp_comm *c)
{
    for (int i = 0; i < c->size; i++)
        if (i != c->rank)
            clear_peer(c, &c->peers[i], PLX_ERR_ABORTED, "tcp: communicator destroyed");
    for (struct tcp_req *r = c->any, *n; r; r = n) {
        n = r->next;
        fail_req(c, r, PLX_ERR_ABORTED, "tcp: communicator destroyed");
    }
    c->any = NULL;
    tcp__pools_free(c);
}

/* ---- the I/O thread ----------------------------------------------------- */

void *tcp__io_main(void *arg)
{
    struct tcp_comm *c = arg;
    struct epoll_event ev[32];
    pthread_setname_np(pthread_self(), "plx-tcp-io"); /* for top -H, gdb, perf */
    plx__slice_shorten(c->wait_slice_ns); /* plexus's own thread: for its whole life */
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        /* While input is off, look every 2 ms whether the leaders are gone. */
        int tmo = c->in_off ? 2 : -1;
        pthread_mutex_unlock(&c->mu);
        int n = epoll_wait(c->ep, ev, 32, tmo);
        pthread_mutex_lock(&c->mu);
        if (c->in_off && !c->leader && c->host->clock_ns() - c->last_lead_ns >= TCP_LEAD_IDLE_NS)
            tcp__set_input(c, 1);
        if (n == 0 && !c->stop)
            tcp__flush_all(c); /* corked notifications nobody took out */
        for (int i = 0; i < n && !c->stop; i++) {
            if (ev[i].data.u64 == UINT64_MAX) {
                uint64_t v;
                if (read(c->evfd, &v, sizeof v) < 0) {
                    /* nothing to do: it only wakes us */
                }
                continue;
            }
            struct tcp_peer *p = &c->peers[ev[i].data.u64];
            if (p->fd < 0 || c->broken || p->closed)
                continue;
            if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                do_read(c, p);
            if ((ev[i].events & EPOLLOUT) && !c->broken)
                flush(c, p);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}
