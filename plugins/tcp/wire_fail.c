/* wire_fail.c - failure and cancellation: a peer that left or was lost, the
 * lost-peer notices plexus peers exchange so every rank learns who broke the
 * communicator, and requests the core cancels or takes back. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "wire.h"

/* ---- notices from peers ------------------------------------------------ */

/* Plexus peer p said that rank lost broke its side of the communicator
 * (why: TCP_LOST_*): fail everything, naming that rank. */
void tcp__lost_notice(struct tcp_comm *c, struct tcp_peer *p, int lost, uint64_t why)
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
int tcp__salvage_notice(struct tcp_comm *c, struct tcp_peer *p, uint64_t *why)
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

/* ---- a peer that left -------------------------------------------------- */

static int has_pending(struct tcp_peer *p)
{
    if (!tcp__only_notices(p) || p->in_payload || p->hdr_got)
        return 1;
    for (int b = 0; b < TCP_SLOT_BUCKETS; b++)
        for (struct tcp_slot *s = p->slots[b]; s; s = s->next)
            if (s->posted || s->pending)
                return 1;
    return 0;
}

/* End of stream. A peer that closes with nothing outstanding between us has
 * just finished with this communicator (ranks leave at different times),
 * whatever notices to it are still queued (a RECV_READY for its eager
 * message, taken after it left); anything else is a lost connection that
 * fails the communicator. */
void tcp__peer_closed(struct tcp_comm *c, struct tcp_peer *p, const char *why)
{
    if (has_pending(p)) {
        tcp__drop_peer(c, p, why);
        return;
    }
    tcp__drop_notices(p);
    tcp__unwatch(c, p);
    p->closed = 1;
    snprintf(p->closed_why, sizeof p->closed_why, "%s", why);
}

int tcp__peer_gone(struct tcp_comm *c, struct tcp_peer *p, const struct tcp_req *r)
{
    if (!p->closed)
        return 0;
    struct tcp_slot *s = r->is_send ? NULL : tcp__slot_find(p, r->slot, 0);
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

/* ---- failure ----------------------------------------------------------- */

static void fail_req(struct tcp_comm *c, struct tcp_req *r, int status, const char *msg)
{
    if (!atomic_load(&r->done))
        tcp__complete(c, r, status, msg);
    tcp__unlink_req(r);
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
                tcp__unwatch(c, p);
                shutdown(p->fd, SHUT_RDWR);
            }
        }
    }
    for (struct tcp_req *r = c->any, *n; r; r = n) {
        n = r->next;
        fail_req(c, r, c->broken_status, c->lost_msg);
    }
    c->any = c->any_tail = NULL;
    tcp__wake(c);
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

/* ---- cancel ------------------------------------------------------------ */

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
        if (tcp__remove_req(&c->any, &c->any_tail, r))
            tcp__unlink_req(r);
        return;
    }
    struct tcp_peer *p = &c->peers[r->peer];
    if (!r->is_send) {
        if (p->dst_req == r) /* mid-payload: drain the rest into nothing */
            p->dst = NULL;
        return;              /* a posted one stays in line and is drained when its data comes */
    }
    struct tcp_slot *s = tcp__slot_find(p, r->slot, 0);
    if (s && tcp__remove_req(&s->pending, &s->pending_tail, r)) {
        tcp__unlink_req(r);
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
        tcp__unlink_req(r);
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
    struct tcp_slot *s = tcp__slot_find(p, r->slot, 0);
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
