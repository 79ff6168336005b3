/* shm.h - internal to the shm backend: ranks of one host share one memory
 * segment per communicator.
 *
 * Stability: internal.
 *
 * Segment layout (every offset computed from the header, which attachers
 * validate against the segment's real size before use):
 *
 *     struct shm_seg_header              one page
 *     struct shm_ctl   ctl[P]            one per rank, SHM_CTL_BYTES apart
 *     slots: rank r, half h at slot_off + (2r + h) * slot_bytes
 *     struct shm_p2p_ctl p2p[P]          at p2p_off, SHM_P2P_CTL_BYTES apart
 *     struct shm_ring    ring[P][P]      then, SHM_RING_HDR_BYTES apart
 *     ring data: sender s to receiver r at ring_off + (s * P + r) * ring_bytes
 *
 * Point-to-point (p2p.c) runs through the rings, one per ordered pair; see
 * p2p.c for the frames and what is checked before a frame is used.
 *
 * Every collective is a series of phases. In a phase each rank writes its
 * own slot (and its slot header), arrives at a barrier (bumps its epoch, a
 * futex word), waits until every rank's epoch reaches the same value, then
 * reads what it needs from the others' slots. Rounds alternate the two
 * halves of each slot, so the barrier of round j+1 also proves every rank
 * has finished reading round j: no extra barrier before a slot is reused.
 *
 * An allreduce of at most SHM_FAST_BYTES is one phase without slots: each
 * rank writes its call (sequence number, collective, dtype, op, count) and
 * its input into the cache line that holds its epoch, so a peer takes one
 * line per rank per operation; the slot header is written too, and judges
 * any peer whose line names another call.
 *
 * Nothing read from the segment is used as an index or a length: offsets
 * come from this rank's own arguments, and a peer's slot header must equal
 * this rank's expectation field for field, or the operation fails with
 * PLX_ERR_PROTOCOL.
 *
 * State lives in struct shm_comm (with the core's host for that
 * communicator) and the segment. The exceptions: plugin.c's load-time
 * texts (read-only once loaded), the copy plx_plugin_copy chose in each
 * file that calls it (plugin.h), and a waiting thread's saved scheduler
 * slice (core/common/slice.c: per thread, as scheduling attributes are).
 * A failure's message reaches a waiter in another thread through its
 * request (struct shm_op's err), not through thread-local storage. */
#ifndef PLEXUS_SHM_H
#define PLEXUS_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/backend.h"
#include "plexus/plugin.h"

#define SHM_MAGIC UINT64_C(0x706c78736873d005) /* "plxshs" + layout version */
#define SHM_CTL_BYTES 384
#define SHM_HDR_BYTES 4096
#define SHM_MAX_RANKS 256 /* a slot (>= 4 KiB) holds one 8-byte element per rank */

/* What a rank says about the round it has put in its slot. */
struct shm_slot_hdr {
    uint64_t seq;
    int32_t coll, dtype, op, root;
    uint64_t count;
    uint64_t off, len; /* the round: elements [off, off + len) of each block */
    /* Single-copy (cma.c): the rank's buffers, as addresses in its own
     * process. Only ever handed to process_vm_readv as the remote side, so
     * a bad value fails the read; never compared by expect(). */
    uint64_t send_addr, recv_addr;
};

/* A small allreduce (coll.c's fast path) in one cache line: a rank writes
 * its call and input beside its epoch, so the peer that sees it arrive has
 * both in the same transfer. Two halves, alternating by round as the slots do. */
#define SHM_FAST_BYTES 16

/* One rank's control block. The owner writes everything but `sleepers`,
 * `done_sleepers` and rank 0's `verdict`. Line 0 is what a waiting peer
 * reads; the owner writes it once per phase. */
struct shm_ctl {
    uint32_t epoch;    /* barrier arrivals: the futex word the others sleep on */
    uint32_t state;    /* SHM_STATE_* */
    uint32_t fast_desc[2];  /* coll | dtype << 8 | op << 16 | count << 24 of the half's call */
    uint64_t fast_seq[2];   /* ... and its sequence number */
    _Alignas(16) unsigned char fast_data[2][SHM_FAST_BYTES]; /* ... and this rank's input */
    int32_t pid;
    int32_t why_rank;  /* failed: the rank it lost, or -1 */
    int32_t why_code;  /* failed: its status */
    uint32_t cma_ok;   /* 1: this rank read a peer's memory with process_vm_readv; 2: it could not */
    uint64_t cma_addr; /* where this rank's probe word lives (its own address space) */
    uint32_t sleepers; /* ranks asleep on epoch (others add and remove) */
    uint32_t pos_half; /* the slot half of this rank's latest round */
    uint64_t pos_ns;   /* when it published that round (CLOCK_MONOTONIC_COARSE: one host) */
    int32_t cpu;       /* 1 + the CPU it last arrived at a barrier on (pace.c), 0: not known */
    uint32_t pad1[5];
    uint64_t verdict;  /* rank 0's only: the last barrier's outcome (sync.c); every rank writes it */
    uint32_t pad2[14];
    struct shm_slot_hdr hdr[2]; /* one per slot half */
    /* steal.c: the pieces of this rank's slice of a large allreduce round,
     * per slot half. The owner sets both before it publishes the round;
     * any rank then takes pieces and counts them done. */
    uint64_t claim[2];      /* low 32 bits: next piece from the front (the owner's); high: end of those left (thieves take from there) */
    uint32_t done[2];       /* pieces reduced: a futex word */
    uint32_t done_sleepers; /* ranks asleep on done */
    uint32_t pad3[9];
};

enum { SHM_STATE_ACTIVE = 0, SHM_STATE_FAILED = 1, SHM_STATE_LEFT = 2 };

struct shm_seg_header {
    uint64_t magic;
    uint32_t nranks;
    uint32_t ready;       /* rank 0 sets it once the layout is written */
    uint64_t slot_bytes;  /* one half of one rank's slot */
    uint64_t small_bytes; /* allreduce/reduce at most this big run in one phase */
    uint64_t ctl_off, slot_off, total_bytes;
    uint64_t ring_bytes; /* data bytes of one pair's ring */
    uint64_t p2p_off, ring_off;
    uint32_t steal;       /* large allreduce rounds run steal.c's protocol (rank 0's [shm] steal) */
};

#define SHM_P2P_CTL_BYTES 128
#define SHM_RING_HDR_BYTES 128

/* One rank's point-to-point doorbell: every sender bumps it after writing a
 * frame for this rank, and this rank's senders' bells after it frees ring
 * space, so a waiter sleeps on one futex word whatever it waits for. */
struct shm_p2p_ctl {
    uint32_t bell;
    uint32_t cma_ok;   /* 1: this rank read every peer with process_vm_readv; 2: it could not or would not */
    uint32_t pad0[14];
    uint32_t sleepers; /* ranks asleep on bell (this rank's threads; peers only read it) */
    uint32_t pad1[15];
};

/* A pair's ring: head written only by the sender, tail only by the
 * receiver, each on its own cache line. Both count bytes from the start. */
struct shm_ring {
    uint64_t head;
    uint64_t pad0[7];
    uint64_t tail;
    uint64_t pad1[7];
};

struct shm_cfg {
    size_t slot_bytes, small_bytes;
    int steal;          /* large allreduce rounds: running ranks reduce pieces nobody took yet */
    uint64_t spin_ns;   /* spin this long, */
    int spin_auto;      /* ... or as pace.c learns (spin_ns = auto) */
    uint64_t yield_ns;  /* then yield the core this long, then sleep on the futex */
    uint64_t wait_slice_ns; /* a sleeping wait's scheduler slice, until its op ends (0: unchanged) */
    int cma;            /* 0: never single-copy; 1: when every rank can (probed at create) */
    size_t cma_min_bytes; /* collectives at least this big go single-copy */
    int corrupt_rank;   /* fault injection: this rank writes a bad slot header */
    uint64_t corrupt_at; /* ... in the collective with this seq */
    int corrupt_addr;   /* ... only its buffer addresses (what single copy reads) */
    size_t ring_bytes;  /* point-to-point: data bytes of one pair's ring */
    int p2p_cma;        /* 0: point-to-point always copies twice; 1: single copy when every rank can */
    size_t p2p_cma_min_bytes; /* messages at least this big go single-copy */
    int p2p_corrupt_rank;     /* fault injection: this rank writes a corrupt frame header ... */
    uint64_t p2p_corrupt_at;  /* ... in its message number p2p_corrupt_at (1-based) */
};

/* pace.c: how waits go, learned over this communicator's waits. */
struct shm_pace {
    uint64_t calm_at;    /* no yielding before this clock_ns: a yield lost the core */
    uint64_t backoff_ns; /* how long the next lost yield stops yielding */
    uint64_t lost;       /* yields that lost the core (foreign work on it) */
    uint64_t sleeps;     /* futex sleeps */
    /* spin_ns = auto: */
    uint64_t spin_ns;     /* the spin budget now, */
    uint64_t spin_max_ns; /* at most this: twice this thread's scheduler slice */
    uint32_t regrow;      /* waits that slept but a full spin would have caught */
    int crowded;          /* more ranks than cores this process may run on: never spin */
    int cores;            /* ... those cores */
    int32_t cpu;          /* what this rank last published in its control block */
};

/* One wait's progress through look, spin, yield, sleep: starts zeroed. */
struct shm_pace_wait {
    unsigned looks;
    int started, slept, learns;
    uint64_t spin_until, yield_until, t0;
};

struct shm_comm {
    const struct plx_host *host; /* this communicator's instance of the core's services, until comm_destroy */
    int rank, size;
    int64_t timeout_ms;
    struct shm_cfg cfg;
    int memfd;
    size_t map_bytes;
    char *base;
    struct shm_seg_header *seg;
    int *pidfd;             /* per peer, -1 where pidfd_open failed */
    uint32_t epoch;         /* this rank's barrier count */
    uint32_t round;         /* rounds so far: picks the slot half */
    int aborted;            /* atomic */
    int revoked;            /* atomic; this rank revoked comm (aborted is set too) */
    int failed;             /* sticky: the segment's state is no longer shared */
    int cma;                /* single-copy agreed by every rank */
    uint64_t cma_word;      /* what peers read to probe CMA */
    char cma_why[160];      /* why single-copy is off */
    void *piece;            /* SHM_PIECE_BYTES of scratch for single-copy reductions */
    int lost_rank;          /* first rank seen to die, or -1 */
    char lost_msg[256];
    char mismatch_msg[320]; /* the first mismatch seen, or "": repeated to new work */
    char name[128];
    struct shm_p2p *p2p;    /* p2p.c's state, its own lock */
    int p2p_cma;            /* point-to-point single copy agreed by every rank */
    char p2p_cma_why[160];
    struct shm_pace pace;   /* the waits of this rank's ops (the collective or the p2p lock holder) */
    struct plx_store *store; /* the communicator's, until comm_destroy (symmetric.c's allocations) */
    struct shm_sym *sym;    /* symmetric.c's registered buffers, or NULL */
    struct shm_async *async; /* async.c: the queue of collectives and its progress thread */
};

/* The op being run: what each phase checks and reports. */
struct shm_op {
    struct shm_comm *c;
    const struct plx_coll_args *a;
    const char *what;
    /* host clock, ns; 0 until the op's first wait turns slow (shm__deadline
     * sets it then from timeout_ms): an op whose peers keep up reads no clock */
    uint64_t deadline;
    int64_t timeout_ms; /* < 0: none */
    size_t es;
    /* SHM_ERR_BYTES where a failure's message goes too, or NULL: a waiter
     * in another thread reports it (async.c's progress thread runs o). */
    char *err;
};

#define SHM_ERR_BYTES 512
/* Report o's failure through its communicator's host (the core keeps the
 * message for the calling thread) and into o->err; returns status. */
int shm__op_error(struct shm_op *o, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* segment.c */
int shm__segment_join(struct shm_comm *c, const struct plx_comm_args *args);
void shm__segment_leave(struct shm_comm *c);
/* The [shm] keys through the communicator's configuration (typed, checked by the core). */
void shm__cfg_read(const struct plx_host *host, const struct plx_config *config, struct shm_cfg *cfg);

static inline struct shm_ctl *shm__ctl(const struct shm_comm *c, int r)
{
    return (struct shm_ctl *)(c->base + c->seg->ctl_off + (size_t)r * SHM_CTL_BYTES);
}

static inline char *shm__slot(const struct shm_comm *c, int r, uint32_t half)
{
    return c->base + c->seg->slot_off + ((size_t)r * 2 + (half & 1)) * c->seg->slot_bytes;
}

/* sync.c */
/* Arrive at the next barrier and wait for every rank (deadline in the host
 * clock). 0, or PLX_ERR_PEER_LOST / REMOTE / ABORTED / TIMEOUT with the
 * message recorded. */
int shm__barrier(struct shm_op *o);
/* CLOCK_MONOTONIC in ns: one clock for every process of the host. */
uint64_t shm__mono_ns(void);
/* CLOCK_MONOTONIC_COARSE in ns (a tick's resolution, a fraction of the
 * fine clock's cost): when a round was published, for messages. */
uint64_t shm__coarse_ns(void);
/* o's deadline, set on first use. */
uint64_t shm__deadline(struct shm_op *o);
/* Mark this rank failed in the segment (so peers stop waiting) and wake all. */
void shm__fail(struct shm_comm *c, int status, int lost_rank);
/* The segment part alone, safe from any thread (plx_comm_abort's): peers learn why. */
void shm__mark_failed(struct shm_comm *c, int status, int lost_rank);
/* The rank that revoked comm, as some rank's control block says, or -1. */
int shm__revoked_by(struct shm_comm *c);
/* What a local stop (comm->aborted) fails work with: ABORTED, or REVOKED. */
int shm__stop_status(struct shm_comm *c);
void shm__wake_all(struct shm_comm *c);

/* cma.c: single-copy collectives with process_vm_readv (CMA). */
#define SHM_PIECE_BYTES (64u << 10)
/* Can this process read a same-uid peer's memory? (ptrace policy, syscall
 * present): a one-line reason either way; 1 if it may. */
int shm__cma_possible(char *why, size_t len);
/* After the join barrier: each rank reads its neighbour's probe word, then
 * all agree (one more barrier). Sets c->cma and c->cma_why. */
int shm__cma_agree(struct shm_op *o);
/* 1 if o runs single-copy; then shm__cma_run does it. */
int shm__cma_wants(const struct shm_op *o);
int shm__cma_run(struct shm_op *o);
/* steal.c: one round [off, off + len) of a large allreduce, work-stealing:
 * copy in, one barrier, reduce every piece nobody took yet, copy out. */
int shm__steal_round(struct shm_op *o, size_t off, size_t len);
/* sync.c: wait until *done reaches want (q's pieces of a round), failing
 * on a lost or failed peer, a stop or the deadline. */
int shm__wait_pieces(struct shm_op *o, int owner, uint32_t half, uint32_t want);
void shm__wake_pieces(struct shm_ctl *q, uint32_t half);
/* coll.c helpers cma.c and steal.c share; a reduction runs in pieces of
 * SHM_REDUCE_PIECE_BYTES so its partial result stays in cache. */
#define SHM_REDUCE_PIECE_BYTES (32u << 10)
int shm__reduce_piece(struct shm_op *o, char *d, const char *first_in, int first, uint32_t half, size_t boff, size_t k);
uint32_t shm__publish(struct shm_op *o, size_t off, size_t len);
int shm__expect_all(struct shm_op *o, uint32_t half);
int shm__mismatch(struct shm_comm *c, int r, uint32_t half, char *msg, size_t len);
void shm__slice(const struct shm_op *o, size_t len, int q, size_t *s0, size_t *s1);

/* p2p.c: why new work on c is refused (the error, its message in err
 * too when not NULL), or 0; p2p also checks point-to-point's own broken
 * state. */
int shm__refusal(struct shm_comm *c, int p2p, char *err);

/* coll.c: run a collective to completion in the calling thread; a
 * failure's message goes into err too when not NULL (SHM_ERR_BYTES). */
int shm__collective(struct shm_comm *c, const struct plx_coll_args *a, char *err);

/* symmetric.c: registered buffers every rank maps (plx_mem_alloc). */
int shm__sym_alloc(struct shm_comm *c, size_t bytes, void **ptr);
int shm__sym_free(struct shm_comm *c, void *ptr);
void shm__sym_destroy(struct shm_comm *c);
/* 1 if o runs on registered buffers; then shm__sym_run does it. */
int shm__sym_wants(const struct shm_op *o);
int shm__sym_run(struct shm_op *o);
/* async.c: collectives in issue order, blocking ones in the caller when
 * nothing is queued, the others on the communicator's progress thread. */
struct shm_async;
struct shm_creq;
int shm__async_create(struct shm_comm *c);
/* Ends queued and running collectives (aborted), joins the thread. */
void shm__async_destroy(struct shm_comm *c);
/* *req is c (completed here) or a queued collective's request. */
int shm__coll_start(struct shm_comm *c, const struct plx_coll_args *a, void **req);
/* The queued collective behind a request, or NULL (c, or point-to-point). */
struct shm_creq *shm__creq_of(void *req);
int shm__creq_test(struct shm_comm *c, struct shm_creq *r, int *done);
int shm__creq_wait_until(struct shm_comm *c, struct shm_creq *r, uint64_t deadline_ns);
/* Cancel a queued one, end and wait for a running one; frees r. */
void shm__creq_free(struct shm_comm *c, struct shm_creq *r);

static inline struct shm_p2p_ctl *shm__p2p_ctl(const struct shm_comm *c, int r)
{
    return (struct shm_p2p_ctl *)(c->base + c->seg->p2p_off + (size_t)r * SHM_P2P_CTL_BYTES);
}

/* The ring from rank s to rank r, and its data. */
static inline struct shm_ring *shm__ring(const struct shm_comm *c, int s, int r)
{
    return (struct shm_ring *)(c->base + c->seg->p2p_off + (size_t)c->size * SHM_P2P_CTL_BYTES +
                               ((size_t)s * (size_t)c->size + (size_t)r) * SHM_RING_HDR_BYTES);
}

static inline char *shm__ring_data(const struct shm_comm *c, int s, int r)
{
    return c->base + c->seg->ring_off + ((size_t)s * (size_t)c->size + (size_t)r) * c->seg->ring_bytes;
}

/* p2p.c: point-to-point through the rings. */
#define SHM_CMA_MAGIC UINT64_C(0x636d612d70726f62)
/* After the join barrier (o is the join's op): probe single copy for
 * point-to-point and agree on it (one barrier); allocate the state. */
int shm__p2p_create(struct shm_comm *c, struct shm_op *o);
/* Fail every pending request (the communicator goes) and free the state. */
void shm__p2p_destroy(struct shm_comm *c);
int shm__p2p_isend(struct shm_comm *c, const struct plx_p2p_args *a, void **req);
int shm__p2p_irecv(struct shm_comm *c, const struct plx_p2p_args *a, void **req);
int shm__p2p_test(struct shm_comm *c, void *req, int *done);
int shm__p2p_wait_until(struct shm_comm *c, void *req, uint64_t deadline_ns);
void shm__p2p_req_free(struct shm_comm *c, void *req);

/* bell.c: the point-to-point doorbell and peer liveness. */
void shm__bell_ring(struct shm_comm *c, int r);
/* Sleep on this rank's bell while it still reads seen, until deadline_ns
 * (host clock) or at most slice_ms. */
void shm__bell_sleep(struct shm_comm *c, uint32_t seen, uint64_t deadline_ns, int slice_ms);
/* 1 if rank r's process is gone (exited, killed, a zombie). */
int shm__peer_dead(struct shm_comm *c, int r);
/* lost.c: the ABI 1.7 lost-ranks hint, from shm__peer_dead. */
int shm__lost_ranks(void *comm, unsigned char *dead, int size);
void shm__cpu_relax(void);

/* pace.c: one step of a wait. SHM_PACE_AGAIN: look again; SHM_PACE_SLEEP:
 * sleep on the futex (a slice), then look again. */
enum { SHM_PACE_AGAIN, SHM_PACE_SLEEP };
int shm__pace(struct shm_comm *c, struct shm_pace_wait *w);
/* The wait w ended (what it waited for came): the spin budget learns from it. */
void shm__pace_done(struct shm_comm *c, const struct shm_pace_wait *w);
/* Before the first wait: the spin budget's bound (spin_ns = auto). */
void shm__pace_init(struct shm_comm *c, int sharing);
/* At each barrier arrival: publish the CPU this rank runs on, if it moved. */
void shm__pace_arrive(struct shm_comm *c);
/* [shm] wait_slice's default (core/common/slice.c): off. A short slice
 * lets a sleeper's wake-up preempt foreign work on its core, but setting
 * and restoring it are system calls in every op that sleeps, which a small
 * collective on quiet cores pays for, and the gain beside busy processes
 * did not repeat (bench/tuning.md has the figures). plexus-info reports
 * whether this kernel takes a slice of SHM_WAIT_SLICE_PROBE_NS. */
#define SHM_WAIT_SLICE_DEFAULT "0"
#define SHM_WAIT_SLICE_PROBE_NS 200000u

/* sync.c: names for messages */
const char *shm__coll_name(int coll);
const char *shm__status_name(int status);

#endif
