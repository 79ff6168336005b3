/* wire.c - what the send side, the receive side and failure share: request
 * completion, per-(peer, slot) state, and the I/O thread that drives both
 * directions of every connection.
 *
 * wire_send.c writes frames, wire_recv.c parses them, wire_fail.c breaks the
 * communicator; wire.h says what they share and why it runs under c->mu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "wire.h"

/* ---- requests ----------------------------------------------------------- */

void tcp__wake(struct tcp_comm *c)
{
    pthread_cond_broadcast(&c->cv);
    uint64_t one = 1;
    if (c->leader_sleeping && write(c->wake_fd, &one, sizeof one) < 0) {
        /* cannot overflow: the leader drains it on each wake-up */
    }
}

void tcp__complete(struct tcp_comm *c, struct tcp_req *r, int status, const char *msg)
{
    r->status = status;
    if (msg)
        snprintf(r->err, sizeof r->err, "%s", msg);
    atomic_store_explicit(&r->done, 1, memory_order_release);
    tcp__wake(c);
}

void tcp__unlink_req(struct tcp_req *r)
{
    if (--r->linked == 0 && r->freed)
        free(r);
}

/* Put n bytes at offset off of r's message where they belong: its head,
 * then its buffer; what lies past both is dropped (r->overflow). */
void tcp__req_fill(struct tcp_req *r, size_t off, const char *src, size_t n)
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
int tcp__req_take(struct tcp_comm *c, struct tcp_peer *p, struct tcp_req *r, const char *src, size_t len,
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
        tcp__req_fill(r, 0, src, len);
    return r->overflow ? PLX_ERR_INVALID_ARG : 0;
}

int tcp__nomem(struct tcp_comm *c, struct tcp_req *r)
{
    return c->host->error(c->host->ctx, PLX_ERR_NOMEM, "tcp: out of memory posting to rank %d", r->peer);
}

/* ---- slots -------------------------------------------------------------- */

static unsigned bucket(uint64_t slot)
{
    return (unsigned)((slot * UINT64_C(0x9e3779b97f4a7c15)) >> 58) % TCP_SLOT_BUCKETS;
}

struct tcp_slot *tcp__slot_find(struct tcp_peer *p, uint64_t slot, int create)
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

void tcp__slot_release(struct tcp_peer *p, struct tcp_slot *s)
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

struct tcp_req *tcp__pop_req(struct tcp_req **head, struct tcp_req **tail)
{
    struct tcp_req *r = *head;
    if (r && !(*head = r->next))
        *tail = NULL;
    return r;
}

int tcp__remove_req(struct tcp_req **head, struct tcp_req **tail, struct tcp_req *r)
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
            tcp__flush(c, &c->peers[i]);
}

void tcp__progress(struct tcp_comm *c, struct tcp_peer *p)
{
    if (p->fd < 0 || c->broken || p->closed)
        return;
    tcp__read(c, p);
    if (p->tx && !c->broken)
        tcp__flush(c, p);
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
                tcp__read(c, p);
            if ((ev[i].events & EPOLLOUT) && !c->broken)
                tcp__flush(c, p);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}
