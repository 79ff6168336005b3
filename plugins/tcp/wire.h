/* wire.h - what the parts of the Gloo pair protocol share (internal).
 *
 * wire.c: request completion, per-(peer, slot) state, the I/O thread;
 * wire_send.c: frames out; wire_recv.c: frames in; wire_fail.c: a lost peer,
 * lost-peer notices, cancellation. They call into each other (a failed write
 * breaks the communicator, a RECV_READY read releases a send), so one
 * header says what crosses between them.
 *
 * Everything here runs under c->mu. Callers' threads write directly when a
 * peer's queue is empty (no wake-up of the I/O thread on the fast path); what
 * the socket does not take is left to the I/O thread through EPOLLOUT. */
#ifndef PLEXUS_TCP_WIRE_H
#define PLEXUS_TCP_WIRE_H

#include "tcp.h"

/* Bytes of r's message on the wire: its head, then its buffer. */
static inline size_t msg_len(const struct tcp_req *r)
{
    return r->head_bytes + r->bytes;
}

/* Bytes of frame f on the wire: its preamble and its request's message. */
static inline size_t frame_len(const struct tcp_frame *f)
{
    return TCP_HDR_BYTES + (f->req ? msg_len(f->req) : 0);
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

/* wire.c: requests */
/* Wake every thread waiting on c: those on c->cv, and a leader asleep in poll. */
void tcp__wake(struct tcp_comm *c);
/* Finish r with status (msg: the error text, or NULL) and wake its waiters. */
void tcp__complete(struct tcp_comm *c, struct tcp_req *r, int status, const char *msg);
/* Drop one of r's links (lists, frames, input); frees r once the core let it go. */
void tcp__unlink_req(struct tcp_req *r);
void tcp__req_fill(struct tcp_req *r, size_t off, const char *src, size_t n);
int tcp__req_take(struct tcp_comm *c, struct tcp_peer *p, struct tcp_req *r, const char *src, size_t len,
                  char *msg, size_t n);
int tcp__nomem(struct tcp_comm *c, struct tcp_req *r); /* PLX_ERR_NOMEM, reported */

/* wire.c: slots and request lists */
/* p's state for slot, created when create is set; NULL if absent or out of memory. */
struct tcp_slot *tcp__slot_find(struct tcp_peer *p, uint64_t slot, int create);
void tcp__slot_release(struct tcp_peer *p, struct tcp_slot *s); /* frees s once nothing is left in it */
struct tcp_req *tcp__pop_req(struct tcp_req **head, struct tcp_req **tail);
int tcp__remove_req(struct tcp_req **head, struct tcp_req **tail, struct tcp_req *r); /* 1 if r was there */

/* wire_send.c */
/* Queue a frame to p (data: the send whose message follows, or NULL); -1 when out of memory. */
int tcp__enqueue(struct tcp_peer *p, uint64_t op, uint64_t slot, uint64_t len, struct tcp_req *data);
void tcp__flush(struct tcp_comm *c, struct tcp_peer *p);
/* p's queue holds notices only (no data of any request): a peer that has
 * sent all it owed this rank and left needs none of them, and
 * tcp__drop_notices drops them. */
int tcp__only_notices(const struct tcp_peer *p);
void tcp__drop_notices(struct tcp_peer *p);

/* wire_recv.c: read and act on what p's socket holds, within a budget. */
void tcp__read(struct tcp_comm *c, struct tcp_peer *p);

/* wire_fail.c */
void tcp__lost_notice(struct tcp_comm *c, struct tcp_peer *p, int lost, uint64_t why);
int tcp__salvage_notice(struct tcp_comm *c, struct tcp_peer *p, uint64_t *why);
void tcp__peer_closed(struct tcp_comm *c, struct tcp_peer *p, const char *why);

#endif
