/* comm.h - the communicator and work handle internals shared by comm.c,
 * work.c and coll.c. Stability: internal. */
#ifndef PLX_CORE_COMM_H
#define PLX_CORE_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "algo/algo.h"
#include "diag.h"
#include "loader.h"
#include "plexus/plexus.h"

struct plx_comm {
    char *name;
    int rank, size, local_rank, local_size;
    int64_t timeout_ms;
    struct plx__backend *be;
    void *bc;                 /* the backend's communicator */
    struct plx_caps caps;     /* this communicator's capabilities */
    struct plx_store *base_store; /* the job's store (NULL if the backend bootstraps itself) */
    struct plx_store *store;      /* view prefixed by name */
    uint64_t coll_seq;        /* next collective sequence number (issue order) */
    uint64_t split_seq;
    int cuda_staging;
    int aborted;              /* set by plx_comm_abort */
    int failed;               /* first error that broke the communicator */
    char failed_msg[768];
    uint64_t family;          /* shared with the communicators split from the same root (family.c) */
    struct plx_comm *family_next; /* family.c's list of live communicators */

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
    struct plx__algo_tuning tuning;
    struct plx__p2p p2p;
    struct plx__diag *diag;   /* fingerprints, ledger (diag.h); NULL: none */
};

struct plx__lowp_avg;

enum work_kind { WORK_DONE, WORK_NATIVE, WORK_GENERIC };

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
    struct plx__fp fp;        /* the user's call (diag.h) */
    struct plx_work *next;
};

/* work.c */
/* The work owns lowp from here on, also when these fail. */
int plx__work_native(struct plx_comm *c, const struct plx_coll_args *a, int scale_avg, struct plx__lowp_avg *lowp,
                     void *req, struct plx_work **w);
int plx__work_generic(struct plx_comm *c, const struct plx_coll_args *a, struct plx__lowp_avg *lowp,
                      const struct plx__fp *fp, struct plx_work **w);
int plx__work_done(struct plx_comm *c, int status, struct plx_work **w);
/* Run a generic collective now in the calling thread if the executor is idle. */
int plx__run_generic_blocking(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp);
void plx__executor_stop(struct plx_comm *c);
/* Record that the communicator can no longer be trusted after status. msg
 * (len bytes) is the failure's message: what c's relatives have lost is
 * added to it (family.c), and where the other ranks are (ledger.c); it
 * becomes the calling thread's last error. Returns the status to report:
 * status, or PLX_ERR_MISMATCH where a rank found the ranks' calls differ. */
int plx__comm_fail(struct plx_comm *c, int status, char *msg, size_t len);
/* The p2p adapter the algorithms drive (wraps the backend's isend/irecv). */
void plx__p2p_init(struct plx_comm *c);

/* family.c: communicators related by split. join with parent NULL starts a
 * family; leave before the backend's communicator is destroyed. */
void plx__family_join(struct plx_comm *c, const struct plx_comm *parent);
void plx__family_leave(struct plx_comm *c);
/* For a failure by a loss or a timeout: add to msg what the live relatives'
 * backends (c's included) have lost, waiting briefly for one to notice. */
void plx__family_explain(const struct plx_comm *c, int status, char *msg, size_t len);

/* rendezvous.c: who am I and where do we meet. */
struct plx__rendezvous {
    int rank, size, local_rank, local_size;
    char url[512];   /* "" if no store (backend bootstraps itself) */
    const char *source; /* "options", "torchrun", "Open MPI", "MPICH", "Slurm", "default" */
};
int plx__rendezvous_resolve(const struct plx_comm_options *opt, struct plx__rendezvous *out);

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
int plx__lowp_avg_begin(const struct plx_comm *c, struct plx_coll_args *a, struct plx__lowp_avg **out);
/* status 0: rounds the result into the caller's buffer. Always frees x
 * (NULL is a no-op). Returns status, or the conversion's error. */
int plx__lowp_avg_end(struct plx__lowp_avg *x, int status);

/* Core-internal bit of plx_coll_args.flags, never seen by a backend: the
 * buffers are CUDA memory and the op runs on host copies (stage.c). */
#define PLX__COLL_FLAG_STAGED (1u << 31)
/* Run a staged collective through the generic algorithms. */
int plx__stage_run(struct plx_comm *c, const struct plx_coll_args *a, uint64_t deadline_ns);

#endif
