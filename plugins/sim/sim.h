/* sim.h - internals of the sim backend: an in-process world of ranks that
 * are threads. Stability: internal to the plugin. */
#ifndef PLX_SIM_H
#define PLX_SIM_H

#include <pthread.h>
#include <stdint.h>

#include "plexus/backend.h"
#include "plexus/plugin.h"

/* A p2p or collective request. */
struct sim_req {
    int is_coll;
    int is_send;
    int peer;             /* p2p: the other rank (or PLX_ANY_SOURCE) */
    int owner;            /* rank that posted it */
    void *buf;            /* p2p: the payload (NULL, timing only: none) */
    size_t bytes;         /* p2p: the message's, head and payload */
    void *head;           /* p2p: PLX_CAP_P2P_HEAD's head, its first head_bytes */
    size_t head_bytes;
    uint64_t tag;
    int matched;          /* p2p: paired with a peer request */
    int done;
    int status;
    int freed;            /* the core released it; the worker frees it when done */
    double t_post, t_depart, t_done; /* model: virtual ns it was posted, the message left, it completes */
    double nic_ns;        /* model, across hosts: from t_depart until its last byte passed the sender's NIC */
    double copy_in;       /* model, serial copies: a receive's copy on its rank's core (0: none) */
    int priced;           /* model: the send's departure is known */
    int ack_from;         /* model, a receive within a host: its sender's model rank + 1 (0: none) ... */
    int ack_priced;       /* ... and whether its acknowledgement is on its clock yet */
    int timed;            /* model: a native collective the model priced (native.c): completes at t_done */
    int waited;           /* its owner, a coroutine, blocks on it (w->mu): its completion wakes the owner */
    struct sim_req *next;      /* p2p lists / worker queue */
    /* Not cleared for a new request (sim_req_new): set where used. */
    char err[256];
    struct plx_coll_args args; /* collective */
};

/* The network model (model.c), [sim] model_* keys. Times in ns. */
struct sim_model {
    int on;
    int ranks_per_host;   /* 0: every rank on one host */
    int cores_per_host;   /* 0: a core for every rank; fewer: its ranks time-share them */
    int machine_cores;    /* > 0: every host's ranks share these cores (hosts emulated on one machine) */
    int yielding_waits;   /* time-shared: a waiting rank gives its core up (else it spins on its share) */
    double wake_ns;       /* time-shared: a message's wait for its receiver to be woken and scheduled */
    double wake_cpu_ns;   /* time-shared: the core time that wake-up takes, shared with the host's ranks */
    double intra_alpha_ns, intra_beta_ns; /* within a host: latency, ns per byte */
    double intra_cache_bytes;  /* within a host: the bytes of a message its copies keep in cache */
    double intra_memory_beta_ns; /* ... and the ns each byte beyond them costs more (0: none) */
    double host_cache_bytes;   /* the cache a host's ranks share for an operation's buffers (0: none) */
    double host_memory_beta_ns; /* ... and the ns a copied byte costs more by the share beyond it (0: none) */
    double intra_head_bytes;   /* within a host: the first bytes of each copy ... */
    double intra_head_beta_ns; /* ... cost this many ns each more (0: none) */
    double intra_private_bytes; /* within a host: each core's own cache; bytes another core wrote ... */
    double intra_private_beta_ns; /* ... cost this many ns each more while they are still there (0: none) */
    double intra_ack_ns;  /* within a host: an unanswered message costs a receiver sending elsewhere this (an ACK) */
    int intra_serial_copies; /* within a host a rank's copies out and in share its core, one after another */
    double eager_limit;   /* bytes above which a message waits for its receive's post (0: none) */
    double rendezvous_ns; /* CPU time such a message costs its sender beyond its bytes (the notice's handling) */
    double inter_alpha_ns, inter_beta_ns; /* across hosts, through each host's NIC */
    double inter_burst_bytes; /* a NIC's token bucket: bytes it passes at once after an idle spell (0: none) */
    double inject_beta_ns; /* per rank, shared by its messages (0: no limit) */
    double reduce_gamma_ns; /* ns per byte the core reduces on a rank (0: free) */
    int native_shm;       /* allreduce and allgather as shm's native collectives, by their schedule */
    int payload;          /* 0: timing only, messages carry sizes and no bytes */
    char trace[256];      /* Chrome trace JSON of every message to this file ("": none) */
};

/* Fault injection and behaviour, read from [sim] at comm_create. */
struct sim_config {
    int native;           /* native_collectives */
    char fail_op[32];     /* collective name, send, recv, any; "" = off */
    int fail_after;       /* the Nth matching op fails (0 = never) */
    int fail_rank;        /* -1: every rank */
    int delay_rank;       /* -1: none */
    int delay_ms;
    int absent_rank;      /* -1: none */
    struct sim_model model;
};

struct world;
struct sim_fiber;

struct impl {
    /* Read by every message: first, together (a run of thousands of
     * coroutine ranks touches each rank's on every step of a ring). */
    const struct plx_host *host; /* this communicator's instance of the core's services */
    struct world *w;
    /* cfg.model, or the world's copy where it is the same (every rank of a
     * run): one copy's lines, however many ranks read it */
    const struct sim_model *model;
    /* model: this rank's virtual time (w->mu): its own, or, on a coroutine,
     * the coroutine's, so that time spent in one communicator carries to
     * the next (a hierarchy's intra and cross steps) */
    double *clock_ns;
    struct sim_fiber *fiber; /* the coroutine it runs on (fiber.c), or NULL: a thread */
    struct sim_req *free_reqs; /* released requests, reused: no malloc per operation */
    double footprint_bytes; /* model, w->mu: the core's generic operation's buffers on this rank (0: none) */
    int rank, size;
    int model_rank;       /* where the model places it: its rank, or its coroutine's */
    int last_to, last_from; /* the peers of its last send and receive (-1: none): world.c's hot_lines */
    int injects;          /* cfg asks this rank for a failure or a delay (fault.c) */
    int aborted;
    int op_count;         /* ops seen, for fail_after */
    int64_t timeout_ms;
    /* The rest: configuration and the native collectives' machinery. */
    struct sim_config cfg;
    double own_clock_ns;
    unsigned ncoll;       /* native collectives run (match.c's parity) */
    /* The worker that runs this rank's native collectives in order. A
     * blocking collective with nothing queued runs in the caller's thread
     * instead (busy keeps the two from overlapping). */
    pthread_t worker;
    int has_worker;       /* native collectives only: no thread per rank otherwise */
    /* With w->mu: queue, busy and completion of this rank's collectives, and
     * completion of its p2p requests (a delivery wakes its two ranks only). */
    pthread_cond_t cv;
    struct sim_req *qhead, *qtail;
    int busy;
    int stopping;
    void *scratch;        /* in-place alltoall: grows to the largest seen */
    size_t scratch_bytes;
    void *small;          /* SIM_SMALL_BYTES: the small-message allreduce result */
};

/* Allreduce up to this size: every rank reduces the whole vector (two
 * barriers instead of three). */
#define SIM_SMALL_BYTES ((size_t)32 << 10)
/* The model's per-rank state (model.c): four link queues, and where and
 * when the rank last sent. */
#define SIM_QUEUES 6
/* The doubles the queues of n slots take: SIM_QUEUES per slot, and last
 * the shared machine's (model_machine_cores). */
#define SIM_QUEUE_DOUBLES(n) (SIM_QUEUES * (size_t)(n) + 1)
/* Timing only: the bytes of a message that are still copied, so that what
 * the core puts in front of a payload (its fingerprint header) arrives, and
 * small collectives stay exact (backend.h). */
#define SIM_SAMPLE_BYTES ((size_t)PLX_TIMING_MESSAGE_BYTES)
/* Work item of the data phases: big enough to stream, small enough to
 * balance; a multiple of every element size. */
#define SIM_ITEM_BYTES ((size_t)256 << 10)

struct world {
    uint64_t id;
    int size, refs, joined;
    pthread_mutex_t mu; /* see sim_lock */
    pthread_cond_t cv;
    /* The scheduler (fiber.c) whose coroutines are every rank, fixed when
     * the world is made (NULL: thread ranks): nothing runs concurrently in
     * such a world, so it takes no lock. */
    const void *sched;
    /* Unmatched p2p requests by receiving rank, each list in post order:
     * a post scans only its receiver's list, whatever the world's size. */
    struct sim_req **sends_to, **recvs_at;
    /* Collective rendezvous: slot per rank, barrier by generation. */
    const struct plx_coll_args **slot;
    /* Copies of the ranks' calls for match.c, by the parity of each rank's
     * collective count: a rank that leaves a collective early (a barrier)
     * may write its next call while a slower one still compares. */
    struct plx_coll_args *calls[2];
    struct impl **members;
    int arrived;
    uint64_t generation;
    uint64_t *arrive_gen;
    int *ever_joined;               /* per rank, never cleared: for messages */
    size_t next_item;               /* work items claimed in this phase (coll.c) */
    int lingering;                  /* a failed rank waits for the others to arrive: wake it */
    int broken;                     /* a rank left a collective midway: status */
    char broken_msg[200];
    /* model: virtual ns each queue is busy until, by rank and by host */
    double *egress_free, *ingress_free, *nic_out_free, *nic_in_free;
    /* model, native.c: the requests of the ranks that reached the native
     * collective in progress, how many, and the latest's virtual time */
    struct sim_req **native_reqs;
    int native_arrived;
    double native_start_ns;
    /* Its maker's model, which its ranks with the same one read */
    struct sim_model model;
    /* Coroutine ranks: their run's link queues (made on first use) and its
     * ranks (sim_fiber_queues, sim_fiber_count); 0: thread ranks */
    double *run_queues;
    int run_slots;
    struct world *next;
};

/* The world's lock (w->mu) on the paths every message takes. A world of
 * one thread's coroutines skips it: there it guards nothing, yet cost
 * every message several lock round trips. Paths that wait on a condition
 * variable (thread ranks only) and cold ones lock w->mu themselves, each
 * pair within one function, so the two never interleave. */
static inline void sim_lock(struct world *w)
{
    if (!w->sched)
        pthread_mutex_lock(&w->mu);
}

static inline void sim_unlock(struct world *w)
{
    if (!w->sched)
        pthread_mutex_unlock(&w->mu);
}

/* world.c */
int sim_world_join(const struct plx_comm_args *args, struct impl *c);
void sim_world_leave(struct impl *c);
int sim_barrier(struct impl *c, const char *what, uint64_t deadline_ns, int64_t timeout_ms);
void sim_linger(struct impl *c, uint64_t deadline_ns);
void sim_world_break(struct world *w, int status, const char *msg);
void sim_wake_all(struct world *w);
int sim_wait_req(struct impl *c, struct sim_req *r, int64_t timeout_ms);
struct timespec sim_abstime(uint64_t deadline_ns);

/* Requests: from the rank's free list (w->mu held by the _locked forms). */
struct sim_req *sim_req_new(struct impl *c);
void sim_req_release_locked(struct impl *c, struct sim_req *r);
void sim_req_free_all(struct impl *c);

/* p2p.c */
int sim_isend(void *comm, const struct plx_p2p_args *a, void **req);
int sim_irecv(void *comm, const struct plx_p2p_args *a, void **req);
void sim_p2p_cancel(struct impl *c, struct sim_req *r);

/* coll.c */
int sim_collective(void *comm, const struct plx_coll_args *a, void **req);
/* c's scratch, grown to at least bytes and kept (NULL: out of memory). */
void *sim_scratch(struct impl *c, size_t bytes);
int sim_worker_start(struct impl *c);
void sim_worker_stop(struct impl *c);

/* Coroutine ranks that all wait: every wait fails at once with this (the
 * program's sends and receives cannot match), never a timeout. */
#define SIM_DEADLOCK PLX_ERR_INVALID_USAGE

/* fiber.c: the calling coroutine (NULL on a thread of its own); make f
 * runnable from virtual time at_ns; give the thread to the next runnable
 * rank until woken (-1: every rank waits, a deadlock). The running
 * coroutine is found through of_run, any fiber of its run (the caller's
 * c->fiber), without a thread-local. hot (NULL entries: none) is what it
 * reads first when it resumes: the switch to the fiber before it fetches
 * their first two lines each. */
#define SIM_FIBER_HOT 4
struct sim_fiber *sim_fiber_self(void);
void sim_fiber_wake(struct sim_fiber *f, double at_ns);
int sim_fiber_block(const struct sim_fiber *of_run, const void *const hot[SIM_FIBER_HOT]);
/* After the rank's clock moved: let the ranks that are earlier in virtual
 * time run first, so that every message is posted in virtual-time order
 * and the model's link queues are charged in that order. */
void sim_fiber_catch_up(const struct sim_fiber *of_run, const void *const hot[SIM_FIBER_HOT]);
/* world.c: sim_fiber_catch_up for c's coroutine (r: the request it just
 * waited on, or NULL), with c's hot lines (world.c's hot_lines). */
void sim_catch_up(const struct impl *c, const void *r);
/* The rank it runs (its rank in the first communicator of the job) and
 * its virtual clock, which all its communicators share. */
int sim_fiber_rank(const struct sim_fiber *f);
const void *sim_fiber_sched(const struct sim_fiber *f); /* one per plexus_sim_run_ranks */
double *sim_fiber_clock(struct sim_fiber *f);
/* The run's ranks, and the model's link queues for them (SIM_QUEUES per
 * rank, model.c; NULL: no memory). */
int sim_fiber_count(const struct sim_fiber *f);
double *sim_fiber_queues(struct sim_fiber *f);

/* revoke.c: the backend's comm_revoke; whether w was revoked (w->mu
 * held); the error for an operation refused for it. */
int sim_revoke(void *comm);
int sim_revoked(const struct world *w);
int sim_revoked_error(struct impl *c, const char *what);

/* fault.c */
void sim_config_read(const struct plx_host *h, const struct plx_config *config, struct sim_config *cfg);
/* Whether cfg fails some op or delays rank (the checks below are skipped
 * otherwise). */
int sim_fault_injects(const struct sim_config *cfg, int rank);
/* Nonzero (an error status, message in *r) if this op should fail now. */
int sim_fault_check(struct impl *c, const char *opname);
void sim_fault_delay(struct impl *c);

/* Record an error (status + message) for the calling thread in the core,
 * through c's host; sim_last_error reads it back there, for a worker to
 * hand it to the request's waiter. */
int sim_error(const struct impl *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *sim_last_error(const struct impl *c);

/* model.c: read the model; price a send at post and a message at its
 * match; move the owner's clock when a request completes (all w->mu held). */
void sim_model_read(const struct plx_host *h, const struct plx_config *config, struct sim_model *m);
int sim_model_send(struct impl *c, struct sim_req *r);
void sim_model_deliver(struct impl *sender, struct sim_req *send, struct sim_req *recv);
void sim_model_complete(struct impl *c, struct sim_req *r);
/* The "plexus.sim" extension's hooks (backend.h): a reduction moves the
 * rank's clock by gamma * bytes; an operation's buffers price its copies. */
void sim_model_charge_reduce(void *comm, size_t bytes);
void sim_model_op_footprint(void *comm, size_t bytes);
/* With model_intra_native = shm: the virtual ns shm's native allreduce or
 * allgather takes by its schedule, from the last rank's arrival. */
double sim_model_native_ns(struct impl *c, const struct plx_coll_args *a);
/* Whether the model runs coll on c as a native collective: shm's, where
 * every rank of the run is on one host. */
int sim_model_native(const struct impl *c, int coll);

/* native.c: the model's native collective a on c, completed in *req by
 * the last rank to arrive. */
int sim_native_model(struct impl *c, const struct plx_coll_args *a, void **req);

size_t sim_dtype_size(int dtype);
const char *sim_coll_name(int coll);
/* match.c: after the rendezvous, PLX_ERR_MISMATCH with both calls in msg
 * if the ranks' arguments differ (the same answer on every rank). */
int sim_check_match(struct impl *c, int parity, char *msg, size_t len);

#endif
