/* wire_send.c - the output side of the Gloo pair protocol: frames queued per
 * peer, written with one sendmsg per batch, and sends posted against the
 * peer's RECV_READY tallies (or eagerly, between plexus peers). */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>

#include "wire.h"

#define IOV_BATCH 64

/* ---- output ------------------------------------------------------------- */

int tcp__enqueue(struct tcp_peer *p, uint64_t op, uint64_t slot, uint64_t len, struct tcp_req *data)
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
    if (p->fd < 0 || p->closed)
        return;
    uint32_t out = p->tx ? (uint32_t)EPOLLOUT : 0u, want = (c->in_off ? 0u : (uint32_t)EPOLLIN) | out;
    if (p->ev_mask != want) {
        struct epoll_event ev = {.events = want, .data.u64 = (uint64_t)p->rank};
        epoll_ctl(c->ep, EPOLL_CTL_MOD, p->fd, &ev);
        p->ev_mask = want;
    }
    want = EPOLLIN | out;
    if (p->lead_mask && p->lead_mask != want) { /* 0: not watched yet, or no longer */
        struct epoll_event ev = {.events = want, .data.u64 = (uint64_t)p->rank};
        epoll_ctl(c->lead_ep, EPOLL_CTL_MOD, p->fd, &ev);
        p->lead_mask = want;
    }
}

void tcp__unwatch(struct tcp_comm *c, struct tcp_peer *p)
{
    if (p->fd < 0)
        return;
    epoll_ctl(c->ep, EPOLL_CTL_DEL, p->fd, NULL);
    if (p->lead_mask)
        epoll_ctl(c->lead_ep, EPOLL_CTL_DEL, p->fd, NULL);
    p->lead_mask = 0;
}

int tcp__only_notices(const struct tcp_peer *p)
{
    for (const struct tcp_frame *f = p->tx; f; f = f->next)
        if (f->req)
            return 0;
    return 1;
}

void tcp__drop_notices(struct tcp_peer *p)
{
    while (p->tx) {
        struct tcp_frame *f = p->tx;
        p->tx = f->next;
        tcp__frame_put(p, f);
    }
    p->tx_tail = NULL;
}

/* The frame at the head of p's queue is all on the wire: its send, if it
 * carries one, is complete. */
static void pop_sent(struct tcp_comm *c, struct tcp_peer *p)
{
    struct tcp_frame *f = p->tx;
    if (!(p->tx = f->next))
        p->tx_tail = NULL;
    if (f->req) {
        tcp__complete(c, f->req, 0, NULL);
        tcp__unlink_req(f->req);
    }
    tcp__frame_put(p, f);
}

/* Write as much of p's queue as the socket takes, in one sendmsg per batch. */
void tcp__flush(struct tcp_comm *c, struct tcp_peer *p)
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
            if (tcp__only_notices(p)) {
                /* p left first: an eager sender finishes before its
                 * RECV_READYs (corked ones go later still). They are moot;
                 * what p sent before it left is still to be read (a
                 * lost-peer notice too), and that read finds where its
                 * stream ends. */
                tcp__drop_notices(p);
                break;
            }
            if (p->eager && !c->broken && (lost = tcp__salvage_notice(c, p, &why)) >= 0)
                tcp__lost_notice(c, p, lost, why);
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
            pop_sent(c, p);
        }
        /* Zero-length data frames complete once their header went out. */
        while (p->tx && p->tx->sent == frame_len(p->tx))
            pop_sent(c, p);
    }
    tcp__update_events(c, p);
}

/* ---- posting ------------------------------------------------------------ */

int tcp__post_send(struct tcp_comm *c, struct tcp_req *r)
{
    struct tcp_peer *p = &c->peers[r->peer];
    struct tcp_slot *s = tcp__slot_find(p, r->slot, 1);
    if (!s || tcp__enqueue(p, OP_NOTIFY_SEND_READY, r->slot, msg_len(r), NULL))
        return tcp__nomem(c, r);
    int rc = 0;
    if (s->recv_ready) {
        s->recv_ready--;
        rc = tcp__enqueue(p, OP_SEND_UNBOUND, r->slot, msg_len(r), r);
    } else if (p->eager && r->bytes <= TCP_EAGER_MAX && r->head_bytes <= TCP_EAGER_HEAD_MAX && !s->pending) {
        s->owed++;
        rc = tcp__enqueue(p, OP_SEND_UNBOUND, r->slot, msg_len(r), r);
    } else {
        LIST_PUSH(s->pending, s->pending_tail, r);
        r->linked++;
    }
    tcp__flush(c, p);
    if (!c->broken) /* a failed write frees every slot */
        tcp__slot_release(p, s);
    return rc ? tcp__nomem(c, r) : 0;
}
