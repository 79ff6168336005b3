/* plexus.h - collective communication for distributed training.
 *
 * Stability: stable API. Functions are only added; structs that callers fill
 * (struct plx_comm_options, struct plx_op_options) start with struct_size and
 * are append-only, so a program built against an older header keeps working.
 *
 * The model: a communicator (struct plx_comm) is a group of `size` ranks that
 * run the same sequence of collectives. Every collective has a nonblocking
 * form (plx_i*) that returns a work handle, and a blocking form that is the
 * nonblocking form followed by plx_work_wait(). Collectives on one
 * communicator are matched across ranks by issue order; point-to-point
 * messages by (peer, tag), FIFO. Buffers passed to an operation are borrowed
 * until its work completes. Every function returns 0 or a negative PLX_ERR_*
 * code; plx_last_error() gives the detailed message of the calling thread's
 * last failure (which op, rank, peer, backend).
 */
#ifndef PLEXUS_PLEXUS_H
#define PLEXUS_PLEXUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PLEXUS_BUILDING_CORE) || defined(PLEXUS_BUILDING_STRATEGY)
#define PLX_API __attribute__((visibility("default")))
#else
#define PLX_API
#endif

#define PLEXUS_VERSION_MAJOR 0
#define PLEXUS_VERSION_MINOR 1
#define PLEXUS_VERSION_PATCH 0

/* Error codes: one table generates the enum, plx_err_name() and plx_strerror(). */
#define PLX_ERRNO_MAP(X)                                                                 \
    X(INVALID_ARG, -1, "invalid argument")                                               \
    X(UNSUPPORTED, -2, "operation not supported by this backend")                        \
    X(UNAVAILABLE, -3, "backend unavailable on this machine")                            \
    X(NOMEM, -4, "out of memory")                                                        \
    X(TIMEOUT, -5, "timed out")                                                          \
    X(PEER_LOST, -6, "connection to a peer was lost")                                    \
    X(ABORTED, -7, "communicator was aborted")                                           \
    X(SYSTEM, -8, "system call failed")                                                  \
    X(INTERNAL, -9, "internal error")                                                    \
    X(CONFIG, -10, "invalid configuration")                                              \
    X(NOT_FOUND, -11, "not found")                                                       \
    X(ABI, -12, "plugin ABI mismatch")                                                   \
    X(BROKEN, -13, "backend is broken")                                                  \
    X(INVALID_USAGE, -14, "invalid usage")                                               \
    X(PROTOCOL, -15, "protocol error from a peer")                                       \
    X(REMOTE, -16, "a remote rank failed")                                               \
    X(AUTH, -17, "authentication failed")                                                \
    X(MISMATCH, -18, "ranks called different collectives")                               \
    X(REVOKED, -19, "communicator was revoked")

enum plx_status {
    PLX_OK = 0,
#define PLX__ERR_ENUM(name, val, msg) PLX_ERR_##name = (val),
    PLX_ERRNO_MAP(PLX__ERR_ENUM)
#undef PLX__ERR_ENUM
};

/* Element types. Values are part of the ABI. */
enum plx_dtype {
    PLX_I8 = 0,
    PLX_U8 = 1,
    PLX_I32 = 2,
    PLX_U32 = 3,
    PLX_I64 = 4,
    PLX_U64 = 5,
    PLX_F16 = 6,
    PLX_BF16 = 7,
    PLX_F32 = 8,
    PLX_F64 = 9,
    PLX_DTYPE_COUNT
};

/* Reduction operators. AVG is SUM divided by the communicator size (integer
 * types divide with truncation toward zero, as PyTorch does). f16 and bf16
 * AVG in host memory is the mean wherever the mean is representable: each
 * input is divided in f32, summed in f32 and rounded once, on every backend
 * (twice the bytes of a 16-bit SUM on the wire). BAND, BOR and BXOR are
 * bitwise and take integer types only (i8 to u64); on f16, bf16, f32 or f64
 * every rank refuses them with PLX_ERR_INVALID_ARG before any transfer. */
enum plx_redop {
    PLX_SUM = 0,
    PLX_PROD = 1,
    PLX_MIN = 2,
    PLX_MAX = 3,
    PLX_AVG = 4,
    PLX_BAND = 5, /* backend ABI 1.13 */
    PLX_BOR = 6,
    PLX_BXOR = 7,
    PLX_REDOP_COUNT
};

/* Where a buffer lives. */
enum plx_mem_kind {
    PLX_MEM_AUTO = 0, /* host unless the core can tell it is device memory */
    PLX_MEM_HOST = 1,
    PLX_MEM_CUDA = 2,
};

/* Collective kinds, used in capability masks (bit 1u << kind) and messages.
 * One table generates the enum, plx_coll_name() and what each kind takes:
 * X(kind, value, name, takes a reduction op, takes a root, per-rank counts).
 * The v-collectives run natively only in plugins of ABI 1.4+ (backend.h),
 * else on the core's generic algorithms. */
#define PLX_COLL_MAP(X)                                   \
    X(ALLREDUCE, 0, "allreduce", 1, 0, 0)                 \
    X(BROADCAST, 1, "broadcast", 0, 1, 0)                 \
    X(REDUCE, 2, "reduce", 1, 1, 0)                       \
    X(ALLGATHER, 3, "allgather", 0, 0, 0)                 \
    X(REDUCE_SCATTER, 4, "reduce_scatter", 1, 0, 0)       \
    X(GATHER, 5, "gather", 0, 1, 0)                       \
    X(SCATTER, 6, "scatter", 0, 1, 0)                     \
    X(ALLTOALL, 7, "alltoall", 0, 0, 0)                   \
    X(BARRIER, 8, "barrier", 0, 0, 0)                     \
    X(SEND, 9, "send", 0, 0, 0)                           \
    X(RECV, 10, "recv", 0, 0, 0)                          \
    X(ALLTOALLV, 11, "alltoallv", 0, 0, 1)                \
    X(ALLGATHERV, 12, "allgatherv", 0, 0, 1)

enum plx_coll {
#define PLX__COLL_ENUM(kind, val, name, op, root, v) PLX_COLL_##kind = (val),
    PLX_COLL_MAP(PLX__COLL_ENUM)
#undef PLX__COLL_ENUM
    PLX_COLL_COUNT
};

#define PLX_TIMEOUT_DEFAULT (-1) /* the communicator's configured timeout */
#define PLX_TIMEOUT_INFINITE (-2)
#define PLX_UNDEFINED (-1)      /* plx_comm_split color: take no part */
#define PLX_ANY_SOURCE (-1)     /* plx_recv peer: any rank (if the backend can) */

struct plx_comm;
struct plx_work;

/* A key-value store the caller already has (a framework's own, such as a
 * torch.distributed store), handed to plx_comm_init() in place of a
 * rendezvous url. Every backend bootstraps through it exactly as through
 * plexus's own stores. Each callback returns 0 or a negative PLX_ERR_*
 * code (PLX_ERR_TIMEOUT when a wait ran out) and may be called from any
 * thread of plexus, also concurrently: it must be thread-safe. Keys are
 * NUL-terminated; values are bytes. Timeouts are in milliseconds,
 * PLX_TIMEOUT_INFINITE (-2) for none. Stable ABI: append-only. */
struct plx_store_callbacks {
    uint32_t struct_size;
    void *user; /* passed back as the first argument of every callback */
    /* Required. Store len bytes of val under key (replacing any value). */
    int (*set)(void *user, const char *key, const void *val, size_t len);
    /* Required. Wait up to timeout_ms for key, then return its value in
     * *val, allocated with malloc() (plexus frees it with free()), and its
     * length in *len. */
    int (*get)(void *user, const char *key, void **val, size_t *len, int64_t timeout_ms);
    /* Required. Add delta to the integer stored at key (a missing key counts
     * as 0) and return the new value in *result. */
    int (*add)(void *user, const char *key, int64_t delta, int64_t *result);
    /* Required. Wait up to timeout_ms until every one of the n keys exists. */
    int (*wait)(void *user, const char *const *keys, size_t n, int64_t timeout_ms);
    /* Optional: 1 if key exists now, 0 if not. NULL: a wait with timeout 0. */
    int (*check)(void *user, const char *key);
    /* Optional: delete key (a missing key is no error). NULL: not supported. */
    int (*del)(void *user, const char *key);
};

/* Options for plx_comm_init(). Call plx_comm_options_init() first; every
 * field left at its default is taken from the configuration or environment.
 * Strings are borrowed: valid during the call. */
struct plx_comm_options {
    uint32_t struct_size;
    const char *backend;          /* NULL: [core] backend / PLEXUS_BACKEND */
    int rank;                     /* -1: from RANK / launcher variables */
    int size;                     /* -1: from WORLD_SIZE / launcher variables */
    int local_rank;               /* -1: LOCAL_RANK, else rank */
    int local_size;               /* -1: LOCAL_WORLD_SIZE, else size */
    const char *init;             /* NULL: PLEXUS_INIT, else env:// . Also
                                     tcp://host:port, file:///dir, mem://name
                                     (ranks that are threads of one process) */
    const char *name;             /* communicator name all members share;
                                     NULL: "world" */
    int64_t timeout_ms;           /* -1: [core] timeout_ms. Bounds all of
                                     plx_comm_init (its failure may take 2 s
                                     more to tell the others), then each
                                     operation of the communicator */
    const char *config_file;      /* an extra INI file, applied last; NULL: none */
    const char *const *overrides; /* NULL-terminated "section.key=value" list,
                                     applied after everything else; NULL: none */
    /* Appended in 0.1 (read only when struct_size holds it). */
    const struct plx_store_callbacks *store; /* the caller's own store, used in
                                     place of init (which must then be NULL).
                                     Borrowed: valid until every communicator
                                     made from it (splits too) is destroyed.
                                     Keys are namespaced by name as usual. */
};

/* True if the struct pointed to by p (with its struct_size) holds field f:
 * how a reader of a versioned struct tells an older caller's struct apart. */
#define PLX_HAS_FIELD(p, type, f) \
    ((p)->struct_size >= offsetof(type, f) + sizeof(((type *)0)->f))

/* Per-operation options for the nonblocking forms. NULL means defaults. */
struct plx_op_options {
    uint32_t struct_size;
    int mem_kind;      /* enum plx_mem_kind, default PLX_MEM_AUTO */
    void *stream;      /* a cudaStream_t for device memory, NULL default stream */
    int64_t timeout_ms; /* -1: the communicator's timeout */
};

/* ---- library ---------------------------------------------------------- */

/* Release process-wide resources (plugins' finalize hooks, e.g. MPI_Finalize
 * if plexus initialised MPI). Call once, after every communicator is
 * destroyed; never called implicitly (no atexit). */
PLX_API int plx_finalize(void);
/* Version string, e.g. "0.1.0". Static storage. */
PLX_API const char *plx_version(void);
/* Symbolic name ("PLX_ERR_TIMEOUT") and text ("timed out") of a status. Static storage. */
PLX_API const char *plx_err_name(int status);
PLX_API const char *plx_strerror(int status);
/* The detailed message of the calling thread's last failure, or "" if none.
 * Valid until the thread's next plexus call. */
PLX_API const char *plx_last_error(void);
/* For libraries layered on plexus (libplexus-strategy): record the calling
 * thread's detailed message, as plexus does for its own failures, and return
 * status, so a caller writes `return plx_set_error(PLX_ERR_..., "...", ...)`. */
PLX_API int plx_set_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend context to the calling thread's message: "load 'w': <old>". */
PLX_API void plx_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
PLX_API size_t plx_dtype_size(int dtype);
PLX_API const char *plx_dtype_name(int dtype);
PLX_API const char *plx_redop_name(int op);
PLX_API const char *plx_coll_name(int coll);
/* Parse "f32", "float", "int32", ... / "sum", ... ; returns -1 if unknown. */
PLX_API int plx_dtype_from_name(const char *name);
PLX_API int plx_redop_from_name(const char *name);
/* Convert count elements between the float types PLX_F32, PLX_F64, PLX_F16
 * and PLX_BF16 (16-bit results round to nearest-even, through f32 as the
 * reduction kernels do; equal types copy). dst and src may be the same
 * buffer only if the types have the same size. PLX_ERR_INVALID_ARG for
 * other types. */
PLX_API int plx_dtype_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t count);

/* ---- communicators ---------------------------------------------------- */

PLX_API void plx_comm_options_init(struct plx_comm_options *opt);

/* Create a communicator: read the configuration, pick and load the backend,
 * rendezvous with the other ranks. opt may be NULL (everything from the
 * environment). On success *out is the communicator, freed with
 * plx_comm_destroy(). Errors: PLX_ERR_CONFIG, PLX_ERR_NOT_FOUND (unknown
 * backend), PLX_ERR_UNAVAILABLE/BROKEN (requested backend unusable),
 * PLX_ERR_TIMEOUT (a rank never arrived), PLX_ERR_INVALID_ARG. */
PLX_API int plx_comm_init(const struct plx_comm_options *opt, struct plx_comm **out);

/* How plx_comm_init(opt) would find its rank, size and rendezvous here, in
 * words (which launcher's variables, which bootstrap, and why that one),
 * written into buf (NUL-terminated, cut at len). opt may be NULL. Returns
 * PLX_OK, or the error plx_comm_init would meet in the environment. */
PLX_API int plx_bootstrap_describe(const struct plx_comm_options *opt, char *buf, size_t len);

/* Free a communicator. Pending work is aborted. destroy(NULL) is a no-op. */
PLX_API int plx_comm_destroy(struct plx_comm *comm);

/* Make every pending and future operation on comm fail with PLX_ERR_ABORTED.
 * Safe to call from any thread while others wait. */
PLX_API int plx_comm_abort(struct plx_comm *comm);

/* Make every pending and future operation on comm fail with PLX_ERR_REVOKED
 * on every rank, including ranks blocked in a collective or a receive:
 * the backend tells the peers, so they stop within its failure-detection
 * time, not at the operation's timeout. Any rank may call it, from any
 * thread; plx_comm_destroy still works afterwards. PLX_ERR_UNSUPPORTED
 * (naming the backend) where the backend cannot revoke. */
PLX_API int plx_comm_revoke(struct plx_comm *comm);

/* Collective over the surviving ranks of comm, usable after a peer was lost
 * or comm was revoked (or on a healthy comm): the survivors agree, through
 * the job's store, on which ranks failed, and *out becomes a new
 * communicator of the survivors, ranks renumbered in their old order. The
 * dead ranks' help is not needed, and a rank that dies during the agreement
 * is left out too. A rank that has not joined the agreement
 * [core] shrink_wait_ms after this one did (or whose heartbeat in it
 * stopped that long) counts as failed, and at once if a survivor's backend
 * saw it die (the lost-ranks hint of tcp and shm); if it comes later it gets
 * PLX_ERR_PEER_LOST. The job's store must survive (hosted by a launcher, or
 * by a surviving rank: under env:// and tcp:// that is rank 0). Everything
 * is bounded by comm's timeout (PLX_ERR_TIMEOUT). comm stays as it was:
 * destroy it; the caller destroys *out with plx_comm_destroy() (it is NULL
 * on an error). A hierarchical comm gives a hierarchical *out (a flat one
 * when the hosts are left holding different numbers of ranks).
 * PLX_ERR_UNSUPPORTED (naming the backend and why) on backends without
 * the shrink capability (plexus-info lists it) and backends without a
 * store; never a hang. */
PLX_API int plx_comm_shrink(struct plx_comm *comm, struct plx_comm **out);

/* Collective over comm's ranks, at a point they choose: *out becomes a new
 * communicator of size ranks: comm's ranks keep their numbers and size -
 * comm's size newcomers, each calling plx_comm_join, follow in the order
 * they joined. Waits for the newcomers up to comm's timeout. The caller
 * destroys *out (NULL on an error) with plx_comm_destroy(); comm stays. Same
 * PLX_ERR_UNSUPPORTED cases as plx_comm_shrink; PLX_ERR_INVALID_ARG if size
 * is not above comm's size. */
PLX_API int plx_comm_grow(struct plx_comm *comm, int size, struct plx_comm **out);

/* A new process joins the next plx_comm_grow of the communicator named
 * opt->name (default "world"; a communicator shrunk or grown from it counts
 * under the same first name) in the job whose store opt or the environment
 * names, as plx_comm_init finds it (PLEXUS_INIT, MASTER_ADDR/PORT; rank and
 * size are not needed). Waits up to the timeout for that grow. opt is
 * borrowed for the call; the caller destroys *out with plx_comm_destroy(). */
PLX_API int plx_comm_join(const struct plx_comm_options *opt, struct plx_comm **out);

/* Collective: split comm by color; ranks with the same color form a new
 * communicator ordered by (key, old rank). color PLX_UNDEFINED takes no part
 * and gets *out = NULL. */
PLX_API int plx_comm_split(struct plx_comm *comm, int color, int key, struct plx_comm **out);

PLX_API int plx_comm_rank(const struct plx_comm *comm);
PLX_API int plx_comm_size(const struct plx_comm *comm);
PLX_API int plx_comm_local_rank(const struct plx_comm *comm);
PLX_API int plx_comm_local_size(const struct plx_comm *comm);
/* Name of the backend serving comm ("sim", "tcp"; "shm+tcp" for one composed
 * of an intra-host and an inter-host backend). Valid until destroy. */
PLX_API const char *plx_comm_backend(const struct plx_comm *comm);
/* Communicator name (shared by all members). Valid until destroy. */
PLX_API const char *plx_comm_name(const struct plx_comm *comm);
/* 1 if the backend runs coll natively for (dtype, op), 0 if the core's
 * generic algorithm serves it, negative if it cannot be done
 * (PLX_ERR_INVALID_ARG for a pair no backend takes: a bitwise op on floats). */
PLX_API int plx_comm_native(const struct plx_comm *comm, int coll, int dtype, int op);
/* The configured model's prediction for one collective coll (enum
 * plx_coll) of bytes on comm, in seconds, into *seconds: the time of the
 * algorithm that would run, from the table of [core] estimates (what
 * plexus-whatif --emit-estimates writes from a calibrated model). bytes
 * counts as plexus-bench and nccl-tests size a row: the buffer of
 * allreduce, broadcast and reduce, the whole gathered output of allgather
 * (count * size elements), the whole input of reduce_scatter (count * size);
 * barrier ignores it. Nothing runs and no rank takes part: any rank may ask,
 * any number of times. Returns 0; PLX_ERR_UNSUPPORTED when no table is
 * configured for comm's backend or it has no answer for this collective at
 * comm's size or at this many bytes (plx_last_error() says which);
 * PLX_ERR_CONFIG for a table that cannot be read (file:line); or
 * PLX_ERR_INVALID_ARG for bad arguments. */
PLX_API int plx_comm_estimate(const struct plx_comm *comm, int coll, size_t bytes, double *seconds);

/* ---- registered (symmetric) memory ------------------------------------ */

/* Collective over comm: *ptr = bytes of memory (64-byte aligned, zeroed)
 * that every rank of this host can map. Collectives whose buffers lie in
 * such memory may read the peers' inputs and write their outputs directly,
 * in one pass, without staging copies (shm: allreduce). Backends without
 * such memory hand out ordinary memory, so the calls work everywhere.
 * Every rank calls it with the same bytes (> 0), in the same order as its
 * other collectives on comm. Errors: PLX_ERR_INVALID_ARG, PLX_ERR_NOMEM,
 * PLX_ERR_TIMEOUT (a rank did not take part), PLX_ERR_SYSTEM, and
 * PLX_ERR_ABORTED / PLX_ERR_INVALID_USAGE on an aborted or failed comm. */
PLX_API int plx_mem_alloc(struct plx_comm *comm, size_t bytes, void **ptr);
/* Release memory from plx_mem_alloc on comm. Local, not collective: the
 * peers' mappings stay valid until each of them frees its own. Free it
 * before plx_comm_destroy; what is left is released by the destroy.
 * free(NULL) is a no-op; a pointer plx_mem_alloc did not return on comm is
 * PLX_ERR_INVALID_ARG. */
PLX_API int plx_mem_free(struct plx_comm *comm, void *ptr);

/* ---- work handles ----------------------------------------------------- */

/* *done = 1 when the work has completed; returns its status then (0 or the
 * error it ended with), 0 while still running. Never blocks. */
PLX_API int plx_work_test(struct plx_work *work, int *done);
/* Wait for the work. timeout_ms: PLX_TIMEOUT_DEFAULT (the communicator's),
 * PLX_TIMEOUT_INFINITE, or milliseconds. Returns the work's status, or
 * PLX_ERR_TIMEOUT if it did not finish in time (the work stays pending). */
PLX_API int plx_work_wait(struct plx_work *work, int64_t timeout_ms);
/* Free a work handle. A pending work is waited for first (with the
 * communicator's timeout). free(NULL) is a no-op. */
PLX_API void plx_work_free(struct plx_work *work);

/* ---- collectives ------------------------------------------------------ *
 * In place: pass the same pointer as send and receive buffer. Counts are in
 * elements. Roots and peers are ranks of comm. */

/* recv[i] = op over ranks of send[i], count elements, on every rank. */
PLX_API int plx_allreduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op);
PLX_API int plx_iallreduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op,
                           const struct plx_op_options *o, struct plx_work **w);
/* buf of root is copied to buf of every rank. */
PLX_API int plx_broadcast(struct plx_comm *c, void *buf, size_t count, int dtype, int root);
PLX_API int plx_ibroadcast(struct plx_comm *c, void *buf, size_t count, int dtype, int root,
                           const struct plx_op_options *o, struct plx_work **w);
/* Like allreduce, but only root's recv is written (recv may be NULL elsewhere). */
PLX_API int plx_reduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op, int root);
PLX_API int plx_ireduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op, int root,
                        const struct plx_op_options *o, struct plx_work **w);
/* recv (count * size elements) = concatenation of every rank's send (count). */
PLX_API int plx_allgather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype);
PLX_API int plx_iallgather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype,
                           const struct plx_op_options *o, struct plx_work **w);
/* send has count * size elements; rank r receives block r of the reduction.
 * In place: recv == send + rank * count. */
PLX_API int plx_reduce_scatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op);
PLX_API int plx_ireduce_scatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op,
                                const struct plx_op_options *o, struct plx_work **w);
/* root's recv (count * size) = concatenation of every rank's send (count). */
PLX_API int plx_gather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root);
PLX_API int plx_igather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root,
                        const struct plx_op_options *o, struct plx_work **w);
/* rank r's recv (count) = block r of root's send (count * size). */
PLX_API int plx_scatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root);
PLX_API int plx_iscatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root,
                         const struct plx_op_options *o, struct plx_work **w);
/* Block j of rank i's send goes to block i of rank j's recv; count per block. */
PLX_API int plx_alltoall(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype);
PLX_API int plx_ialltoall(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype,
                          const struct plx_op_options *o, struct plx_work **w);
/* Vector alltoall: rank i sends send_counts[j] elements, starting at
 * element send_displs[j] of send, to rank j, and receives recv_counts[j]
 * elements from rank j at element recv_displs[j] of recv. send_counts[j] on
 * rank i must equal recv_counts[i] on rank j. Displacement arrays may be
 * NULL: blocks packed in rank order. Counts and displacements are copied
 * during the call (borrowed only then); the buffers until the work
 * completes. In place (send == recv): the layout of recv is used for both.
 * Errors: PLX_ERR_INVALID_ARG for a NULL array, a block that overflows, or
 * receive blocks that overlap (the message names the rank and the index).
 * Ranks that disagree on a count fail with PLX_ERR_MISMATCH on the receiver:
 * "rank i sends n elements to rank j, rank j expects m from rank i (index
 * i)" on the core's generic path; natively, mpi names them with [mpi-*]
 * check_counts = true (else only a larger block surfaces, as MPI's
 * truncation) and nccl cannot tell (the call times out). */
PLX_API int plx_alltoallv(struct plx_comm *c, const void *send, const size_t *send_counts,
                          const size_t *send_displs, void *recv, const size_t *recv_counts,
                          const size_t *recv_displs, int dtype);
PLX_API int plx_ialltoallv(struct plx_comm *c, const void *send, const size_t *send_counts,
                           const size_t *send_displs, void *recv, const size_t *recv_counts,
                           const size_t *recv_displs, int dtype, const struct plx_op_options *o,
                           struct plx_work **w);
/* Vector allgather: rank j contributes send_count elements (which must equal
 * recv_counts[j]); every rank receives them at element recv_displs[j] of
 * recv (NULL: packed in rank order). In place: send == recv + recv_displs
 * [rank] elements. Same ownership and errors as plx_alltoallv. */
PLX_API int plx_allgatherv(struct plx_comm *c, const void *send, size_t send_count, void *recv,
                           const size_t *recv_counts, const size_t *recv_displs, int dtype);
PLX_API int plx_iallgatherv(struct plx_comm *c, const void *send, size_t send_count, void *recv,
                            const size_t *recv_counts, const size_t *recv_displs, int dtype,
                            const struct plx_op_options *o, struct plx_work **w);
PLX_API int plx_barrier(struct plx_comm *c);
PLX_API int plx_ibarrier(struct plx_comm *c, const struct plx_op_options *o, struct plx_work **w);
/* A barrier that names the ranks that did not come (torch's
 * monitored_barrier, as gloo runs it): every rank reports to rank 0 and
 * waits for its release; rank 0 waits for the reports in rank order until
 * timeout_ms (< 0: the communicator's) has passed. On rank 0 a rank that
 * did not report in time is late: late[] (late_cap entries) gets the late
 * ranks in order, *nlate their number; without wait_all rank 0 stops at the
 * first, and when its time ran out before a rank's turn it stops naming
 * none (PLX_ERR_TIMEOUT, *nlate 0). Then rank 0 returns PLX_ERR_TIMEOUT, or
 * the first late rank's own error (PLX_ERR_PEER_LOST for a rank known
 * gone), and releases no one: the others fail waiting for the release.
 * Blocking only; its messages use the core's tags, not the user's. After a
 * failure the ranks no longer agree on their collectives' order: destroy
 * the communicator (or revoke and shrink it). */
PLX_API int plx_monitored_barrier(struct plx_comm *c, int64_t timeout_ms, int wait_all, int *late, int late_cap,
                                  int *nlate);

/* ---- prepared collectives --------------------------------------------- *
 * A collective called again and again with the same arguments (a gradient
 * bucket's allreduce every step) is checked once and then run as often as
 * needed, with less of plexus's work on each run; where the backend
 * prepares its part too (mpi), a blocking run is little more than the
 * backend's own call. Each run is a collective like any other on its
 * communicator: matched by issue order with the other ranks' calls, which
 * may be plain or prepared, and kept in the flight recorder. Preparing is
 * local (nothing is sent); the buffers are borrowed until the prepared
 * collective is freed. One run at a time: wait for a started run before
 * the next. */
struct plx_prepared;
/* Prepare coll (enum plx_coll: a collective of this header but the
 * v-collectives) with the arguments of its plx_<coll> call: op for the
 * reductions and root for the rooted ones (ignored elsewhere); broadcast's
 * buffer is recv (send is ignored). o (NULL: the defaults) holds for every
 * run: its timeout, its memory kind. Bad arguments fail here, as the
 * call's would. */
PLX_API int plx_coll_prepare(struct plx_comm *c, int coll, const void *send, void *recv, size_t count, int dtype,
                             int op, int root, const struct plx_op_options *o, struct plx_prepared **out);
/* Run it once, blocking; returns what plx_<coll> would. */
PLX_API int plx_prepared_run(struct plx_prepared *p);
/* Start one run; *w as from plx_i<coll>. */
PLX_API int plx_prepared_start(struct plx_prepared *p, struct plx_work **w);
/* Free it (NULL: a no-op), before or after its communicator's destroy but
 * not during it; once the communicator is destroyed, runs fail with
 * PLX_ERR_INVALID_USAGE. */
PLX_API void plx_prepared_free(struct plx_prepared *p);

/* Point-to-point. tag: 0 .. 2^31-1. Matched by (peer, tag), FIFO. */
PLX_API int plx_send(struct plx_comm *c, const void *buf, size_t count, int dtype, int peer, int tag);
PLX_API int plx_isend(struct plx_comm *c, const void *buf, size_t count, int dtype, int peer, int tag,
                      const struct plx_op_options *o, struct plx_work **w);
PLX_API int plx_recv(struct plx_comm *c, void *buf, size_t count, int dtype, int peer, int tag);
PLX_API int plx_irecv(struct plx_comm *c, void *buf, size_t count, int dtype, int peer, int tag,
                      const struct plx_op_options *o, struct plx_work **w);

#ifdef __cplusplus
}
#endif
#endif
