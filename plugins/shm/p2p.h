/* p2p.h - internal to shm's point-to-point: the requests, queues and ring
 * state that p2p.c (requests, matching, waiting) and ring.c (the frames on
 * each pair's ring) share. Everything here is used under shm_p2p.mu.
 *
 * Stability: internal. */
#ifndef PLEXUS_SHM_P2P_H
#define PLEXUS_SHM_P2P_H

#include <pthread.h>
#include <stddef.h>

#include "shm.h"

enum { FR_SKIP = 0x50494b53, FR_DATA = 0x41544144, FR_RTS = 0x30535452, FR_ACK = 0x304b4341, FR_CANCEL = 0x434e4143 };
#define FRAME 64u

struct frame {
    uint32_t type;
    int32_t status; /* ACK: 0 or the receiver's PLX_ERR_* */
    uint64_t tag, seq, total, off, len, addr, pad;
};
_Static_assert(sizeof(struct frame) == FRAME, "a frame header is one cache line");

enum { Q_NONE, Q_SEND, Q_RNDV, Q_POSTED, Q_ACTIVE };

/* A transfer's request, built in the memory the core passes to isend and
 * irecv (req_size, ABI 1.5): one record per transfer, the core's. The
 * lists below hold only pending requests (completing one takes it off),
 * so once req_free has completed it, the plugin keeps no pointer to it. */
struct req {
    int is_send, peer; /* peer: PLX_ANY_SOURCE for a receive from any */
    int from;          /* a receive's source once matched */
    int q, done, status, rndv;
    uint64_t tag, seq;
    char *buf;
    size_t bytes, sent;
    uint64_t posted, deadline; /* host clock; deadline 0: none */
    int64_t timeout_ms;
    struct req *prev, *next;   /* its queue (q) */
    struct req *aprev, *anext; /* every pending request */
    char err[300];
};

struct list {
    struct req *head, *tail;
};

/* A message that came before its receive. */
struct unex {
    int src, rndv;
    uint64_t tag, seq, total, got, addr;
    char *data;
    struct unex *next;
};

struct ctlmsg {
    uint32_t type;
    int32_t status;
    uint64_t seq;
};

struct inbound { /* the ring from one source to this rank */
    uint64_t next_seq;
    int active;            /* a DATA message is half read */
    uint64_t seq, tag, total, got;
    struct req *req;       /* where its bytes go; both NULL: dropped */
    struct unex *ux;
};

struct outbound { /* the ring from this rank to one destination */
    uint64_t next_seq, head;
    struct list sendq;     /* sends not yet (fully) written, in order */
    struct ctlmsg *ctl;    /* ACK / CANCEL to write before more data */
    size_t nctl, cap;
};

struct shm_p2p {
    pthread_mutex_t mu;
    struct inbound *in;
    struct outbound *out;
    struct list posted, rndv;
    struct req *all;       /* pending requests (aprev/anext) */
    struct unex *ux_head, *ux_tail;
    uint64_t msgs;         /* messages sent (fault injection counts them) */
    uint64_t next_sweep;
    int *bad;              /* per sweep: what is wrong with each peer */
    int broken;            /* sticky status once the rings cannot be trusted */
    char broken_msg[300];
};

/* The backend's req_size: whole max_align_t units, so that a request the
 * core places right after another is aligned too. */
#define SHM_P2P_REQ_BYTES ((sizeof(struct req) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1))

static inline size_t round64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static inline void lpush(struct list *l, struct req *r)
{
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
}

static inline void lremove(struct list *l, struct req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
    r->prev = r->next = NULL;
}

/* p2p.c */
/* Complete r (once) with status and a message (printf format; NULL: none),
 * taking it off its queue and the pending list. */
void shm__p2p_complete(struct shm_comm *c, struct req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "send(tag 0x.., N bytes) to rank d" and the like, in buf. */
const char *shm__p2p_what(const struct req *r, char *buf, size_t len);
/* The rings cannot be trusted any more: fail every pending request and
 * every later call with status and msg. */
void shm__p2p_fail_all(struct shm_comm *c, int status, const char *msg);
/* The first frame of a message from s: match it or keep it unexpected. */
void shm__p2p_arrive(struct shm_comm *c, int s, const struct frame *f, int rndv);
void shm__p2p_unex_remove(struct shm_p2p *p, struct unex *u);

/* ring.c */
/* Queue an ACK or CANCEL for d (written before more data); 0 or NOMEM. */
int shm__ring_ctl_push(struct shm_comm *c, int d, uint32_t type, uint64_t seq, int32_t status);
/* Write what is queued for d while its ring has room. */
void shm__ring_write_out(struct shm_comm *c, int d);
/* Take in every frame rank s has written to this rank. */
void shm__ring_drain(struct shm_comm *c, int s);

#endif
