/* wire_recv.c - the input side of the Gloo pair protocol: receives posted and
 * bound to a peer, and the per-peer state machine that reads a 48-byte
 * preamble, acts on its opcode, and reads a payload straight into the
 * receive it belongs to (or into an early buffer until one is posted). */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "wire.h"

#define READ_BUDGET (8u << 20) /* bytes per peer per wake-up, for fairness */

/* ---- posting ----------------------------------------------------------- */

/* Attach receive r to peer p (it announces itself with RECV_READY).
 * explicit_recv: a receive posted for p (or bound by tryRecv), which settles
 * the SEND_READY tallies the way gloo's Pair::recv does. */
static int bind_recv(struct tcp_comm *c, struct tcp_peer *p, struct tcp_req *r, int explicit_recv)
{
    struct tcp_slot *s = tcp__slot_find(p, r->slot, 1);
    /* A peer that has left can only have its eager message waiting here. */
    if (!s || (!p->closed && tcp__enqueue(p, OP_NOTIFY_RECV_READY, r->slot, msg_len(r), NULL)))
        return tcp__nomem(c, r);
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
        int st = tcp__req_take(c, p, r, e->data, e->len, msg, sizeof msg);
        tcp__complete(c, r, st, st ? msg : NULL);
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
        tcp__flush(c, p);
    if (explicit_recv && !c->broken) /* (on_header releases the slot itself) */
        tcp__slot_release(p, s);
    return 0;
}

int tcp__post_recv(struct tcp_comm *c, struct tcp_req *r)
{
    if (r->peer >= 0)
        return bind_recv(c, &c->peers[r->peer], r, 1);
    /* From any: the first peer with an unmatched SEND_READY on this slot. */
    for (int i = 0; i < c->size; i++) {
        struct tcp_slot *s = i == c->rank ? NULL : tcp__slot_find(&c->peers[i], r->slot, 0);
        if (s && s->remote_send && (!c->peers[i].closed || s->early))
            return bind_recv(c, &c->peers[i], r, 1);
    }
    LIST_PUSH(c->any, c->any_tail, r);
    r->linked++;
    return 0;
}

/* ---- input ------------------------------------------------------------- */

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
        tcp__complete(c, r, r->overflow ? PLX_ERR_INVALID_ARG : 0, r->overflow ? msg : NULL);
        tcp__unlink_req(r);
    } else if (p->dst_early) {
        struct tcp_slot *s = p->dst_slot;
        struct tcp_early *e = p->dst_early;
        struct tcp_req *r = tcp__pop_req(&s->posted, &s->posted_tail);
        if (r) { /* its receive was posted while the payload was still arriving */
            p->early_bytes -= e->len;
            char msg[200];
            int st = tcp__req_take(c, p, r, e->data, e->len, msg, sizeof msg);
            tcp__complete(c, r, st, st ? msg : NULL);
            tcp__unlink_req(r);
            tcp__early_put(p, e);
            tcp__slot_release(p, s);
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
    tcp__remove_req(&c->any, &c->any_tail, r);
    r->linked--;
    if (bind_recv(c, p, r, 0))
        tcp__complete(c, r, PLX_ERR_NOMEM, "tcp: out of memory");
}

/* Peer p posted a receive on slot (RECV_READY): it answers a receive
 * announced earlier, or a send waiting for it leaves now, or it is
 * remembered for the next send. */
static void on_recv_ready(struct tcp_comm *c, struct tcp_peer *p, struct tcp_slot *s, uint64_t slot)
{
    if (s->owed) {
        s->owed--;
    } else if (s->pending) {
        struct tcp_req *r = tcp__pop_req(&s->pending, &s->pending_tail);
        if (tcp__enqueue(p, OP_SEND_UNBOUND, slot, msg_len(r), r))
            tcp__complete(c, r, PLX_ERR_NOMEM, "tcp: out of memory");
        tcp__unlink_req(r); /* the frame holds it now */
        tcp__flush(c, p);
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
    if (!(s = tcp__slot_find(p, slot, 1))) {
        tcp__drop_peer(c, p, "out of memory");
        return -1;
    }
    if (op == OP_NOTIFY_SEND_READY)
        on_send_ready(c, p, s, slot);
    else
        on_recv_ready(c, p, s, slot);
    if (c->broken) /* a write above failed and freed the slots */
        return -1;
    tcp__slot_release(p, s);
    return 0;
}

/* A payload of len bytes for the receive posted first on slot s. One that
 * does not fit fails that receive and drops p, unless the receive has a
 * head: then it takes the part that fits and fails after it. Returns 0, or
 * -1 after dropping p. */
static int into_posted(struct tcp_comm *c, struct tcp_peer *p, struct tcp_slot *s, uint64_t slot, uint64_t len)
{
    struct tcp_req *r = tcp__pop_req(&s->posted, &s->posted_tail);
    r->overflow = len > msg_len(r) && r->head_bytes;
    if (len > msg_len(r) && !r->head_bytes) {
        size_t want = r->bytes; /* r may be gone after tcp__unlink_req */
        char msg[200];
        snprintf(msg, sizeof msg, "tcp: rank %d sent %llu bytes into a %zu-byte receive (slot %#llx)", p->rank,
                 (unsigned long long)len, want, (unsigned long long)slot);
        tcp__complete(c, r, PLX_ERR_INVALID_ARG, msg);
        tcp__unlink_req(r); /* frees r if its owner already let it go */
        reject(c, p, "%llu bytes for a %llu-byte receive", (unsigned long long)len, (unsigned long long)want);
        return -1;
    }
    p->dst_req = r;
    p->dst = r->freed ? NULL : r->head_bytes ? r->head : r->buf; /* with a head: tcp__req_fill scatters */
    tcp__slot_release(p, s);
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
    if (!e || !(s = tcp__slot_find(p, slot, 1))) {
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
    struct tcp_slot *s = tcp__slot_find(p, slot, 0);
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
        tcp__lost_notice(c, p, (int)slot, h[3]);
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

void tcp__read(struct tcp_comm *c, struct tcp_peer *p)
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
                    tcp__req_fill(p->dst_req, p->pay_got, (const char *)p->rxbuf + p->rx_pos, n);
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
        tcp__peer_closed(c, p, k == 0 ? "Connection closed by peer" : strerror(errno));
        return;
    }
}
