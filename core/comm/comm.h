/* comm.h - the communicator and work handle internals shared by comm.c,
 * work.c, executor.c, p2p.c and coll.c. Stability: internal. */
#ifndef PLX_CORE_COMM_H
#define PLX_CORE_COMM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "callname.h"
#include "loader.h"
#include "plexus/plexus.h"

struct plx_comm {
    /* The fields every message and wait reads come first, on adjacent
     * lines: a process of thousands of simulated ranks touches each rank's
     * on every step. */
    char *name;
    int rank, size, local_rank, local_size;
    int64_t timeout_ms;
    uint64_t create_deadline_ns; /* while it is made: the one deadline of every step (0: none, timeout_ms each) */
    struct plx__backend *be;
    struct plx_config *config; /* its options over the process layers; shared with its splits */
    void *bc;                 /* the backend's communicator */
    struct plx__p2p p2p;
    struct plx__preq *preq_pool; /* the p2p adapter's records, for reuse (p2p.c) */
    struct plx__diag *diag;   /* fingerprints, ledger (core/diag/); NULL: none */
    const struct plx__diag_hooks *dh; /* comm's one door into diag (diag_hooks.h); never NULL */
    int aborted;              /* set by plx_comm_abort */
    int revoked;              /* set by plx_comm_revoke on this rank */
    int failed;               /* first error that broke the communicator */
    int cuda_staging;
    struct plx_caps caps;     /* this communicator's capabilities */

    struct plx_host inst;     /* the backend's services for this communicator (ABI 1.5 instance) */
    struct plx__host_ctx inst_ctx;
    struct plx_store *base_store; /* the job's store (NULL if the backend bootstraps itself) */
    struct plx_store *store;      /* view prefixed by key_root */
    char *key_root;               /* its keys' prefix in base_store: name, and generation after the first */
    uint64_t coll_seq;        /* next collective sequence number (issue order) */
    uint64_t split_seq;
    uint64_t rebuild_seq;     /* shrinks and grows so far (shrink.c, grow.c): alike on every rank taking part */
    uint64_t family;          /* shared with the communicators split from the same root (family.c) */
    struct plx_comm *family_next; /* family.c's list of live communicators */
    int machine_ranks;        /* the job's ranks on this machine, where known (hier.c); 0: unknown */
    /* A hierarchy's cross child (hier.c): the user's call its generic
     * collective stands for, checked in-band in place of its own (NULL:
     * its own), and its ranks' ranks in the parent, for naming them. */
    const struct plx__fp *stands_for;
    const int *parent_rank;

    /* Executor for generic collectives: one thread, FIFO queue. */
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* queue changes, completions */
    struct plx_work *head, *tail;
    int busy;                 /* a generic collective is running (thread or inline) */
    int stopping;
    int thread_started;
    pthread_t thread;

    struct plx__scratch scratch;
    struct plx__scratch stage; /* host copies of CUDA buffers ([core] cuda_staging) */
    struct plx__hier *hier;   /* intra + cross children (hier.c), or NULL: flat */
    /* avg_lowp.c: the last f32 copy, kept for the next f16/bf16 AVG
     * (fresh pages cost more than the conversions); swapped atomically,
     * since works end on any thread. */
    struct plx__lowp_avg *lowp_spare;
    struct plx__mem *mem;     /* mem.c: what plx_mem_alloc handed out */
    struct plx_prepared *prepared; /* prepared.c: its prepared collectives (mu) */
    /* Large and read once per operation (tuning) or once it failed: last. */
    struct plx__algo_tuning tuning;
    char failed_msg[768];
    /* An inline generic call's error message (busy makes it that call's):
     * not on the caller's stack, where it would lie between the frames an
     * algorithm's every step reads (the simulator fetches those ahead). */
    char inline_errmsg[512];
};

struct plx__lowp_avg;
struct plx__hier;

enum work_kind { WORK_NATIVE = 1, WORK_GENERIC };

struct plx_work {
    struct plx_comm *comm;
    int kind;
    void *req;                /* WORK_NATIVE: the backend's request */
    struct plx_coll_args args;
    int scale_avg;            /* native SUM standing in for AVG: divide on completion */
    struct plx__lowp_avg *lowp; /* f16/bf16 AVG run in f32: round into the caller's buffer on completion */
    int done;                 /* guarded by comm->mu for WORK_GENERIC */
    int status;
    int freed_by_user;
    char errmsg[768];         /* the message of a failure, replayed to the waiter */
    struct plx__fp fp;        /* the user's call (callname.h) */
    struct plx_work *next;
    /* A point-to-point work's backend request when the backend asks for
     * req_size (ABI 1.5); the work is allocated with room for it. */
    _Alignas(max_align_t) unsigned char req_mem[];
};

/* A derived communicator's name and store key root: parent + suffix, kept
 * under a bound however long the chain (lineage.c). out: 512 bytes do. */
void plx__child_name(char *out, size_t n, const char *parent, const char *suffix);
void plx__child_key_root(char *out, size_t n, const char *parent, const char *suffix);

/* work.c, executor.c, p2p.c */
/* The work owns lowp from here on, also when these fail. */
int plx__work_native(struct plx_comm *c, const struct plx_coll_args *a, int scale_avg, struct plx__lowp_avg *lowp,
                     void *req, struct plx_work **w);
/* The same in caller-owned memory (a blocking call's work on its stack, no
 * allocation per call); plx__work_native_release then does what
 * plx_work_free does but free. */
void plx__work_native_init(struct plx_work *w, struct plx_comm *c, const struct plx_coll_args *a, int scale_avg,
                           struct plx__lowp_avg *lowp, void *req);
void plx__work_native_release(struct plx_work *w);
/* Complete w, whose request the backend's test just reported done with
 * status rc: free the request, scale an AVG, record the failure and the
 * flight recorder's state. Returns the status to report. */
int plx__work_native_end(struct plx_work *w, int rc);
int plx__work_generic(struct plx_comm *c, const struct plx_coll_args *a, struct plx__lowp_avg *lowp,
                      const struct plx__fp *fp, struct plx_work **w);
/* Run a generic collective now in the calling thread if the executor is idle. */
int plx__run_generic_blocking(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp);
void plx__executor_stop(struct plx_comm *c);
/* Record that the communicator can no longer be trusted after status. msg
 * (len bytes) is the failure's message: what c's relatives have lost is
 * added to it (family.c), and where the other ranks are (ledger.c); it
 * becomes the calling thread's last error. Returns the status to report:
 * status, or PLX_ERR_MISMATCH where a rank found the ranks' calls differ. */
int plx__comm_fail(struct plx_comm *c, int status, char *msg, size_t len);
/* Whether a failure with status leaves the communicator unusable (not for
 * bad arguments or unsupported requests). */
int plx__breaks_comm(int status);
/* plx_comm_split with the child on backend be (the parent's, or another:
 * hier.c builds its intra-host child this way). */
int plx__comm_split_on(struct plx_comm *c, int color, int key, struct plx__backend *be, struct plx_comm **out);
/* What plx__comm_rebuild builds: rank of size, on be with config, meeting
 * in base_store under key_root. */
struct plx__rebuild {
    const char *name, *key_root;
    int rank, size;
    struct plx__backend *be;
    struct plx_config *config;
    struct plx_store *base_store;
    int64_t timeout_ms, create_ms;
};
int plx__comm_rebuild(struct plx_comm *parent, const struct plx__rebuild *rb, struct plx_comm **out);
/* The same by the backend's own shrink (ABI 1.8): agreed 0 where there is
 * no store to agree through, and the backend writes the survivors into alive. */
int plx__comm_shrink_native(struct plx_comm *parent, const struct plx__rebuild *rb, unsigned char *alive,
                            int agreed, struct plx_comm **out);
/* comm.c: a process joining a running job (plx_comm_join): its backend,
 * options and the job's store (as a client), from options like
 * plx_comm_init's. The caller releases config and base_store. */
struct plx__job {
    char name[256];
    struct plx__backend *be;
    struct plx_config *config;
    struct plx_store *base_store;
    int64_t timeout_ms;
};
int plx__comm_open_job(const struct plx_comm_options *opt, struct plx__job *job);
/* c's instance of its backend's services, handed to comm_create/comm_split. */
const struct plx_host *plx__comm_instance(struct plx_comm *c);
/* The p2p adapter the algorithms drive (wraps the backend's isend/irecv). */
void plx__p2p_init(struct plx_comm *c);
void plx__preq_pool_free(struct plx_comm *c);
/* Wait for a backend request until deadline_ns (PLX__NEVER: none); checks the abort
 * flag, and once the wait is slow calls the diagnosis hook
 * (plx__diag_slow_wait, peer: the rank waited for, -1: unknown) at least
 * every ~100 ms. Does not free it. Returns its status, or
 * PLX__STILL_PENDING when the deadline passed first (unlike a request that
 * ended in a timeout). */
#define PLX__STILL_PENDING 1
/* coll.c: 0, or the error an operation what on c must fail with (revoked,
 * aborted, or unusable after an earlier error). */
int plx__check_usable(struct plx_comm *c, const char *what);
int plx__wait_req(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer);

/* mem.c: free what plx_mem_alloc handed out and the caller did not free. */
void plx__mem_release_all(struct plx_comm *c);

/* family.c: communicators related by split. join with parent NULL starts a
 * family; leave before the backend's communicator is destroyed. */
void plx__family_join(struct plx_comm *c, const struct plx_comm *parent);
void plx__family_leave(struct plx_comm *c);
/* For a failure by a loss or a timeout: add to msg what the live relatives'
 * backends (c's included) have lost, waiting briefly for one to notice. */
void plx__family_explain(const struct plx_comm *c, int status, char *msg, size_t len);

/* coll.c: check a and run it natively or generically; w NULL: blocking. */
int plx__coll_submit(struct plx_comm *c, struct plx_coll_args *a, const struct plx_op_options *o,
                     struct plx_work **w);
/* coll.c: a prepared collective's checks, made once as submit makes them
 * (errors as the call's first run would report them). *direct = 1: each
 * run may hand a, rewritten here as the backend takes it, straight to the
 * backend as a blocking native call (no AVG to scale, no staging or
 * composed hierarchy, no fingerprint exchange first); 0: each run goes
 * through submit. */
int plx__coll_plan(struct plx_comm *c, struct plx_coll_args *a, const struct plx_op_options *o, int *direct);
/* prepared.c: end the backend's part of every collective prepared on c
 * (before its backend communicator goes); they fail from then on. */
void plx__prepared_drop_all(struct plx_comm *c);
/* coll.c: elements this rank sends (*sn) and receives (*rn) in a, and
 * whether it uses its send and receive buffers at all. */
void plx__coll_extent(const struct plx_comm *c, const struct plx_coll_args *a, size_t *sn, size_t *rn, int *use_send,
                      int *use_recv);

/* avg_lowp.c: AVG on f16/bf16 host buffers runs as an f32 SUM of the inputs
 * pre-divided by the group size, rounded once into the caller's buffer. */
struct plx__lowp_avg;
int plx__lowp_avg_needed(const struct plx_coll_args *a);
/* Rewrites a to an F32 SUM over scratch copies (send converted now); *out
 * finishes it. */
int plx__lowp_avg_begin(struct plx_comm *c, struct plx_coll_args *a, struct plx__lowp_avg **out);
/* status 0: rounds the result into the caller's buffer. Always lets go of
 * x (NULL is a no-op): c keeps it for its next call. Returns status, or the
 * conversion's error. */
int plx__lowp_avg_end(struct plx__lowp_avg *x, int status);
/* Frees the copy c keeps (comm teardown, once no work can end any more). */
void plx__lowp_avg_drop(struct plx_comm *c);

/* Core-internal bit of plx_coll_args.flags, never seen by a backend: the
 * buffers are CUDA memory and the op runs on host copies (stage.c). */
#define PLX__COLL_FLAG_STAGED (1u << 31)
/* Core-internal bit too: the op runs through the hierarchy's children
 * (hier.c), on the executor in issue order like a generic one. */
#define PLX__COLL_FLAG_HIER (1u << 30)
/* Run a staged collective through the generic algorithms. */
int plx__stage_run(struct plx_comm *c, const struct plx_coll_args *a, uint64_t deadline_ns);

#endif
