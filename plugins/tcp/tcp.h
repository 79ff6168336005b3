/* tcp.h - shared state of the tcp backend (Gloo's pair protocol).
 *
 * Wire format (gloo@5b14351 transport/tcp/pair.h): every frame starts with a
 * 48-byte little-endian preamble of six u64: nbytes (48 + payload), opcode,
 * slot, offset, length, roffset. Opcodes: 0 SEND_BUFFER (bound buffers; not
 * supported), 1 SEND_UNBOUND_BUFFER (payload follows), 2 NOTIFY_SEND_READY,
 * 3 NOTIFY_RECV_READY. Data flows receiver-driven: a receive always sends
 * RECV_READY, a send always sends SEND_READY and its payload once the peer's
 * RECV_READY for that slot is banked. Plexus tag == Gloo slot.
 *
 * Extension between two plexus peers only (detected by a marker past the
 * sockaddr in the 136-byte address (bootstrap.c), which libgloo leaves uninitialised and
 * ignores): small sends go out at once ("eager") and the receiver keeps them
 * until their receive is posted; the RECV_READY that receive still sends is
 * then absorbed by the sender's `owed` count. Ordering per (peer, slot) holds
 * because a send is only eager while no older send on that slot waits. */
#ifndef PLEXUS_TCP_H
#define PLEXUS_TCP_H

#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "plexus/backend.h"
#include "plexus/plugin.h"
#include "slice.h"

/* [tcp] wait_slice's default (core/common/slice.c): off, as it measured no
 * faster beside busy processes (bench/tuning.md), unlike shm's. */
#define TCP_WAIT_SLICE_DEFAULT "0"
#define TCP_WAIT_SLICE_DEFAULT_NS 0

#define TCP_ADDR_BYTES 136
#define TCP_HDR_BYTES 48
/* Between plexus peers a message whose payload is at most TCP_EAGER_MAX
 * goes at once, without waiting for the receiver's ready notice, with a head
 * of up to TCP_EAGER_HEAD_MAX bytes in front (the core's fingerprint header:
 * so a collective's first message of 64 KiB is not the one that waits). */
#define TCP_EAGER_MAX (64u << 10)
#define TCP_EAGER_HEAD_MAX 64u
#define TCP_RXBUF (64u << 10)
/* A peer whose last payload had at least TCP_BULK_BYTES is read at most
 * TCP_RX_BULK_STAGE bytes at a time up to the next payload, which then goes
 * straight to its buffer (2 ranks, 1 MiB allreduce: the full 64 KiB stage
 * copied half of every 128 KiB segment a second time). Smaller payloads keep
 * the full stage, where one read takes many frames. */
#define TCP_BULK_BYTES (32u << 10)
#define TCP_RX_BULK_STAGE 4096u
#define TCP_SLOT_BUCKETS 64
#define TCP_LEAD_IDLE_NS 1000000u /* hand input back to the I/O thread after 1 ms without a leader */
#define TCP_LEAD_EVENTS 64 /* events the leader takes from one epoll_wait */
/* busy_poll_us=auto: a look (epoll_wait without timeout) that took this long
 * means this thread lost its core meanwhile: something else wanted it. */
#define TCP_SPIN_PREEMPT_NS 50000u
/* ... and, when the look yielded the core, this long: the peer rank that
 * ran meanwhile may have worked a while; other work keeps it for a slice. */
#define TCP_SPIN_YIELD_NS 200000u
#define TCP_SPIN_MIN_NS 16000u /* a smaller budget is no spin at all */
#define TCP_SPIN_REGROW 8

enum { OP_SEND_BUFFER = 0, OP_SEND_UNBOUND = 1, OP_NOTIFY_SEND_READY = 2, OP_NOTIFY_RECV_READY = 3 };
/* Extension between plexus peers only: "my connection to rank <slot> was
 * lost", sent just before a broken communicator shuts its connections, so
 * the ranks that see that shutdown name the rank that died. */
#define OP_PLX_LOST 0x504c584cu
/* Its offset field says why (older plexus peers send 0 and ignore it). */
/* TCP_LOST_ABORTED: the rank named is the sender, which called plx_comm_abort;
 * TCP_LOST_GAVE_UP: the sender, whose core abandoned a collective in progress
 * (its timeout, or a mismatch it found): no peer may complete that one.
 * TCP_LOST_REVOKED: the rank named called plx_comm_revoke; whoever hears it
 * passes it on to every peer before closing, so no rank reads a bare
 * shutdown first. */
enum { TCP_LOST_CONNECTION = 0, TCP_LOST_RENDEZVOUS = 1, TCP_LOST_ABORTED = 2, TCP_LOST_GAVE_UP = 3,
       TCP_LOST_REVOKED = 4 };
/* How long a failing rank may spend getting its notices out. */
#define TCP_NOTICE_NS 250000000u

struct tcp_req {
    int is_send;
    int core_mem;          /* lives in the core's record of the transfer (ABI 1.5 req_size) */
    int peer;              /* -1 while a receive-from-any is unbound */
    uint64_t slot;
    char *head;            /* head_bytes in front of buf in the same message (PLX_CAP_P2P_HEAD) */
    size_t head_bytes;
    char *buf;
    size_t bytes;          /* of buf; the message is head_bytes + bytes */
    int overflow;          /* a head receive got a longer message: the rest was dropped */
    atomic_int done;
    int status;
    int freed;             /* the core released it; the plugin frees it when unlinked */
    int linked;            /* lists or frames that still point at it */
    char err[240];
    struct tcp_req *next;  /* in a slot's posted/pending list or the any list */
};

/* Eager payload that arrived before its receive (plexus peers only). */
struct tcp_early {
    char *data;
    size_t len;
    size_t cap;            /* bytes data can hold (records are reused) */
    struct tcp_early *next;
};

/* Per (peer, slot) protocol state; freed when everything in it is zero. */
struct tcp_slot {
    uint64_t slot;
    struct tcp_req *posted, *posted_tail; /* receives announced with RECV_READY */
    struct tcp_req *pending, *pending_tail; /* sends waiting for RECV_READY */
    struct tcp_early *early, *early_tail;
    uint32_t recv_ready;  /* banked RECV_READY from the peer */
    uint32_t remote_send; /* SEND_READY not yet matched by a receive */
    uint32_t expect_send; /* receives posted before their SEND_READY */
    uint32_t owed;        /* eager sends whose RECV_READY is still to come */
    struct tcp_slot *next;
};

/* One outgoing frame: the preamble and maybe a payload from a send request. */
struct tcp_frame {
    uint64_t hdr[6];
    struct tcp_req *req; /* payload source, or NULL */
    size_t sent;         /* bytes of header + payload written */
    struct tcp_frame *next;
};

struct tcp_peer {
    int rank, fd;
    int eager;           /* both ends are plexus */
    int closed;          /* the peer closed a quiet connection (it finished) */
    char closed_why[80];
    char addr[64];       /* the peer's published "ip:port" */
    struct tcp_slot *slots[TCP_SLOT_BUCKETS];
    struct tcp_frame *tx, *tx_tail;
    struct tcp_slot *slot_pool;   /* released slots, frames and early records, for reuse (with mu) */
    struct tcp_frame *frame_pool;
    struct tcp_early *early_pool;
    int early_pooled;
    uint32_t ev_mask;    /* events registered with the I/O thread's epoll set */
    uint32_t lead_mask;  /* ... with the leader's (0: not in it) */
    /* receive state */
    unsigned char hdr[TCP_HDR_BYTES];
    size_t hdr_got;
    int in_payload;
    char *dst;           /* payload destination (user buffer, early buffer, or NULL = discard) */
    size_t pay_len, pay_got;
    struct tcp_req *dst_req;
    struct tcp_early *dst_early;
    size_t early_bytes;  /* eager payloads held for receives not yet posted */
    struct tcp_slot *dst_slot;
    unsigned char *rxbuf;
    size_t rx_pos, rx_len;
    int bulk;            /* the last payload had >= TCP_BULK_BYTES */
};

struct tcp_comm {
    const struct plx_host *host;     /* the core's services for this communicator */
    int core_reqs;                   /* the core holds requests (req_size, ABI 1.5 core) */
    const struct plx_config *config; /* the communicator's configuration (core-owned) */
    int rank, size;
    int64_t timeout_ms;
    int busy_poll_us;    /* [tcp] busy_poll_us as set; -1: auto */
    uint64_t wait_slice_ns; /* [tcp] wait_slice: a sleeping wait's (and the I/O thread's) scheduler slice */
    int spin_yield;      /* local ranks outnumber cores: sched_yield() while spinning */
    int machine_ranks;   /* the ranks on this machine, this one too, as the mesh found them (bootstrap.c) */
    /* busy_poll_us=auto adapts the spin (plugin.c, spin_adapt): spin_ns is
     * the budget now, up to spin_max_ns; halved whenever a spin lost its
     * core or a wait outlasted twice the full spin, doubled again after
     * TCP_SPIN_REGROW waits that slept but the full spin would have caught. */
    uint64_t spin_ns, spin_max_ns;
    int spin_regrow;
    size_t max_early_bytes; /* [tcp] max_early_bytes: per peer */
    /* Payloads that came before their receive, so were copied twice (early
     * records), and their bytes: PLEXUS_DEBUG=tcp reports them at the end. */
    uint64_t early_payloads, early_payload_bytes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct tcp_peer *peers;
    struct tcp_req *any, *any_tail; /* unbound receives from any source */
    /* Records kept for reuse (with mu), so a message in steady state
     * allocates nothing: requests here, slots and frames per peer. */
    struct tcp_req *req_pool;
    int ep, evfd;
    pthread_t io;
    int io_started, stop;
    int aborted;
    int revoked_by;        /* the rank that revoked this communicator, -1: none */
    int gave_up_by;        /* the rank whose abandoned collective broke this communicator, -1: none */
    int aborted_by;        /* the peer whose abort (heard, maybe passed on) broke it, -1: none */
    int gave_up;           /* this rank told its peers it abandoned a collective */
    /* Input is read by a waiting thread (the "leader") while there is one:
     * it sleeps in its own epoll set (lead_ep) and reads what arrives, so a
     * small message costs one wake-up instead of two (I/O thread, then
     * waiter). Meanwhile the I/O thread's EPOLLIN interest is off (in_off);
     * it turns it back on once no thread has led for TCP_LEAD_IDLE_NS. */
    int leader;          /* a thread leads now */
    int leader_sleeping; /* ... inside epoll_wait: completions must write wake_fd */
    int in_off;          /* EPOLLIN is off for every connection */
    int wake_fd;         /* eventfd that wakes the leader */
    uint64_t last_lead_ns;
    /* The leader's epoll set: wake_fd and every open connection, EPOLLIN
     * always, EPOLLOUT while output is queued. A wait costs what arrived,
     * not a look at every peer's socket. */
    int lead_ep;
    struct epoll_event *lead_ev; /* its results: TCP_LEAD_EVENTS */
    int broken;          /* a connection was lost: everything fails with lost_msg */
    int broken_status;
    char lost_msg[480];
    int lost_rank;       /* the rank whose loss broke it (first cause), or -1 */
};

/* bootstrap.c */
int tcp__connect_mesh(struct tcp_comm *c, const struct plx_comm_args *a);

/* gloo_wire.c: gloo's two rendezvous layouts, and which one a job speaks. */
enum { TCP_WIRE_2022 = 1, TCP_WIRE_2023 = 2 };
/* A rank's gloo 2023 record, as read by rank me. */
struct tcp_rec {
    struct sockaddr_storage ss; /* its listener */
    int64_t seq;                /* what me writes on dialing it */
    const unsigned char *addr;  /* its 136-byte address, inside the value read */
    char host[256];
};
int tcp__choose_wire(struct tcp_comm *c, const struct plx_comm_args *a, uint64_t deadline, int *wire, int *blame);
int tcp__wire_of(const void *val, size_t len, int P); /* TCP_WIRE_*, or 0: neither */
const char *tcp__wire_name(int wire);
size_t tcp__rec_size(int P, size_t host_len);
void tcp__rec_encode(unsigned char *out, const char *host, const unsigned char addr[TCP_ADDR_BYTES], int P);
int tcp__rec_decode(const void *val, size_t len, int P, int me, struct tcp_rec *out); /* 0, or -1: not one */

/* address.c: the address a rank listens on and publishes, and why. */
struct tcp_addr {
    struct sockaddr_storage ss; /* port 0 */
    char ifname[IF_NAMESIZE];
    char why[200];
};
int tcp__choose_address(const struct plx_host *host, const struct plx_config *cfg, struct tcp_addr *out);
int tcp__ifname_match(const char *spec, const char *name);
int tcp__is_loopback(const struct sockaddr *sa);
socklen_t tcp__sockaddr_len(const struct sockaddr *sa);
void tcp__fmt_sockaddr(char *out, size_t n, const struct sockaddr *sa);
void tcp__fmt_ip(char *out, size_t n, const struct sockaddr *sa); /* no port */
const char *tcp__rendezvous_host(char *buf, size_t n, const char **from);

/* wire*.c, the Gloo pair protocol (all under c->mu unless noted) */
void *tcp__io_main(void *arg); /* the I/O thread; takes c->mu itself */
int tcp__post_send(struct tcp_comm *c, struct tcp_req *r);
int tcp__post_recv(struct tcp_comm *c, struct tcp_req *r);
void tcp__cancel(struct tcp_comm *c, struct tcp_req *r);
/* Move r, which lives in the core's memory, to a record of the plugin's own
 * wherever the lists, frames and input point at it; the copy, or NULL when
 * out of memory (then everything failed and nothing points at r). */
struct tcp_req *tcp__detach(struct tcp_comm *c, struct tcp_req *r);
void tcp__fail_all(struct tcp_comm *c, int status, const char *msg);
void tcp__drop_peer(struct tcp_comm *c, struct tcp_peer *p, const char *why);
/* The 48-byte lost-peer notice naming lost_rank (why: TCP_LOST_*); any thread. */
void tcp__notice_frame(uint64_t h[6], int lost_rank, int why);
int tcp__peer_gone(struct tcp_comm *c, struct tcp_peer *p, const struct tcp_req *r); /* error status if p closed, else 0 */
void tcp__free_state(struct tcp_comm *c);

/* pool.c: records reused instead of allocated per message (with c->mu). */
struct tcp_req *tcp__req_get(struct tcp_comm *c);
void tcp__req_put(struct tcp_comm *c, struct tcp_req *r);
struct tcp_slot *tcp__slot_get(struct tcp_peer *p);
void tcp__slot_put(struct tcp_peer *p, struct tcp_slot *s);
struct tcp_frame *tcp__frame_get(struct tcp_peer *p);
void tcp__frame_put(struct tcp_peer *p, struct tcp_frame *f);
/* An early record whose buffer holds len bytes; NULL when out of memory. */
struct tcp_early *tcp__early_get(struct tcp_peer *p, size_t len);
void tcp__early_put(struct tcp_peer *p, struct tcp_early *e); /* NULL: no-op */
void tcp__pools_free(struct tcp_comm *c);
/* The peer's end of fd has closed (its FIN, reset or error is queued); any thread. */
int tcp__hung_up(int fd);
/* Read and write what p's socket allows now, without blocking. */
void tcp__progress(struct tcp_comm *c, struct tcp_peer *p);
/* Register p's epoll interest: for the I/O thread EPOLLIN unless c->in_off,
 * for the leader EPOLLIN; for both EPOLLOUT while output is queued. */
void tcp__update_events(struct tcp_comm *c, struct tcp_peer *p);
/* Write every connection's queued frames (corked notifications included). */
void tcp__flush_all(struct tcp_comm *c);
/* Turn the I/O thread's EPOLLIN on or off for every connection. */
void tcp__set_input(struct tcp_comm *c, int on);
/* Take p's socket out of both epoll sets (its peer left, or it failed). */
void tcp__unwatch(struct tcp_comm *c, struct tcp_peer *p);

#endif
