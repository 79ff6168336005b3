/* plugin.c - the MPI backend, built once per MPI ABI from this file:
 * plexus-mpi-openmpi.so and plexus-mpi-mpich.so for MPI-4 libraries (their
 * ABIs differ), plexus-mpi-abi.so for MPI-5's standard ABI (abi.c).
 * Every collective runs natively through MPI's nonblocking calls; test()
 * and wait() drive MPI_Test, since MPICH makes no progress otherwise. f16
 * and bf16 reduce through user-defined ops that call the core's kernels;
 * avg is left to the core (sum, then divide). alltoallv and allgatherv (ABI
 * 1.4) go to MPI_(I)alltoallv / MPI_(I)allgatherv, whose counts and
 * displacements are int: a block or displacement above INT_MAX elements is
 * refused, naming the rank and index (a fallback to the core's algorithm
 * would be decided per rank, and ranks deciding differently would deadlock). */
#include <limits.h>
#if defined(PLX_MPI_ABI)
#include "abi_mpi.h"
#else
#include <mpi.h>
#endif
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's ULFM error classes */
#endif
#endif
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "plexus/backend.h"
#include "plexus/plugin.h"
#include "ulfm.h"

#if defined(PLX_MPI_OPENMPI)
#define NAME "mpi-openmpi"
#define IMPL "Open MPI"
#define LIB_MARK "Open MPI"
#define OWN_ENV "OMPI_COMM_WORLD_SIZE"
#define OTHER_ENV "PMI_SIZE"
#define OTHER_IMPL "MPICH"
#define LAUNCHER "mpirun.openmpi"
#elif defined(PLX_MPI_MPICH)
#define NAME "mpi-mpich"
#define IMPL "MPICH"
#define LIB_MARK "MPICH"
#define OWN_ENV "PMI_SIZE"
#define OTHER_ENV "OMPI_COMM_WORLD_SIZE"
#define OTHER_IMPL "Open MPI"
#define LAUNCHER "mpirun.mpich"
#elif defined(PLX_MPI_ABI)
/* The implementation is the one libmpi_abi.so.1 points at (abi.c). */
#define NAME "mpi-abi"
#define IMPL (mpi__abi_impl()->impl)
#define LIB_MARK IMPL
#define OWN_ENV (mpi__abi_impl()->own_env)
#define OTHER_ENV (mpi__abi_impl()->other_env)
#define OTHER_IMPL (mpi__abi_impl()->other_impl)
#define LAUNCHER (mpi__abi_impl()->launcher)
#else
#error "define PLX_MPI_OPENMPI, PLX_MPI_MPICH or PLX_MPI_ABI"
#endif

/* The host the entry was given (PLX_PLUGIN_ENTRY keeps it); nothing here
 * reads it: each call uses its communicator's (a->host, c->host). */
static const struct plx_host *entry_host;
static int we_initialized, finalized, serialize;
static int world_taken; /* a communicator of ours is MPI_COMM_WORLD itself */
static pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER; /* used when the thread level is below MULTIPLE */
static MPI_Datatype half_type = MPI_DATATYPE_NULL;
static MPI_Op half_ops[2][4]; /* [f16, bf16][sum, prod, min, max] */


static void lock(void)
{
    if (serialize)
        pthread_mutex_lock(&mpi_mu);
}

static void unlock(void)
{
    if (serialize)
        pthread_mutex_unlock(&mpi_mu);
}

/* ULFM's error classes, where this MPI's header has them: a revoked
 * communicator and a failed process are plexus statuses of their own. */
static int status_of(int rc)
{
    int cls = 0;
    MPI_Error_class(rc, &cls);
#ifdef MPIX_ERR_REVOKED
    if (cls == MPIX_ERR_REVOKED)
        return PLX_ERR_REVOKED;
#endif
#ifdef MPIX_ERR_PROC_FAILED
    if (cls == MPIX_ERR_PROC_FAILED)
        return PLX_ERR_PEER_LOST;
#endif
#if defined(MPI_ERR_PROC_FAILED) && !defined(MPIX_ERR_PROC_FAILED) /* MPI 5 spells them without X */
    if (cls == MPI_ERR_PROC_FAILED)
        return PLX_ERR_PEER_LOST;
#endif
#if defined(MPI_ERR_REVOKED) && !defined(MPIX_ERR_REVOKED)
    if (cls == MPI_ERR_REVOKED)
        return PLX_ERR_REVOKED;
#endif
    (void)cls;
    return PLX_ERR_INTERNAL;
}

static int mpi_fail(const struct plx_host *host, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return plx_plugin_error(host, status_of(rc), NAME ": %s failed: %s", what, msg);
}

/* ---- probe: library and launcher, no side effects ------------------------ */

static int launcher_reason(char *reason, size_t len)
{
    if (getenv(OWN_ENV))
        return PLX_PROBE_USABLE;
    if (getenv(OTHER_ENV)) {
        snprintf(reason, len, "started by %s's launcher (%s is set); this plugin is for %s (use %s, or the other "
                 "MPI plugin)", OTHER_IMPL, OTHER_ENV, IMPL, LAUNCHER);
        return PLX_PROBE_UNAVAILABLE;
    }
    snprintf(reason, len, "not started by %s (no %s in the environment)", LAUNCHER, OWN_ENV);
    return PLX_PROBE_UNAVAILABLE;
}

static int probe(struct plx_probe_result *out)
{
    /* MPICH 4.0 writes its whole configure line, past MPI_MAX_LIBRARY_VERSION_STRING:
     * a generous buffer of our own, not the header's bound. */
    static char version[1 << 16];
    int len = 0;
#if defined(PLX_MPI_ABI)
    const char *why = mpi__abi_load();
    if (why) {
        out->state = PLX_PROBE_UNAVAILABLE;
        snprintf(out->reason, sizeof out->reason, "%s", why);
        return 0;
    }
#endif
    MPI_Get_library_version(version, &len); /* allowed before MPI_Init */
    if (!strstr(version, LIB_MARK)) {
        out->state = PLX_PROBE_BROKEN;
        snprintf(out->reason, sizeof out->reason, "built for %s but the MPI library says: %.160s", IMPL, version);
        return 0;
    }
    out->state = launcher_reason(out->reason, sizeof out->reason);
#if defined(PLX_MPI_ABI)
    int major = 0, minor = 0;
    MPI_Abi_get_version(&major, &minor); /* callable at any time */
    if (out->state == PLX_PROBE_USABLE)
        snprintf(out->reason, sizeof out->reason, "%.*s; MPI ABI %d.%d from %s", (int)strcspn(version, "\n,"),
                 version, major, minor, mpi__abi_file());
#else
    if (out->state == PLX_PROBE_USABLE)
        snprintf(out->reason, sizeof out->reason, "%.*s", (int)strcspn(version, "\n,"), version);
#endif
    return 0;
}

/* ---- types and ops -------------------------------------------------------- */

/* MPI's user functions take no context, so the core's kernels (one per
 * process, whichever communicator's host) are kept here when MPI starts. */
static int (*half_reduce)(void *inout, const void *in, size_t count, int dtype, int op);

#define HALF_OP(NAME_, DT, OP)                                                  \
    static void NAME_(void *in, void *inout, int *len, MPI_Datatype *dt)        \
    {                                                                           \
        (void)dt;                                                               \
        half_reduce(inout, in, (size_t)*len, DT, OP);                           \
    }
HALF_OP(f16_sum, PLX_F16, PLX_SUM)
HALF_OP(f16_prod, PLX_F16, PLX_PROD)
HALF_OP(f16_min, PLX_F16, PLX_MIN)
HALF_OP(f16_max, PLX_F16, PLX_MAX)
HALF_OP(bf16_sum, PLX_BF16, PLX_SUM)
HALF_OP(bf16_prod, PLX_BF16, PLX_PROD)
HALF_OP(bf16_min, PLX_BF16, PLX_MIN)
HALF_OP(bf16_max, PLX_BF16, PLX_MAX)

static void make_half_types(void)
{
    MPI_User_function *fns[2][4] = {{f16_sum, f16_prod, f16_min, f16_max}, {bf16_sum, bf16_prod, bf16_min, bf16_max}};
    MPI_Type_contiguous(2, MPI_BYTE, &half_type);
    MPI_Type_commit(&half_type);
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 4; o++)
            MPI_Op_create(fns[d][o], 1, &half_ops[d][o]);
}

static MPI_Datatype mpi_type(int dt)
{
    switch (dt) {
    case PLX_I8: return MPI_INT8_T;
    case PLX_U8: return MPI_UINT8_T;
    case PLX_I32: return MPI_INT32_T;
    case PLX_U32: return MPI_UINT32_T;
    case PLX_I64: return MPI_INT64_T;
    case PLX_U64: return MPI_UINT64_T;
    case PLX_F32: return MPI_FLOAT;
    case PLX_F64: return MPI_DOUBLE;
    default: return half_type;
    }
}

static MPI_Op mpi_op(int dt, int op)
{
    if (dt == PLX_F16 || dt == PLX_BF16)
        return half_ops[dt == PLX_BF16][op];
    switch (op) {
    case PLX_PROD: return MPI_PROD;
    case PLX_MIN: return MPI_MIN;
    case PLX_MAX: return MPI_MAX;
    case PLX_BAND: return MPI_BAND; /* integers only: the core refuses bitwise floats */
    case PLX_BOR: return MPI_BOR;
    case PLX_BXOR: return MPI_BXOR;
    default: return MPI_SUM;
    }
}

/* ---- communicators ------------------------------------------------------ */

struct impl {
    const struct plx_host *host; /* this communicator's services (ABI 1.5) */
    MPI_Comm comm;
    MPI_Comm core_comm;  /* a dup for the core's generic algorithms (tags with PLX_TAG_CORE_BIT) */
    int rank, size, aborted;
    int is_world;        /* comm is MPI_COMM_WORLD itself (never freed) */
    int orphans;         /* collectives given up while pending (MPI still owns them) */
    int tag_ub;          /* MPI_TAG_UB of this MPI */
    int abort_kills_job; /* [mpi-*] abort_kills_job, read at comm_create */
    int blocking_timeout; /* [mpi-*] blocking_timeout: blocking calls also go through MPI_I* */
    int native_collv;     /* [mpi-*] native_collv: alltoallv/allgatherv through MPI (else the core's) */
    int check_counts;     /* [mpi-*] check_counts: compare the ranks' v-counts before each call */
    int logged_v;         /* the first native v-collective was logged */
    struct req *spare;    /* the last collective request freed, for the next one */
};

struct req {
    MPI_Request r;
    void *tmp;            /* a staging copy for in-place forms MPI spells differently */
    void *copy_to;        /* on completion: copy_bytes from copy_from to copy_to */
    const void *copy_from;
    size_t copy_bytes;
    int *ints;            /* a v-collective's counts and displacements as MPI's int */
    int done, status, is_coll, is_v;
};

/* A collective's request: the one the last collective left (collectives
 * come one after another, so one spare saves the allocation on each), else
 * a new one. Point-to-point requests live in the core's memory (req_size). */
static struct req *coll_req_get(struct impl *c)
{
    struct req *q = __atomic_exchange_n(&c->spare, NULL, __ATOMIC_ACQ_REL);
    if (q) {
        memset(q, 0, sizeof *q);
        return q;
    }
    return calloc(1, sizeof *q);
}

/* What a blocking collective that MPI completed inside collective() hands
 * back: done and succeeded, read-only, never freed (req_free knows it). */
static struct req done_req = {.done = 1, .is_coll = 1};

static void coll_req_put(struct impl *c, struct req *q)
{
    free(q->tmp);
    free(q->ints);
    free(__atomic_exchange_n(&c->spare, q, __ATOMIC_ACQ_REL));
}

/* Open MPI's ULFM (mpirun --with-ft ulfm sets OMPI_MCA_mpi_ft_enable) ends
 * MPI_Finalize with a PMIx fence over every process of the job, the dead
 * ones too, and after a rank died that fence can wait forever (Open MPI
 * issue 11404; survivors of a SIGKILL hung there now and then). Its FT
 * finalize already shrinks to the survivors and runs a barrier among them
 * first, so the fence adds no safety there: skip it (the documented MCA
 * parameter async_mpi_finalize), unless the user set that parameter. */
static int ulfm_finalize_without_fence(void)
{
    const char *ft = getenv("OMPI_MCA_mpi_ft_enable");
    if (strcmp(IMPL, "Open MPI") != 0 || !ft || !*ft || !strcmp(ft, "0") || !strcasecmp(ft, "false") ||
        !strcasecmp(ft, "no") || getenv("OMPI_MCA_async_mpi_finalize"))
        return 0;
    return setenv("OMPI_MCA_async_mpi_finalize", "1", 0) == 0; /* read by MPI_Init */
}

static int init_mpi(const struct plx_host *host)
{
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int nofence = ulfm_finalize_without_fence();
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return mpi_fail(host, rc, "MPI_Init_thread");
        we_initialized = 1;
        if (nofence) {
            int rank = -1;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            host->log(host->ctx, PLX_LOG_DEBUG, NAME ": ULFM job: rank %d's MPI_Finalize skips its fence over "
                      "dead processes (OMPI_MCA_async_mpi_finalize=1)", rank);
        }
    } else {
        MPI_Query_thread(&provided); /* the host's choice: respect it */
    }
    serialize = provided < MPI_THREAD_MULTIPLE;
    if (half_type == MPI_DATATYPE_NULL) {
        half_reduce = host->reduce;
        make_half_types();
    }
    return 0;
}

/* Our communicators return errors instead of ending the job (MPI's default),
 * so a failure becomes a plexus status with a message. */
static void setup_comm(struct impl *c, MPI_Comm comm)
{
    int *ub = NULL, flag = 0;
    c->comm = comm;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
    c->tag_ub = flag && ub ? *ub : 32767; /* 32767: the least the standard allows */
    /* The core's tags (bit 63) do not fit MPI's: its traffic gets its own
     * context, where they are folded into MPI's range (core_tag). */
    if (MPI_Comm_dup(comm, &c->core_comm) == MPI_SUCCESS)
        MPI_Comm_set_errhandler(c->core_comm, MPI_ERRORS_RETURN);
    else
        c->core_comm = MPI_COMM_NULL;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
}

static int comm_create(const struct plx_comm_args *a, void **out)
{
    const struct plx_host *host = a->host;
    char reason[256];
    if (launcher_reason(reason, sizeof reason) != PLX_PROBE_USABLE)
        return plx_plugin_error(host, PLX_ERR_UNAVAILABLE, NAME ": %s", reason);
    if (finalized)
        return plx_plugin_error(host, PLX_ERR_INVALID_USAGE, NAME ": MPI was finalized (plx_finalize) and cannot be initialised again");
    int rc = init_mpi(host);
    if (rc)
        return rc;
    int wr, ws;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    long launched = strtol(getenv(OWN_ENV), NULL, 10); /* set: launcher_reason checked it */
    if (launched != ws) /* e.g. a library of another build than the launcher: MPI would run as singletons */
        return plx_plugin_error(host, PLX_ERR_BROKEN, NAME ": %s started %ld ranks (%s) but MPI_COMM_WORLD has %d: "
                    "the MPI library and the launcher do not belong together", LAUNCHER, launched, OWN_ENV, ws);
    if (a->size != ws || a->rank != wr)
        return plx_plugin_error(host, PLX_ERR_INVALID_ARG, NAME ": MPI says rank %d of %d but plexus was given rank %d of %d", wr, ws,
                    a->rank, a->size);
    struct impl *c = calloc(1, sizeof *c);
    if (!c)
        return plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    lock();
    /* Our own context, so our traffic never mixes with the host's: a dup of
     * the world. But when plexus initialized MPI nobody else uses the world,
     * and MPICH runs small collectives on a dup slower than on the world
     * itself: the first communicator takes MPI_COMM_WORLD itself. */
    if (we_initialized && !__atomic_exchange_n(&world_taken, 1, __ATOMIC_ACQ_REL)) {
        c->comm = MPI_COMM_WORLD;
        c->is_world = 1;
        rc = MPI_SUCCESS;
    } else {
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    }
    if (rc == MPI_SUCCESS)
        setup_comm(c, c->comm);
    unlock();
    c->host = host;
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_fail(host, rc, "MPI_Comm_dup");
    }
    host->log(host->ctx, PLX_LOG_DEBUG, NAME ": '%s' is rank %d of %d on %s, MPI thread level %s", a->name, c->rank,
              c->size, c->is_world ? "MPI_COMM_WORLD" : "a dup of MPI_COMM_WORLD",
              serialize ? "below MULTIPLE (calls serialized)" : "MULTIPLE");
    /* Typed, through the communicator's view (ABI 1.3): under the `mpi`
     * alias that is [mpi], under this plugin's own drop-in [NAME]. */
    c->abort_kills_job = plx_plugin_config_bool(host, a->config, "abort_kills_job", 0);
    c->blocking_timeout = plx_plugin_config_bool(host, a->config, "blocking_timeout", 0);
    c->native_collv = plx_plugin_config_bool(host, a->config, "native_collv", 1);
    c->check_counts = plx_plugin_config_bool(host, a->config, "check_counts", 0);
    *out = c;
    return 0;
}

static int comm_split(void *comm, int color, int key, const struct plx_comm_args *a, void **out)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    MPI_Comm nc;
    lock();
    int rc = MPI_Comm_split(c->comm, color < 0 ? MPI_UNDEFINED : color, key, &nc);
    struct impl *n = NULL;
    if (rc == MPI_SUCCESS && nc != MPI_COMM_NULL && (n = calloc(1, sizeof *n)))
        setup_comm(n, nc);
    unlock();
    if (rc != MPI_SUCCESS)
        return mpi_fail(host, rc, "MPI_Comm_split");
    *out = NULL;
    if (nc == MPI_COMM_NULL)
        return 0;
    if (!n) {
        MPI_Comm_free(&nc);
        return plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    }
    n->host = c->host;
    n->abort_kills_job = c->abort_kills_job;
    n->blocking_timeout = c->blocking_timeout;
    n->native_collv = c->native_collv;
    n->check_counts = c->check_counts;
    if (a && (a->rank != n->rank || a->size != n->size)) {
        MPI_Comm_free(&nc);
        free(n);
        return plx_plugin_error(host, PLX_ERR_INTERNAL, NAME ": split disagrees with the core's ordering");
    }
    *out = n;
    return 0;
}

/* MPI may be gone: finalized by us, or by a host that initialized it and
 * finalized before destroying its communicators. */
static int mpi_gone(void)
{
    int fin = 0;
    MPI_Finalized(&fin); /* callable at any time */
    return finalized || fin;
}

static int comm_destroy(void *comm)
{
    struct impl *c = comm;
    if (c->is_world && !c->aborted && !__atomic_load_n(&c->orphans, __ATOMIC_ACQUIRE))
        __atomic_store_n(&world_taken, 0, __ATOMIC_RELEASE); /* else stale collectives could match a later user */
    else if (!c->aborted && !mpi_gone()) {
        lock();
        MPI_Comm_free(&c->comm);
        unlock();
    }
    if (c->core_comm != MPI_COMM_NULL && !c->aborted && !mpi_gone()) {
        lock();
        MPI_Comm_free(&c->core_comm);
        unlock();
    }
    free(c->spare);
    free(c);
    return 0;
}

/* abort_kills_job: MPI_Abort ends every rank of the job. MPICH 5 returns
 * from it once it has asked the process manager to, which then ends this
 * process too: wait for that, and end the process ourselves only if the
 * launcher has not within ABORT_GRACE_S (the one exit a plugin makes, and
 * only when asked to end the job). */
#define ABORT_GRACE_S 10

static int comm_abort(void *comm)
{
    struct impl *c = comm;
    if (c->abort_kills_job) {
        MPI_Abort(c->comm, 1);
        for (int i = 0; i < ABORT_GRACE_S * 10; i++) {
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
        }
        _exit(1);
    }
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    return 0;
}

/* plx_comm_revoke through ULFM's MPIX_Comm_revoke, on both of the
 * communicator's contexts: MPI then fails every pending and later
 * operation on them, on every rank, with MPIX_ERR_REVOKED. */
static int comm_revoke(void *comm)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    const struct mpi_ulfm *u = mpi__ulfm(IMPL);
    if (!u->usable)
        return plx_plugin_error(host, PLX_ERR_UNSUPPORTED, NAME ": cannot revoke: ULFM is absent (%s)", u->why);
    lock();
    int rc = u->revoke(c->comm);
    if (rc == MPI_SUCCESS && c->core_comm != MPI_COMM_NULL)
        rc = u->revoke(c->core_comm);
    unlock();
    return rc == MPI_SUCCESS ? 0 : mpi_fail(host, rc, "MPIX_Comm_revoke");
}

/* Which ranks of old made it into shrunk: alive[r] = 1 for each. */
static int survivors(MPI_Comm old, MPI_Comm shrunk, int old_size, unsigned char *alive)
{
    MPI_Group og, ng;
    int n = 0;
    int rc = MPI_Comm_group(old, &og);
    if (rc != MPI_SUCCESS)
        return rc;
    if ((rc = MPI_Comm_group(shrunk, &ng)) != MPI_SUCCESS) {
        MPI_Group_free(&og);
        return rc;
    }
    MPI_Group_size(ng, &n);
    int *in = malloc(2 * (size_t)n * sizeof *in);
    if (!in) {
        rc = MPI_ERR_NO_MEM;
    } else {
        for (int i = 0; i < n; i++)
            in[i] = i;
        rc = MPI_Group_translate_ranks(ng, n, in, og, in + n);
        memset(alive, 0, (size_t)old_size);
        for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
            if (in[n + i] >= 0 && in[n + i] < old_size)
                alive[in[n + i]] = 1;
        free(in);
    }
    MPI_Group_free(&ng);
    MPI_Group_free(&og);
    return rc;
}

/* plx_comm_shrink through ULFM's MPIX_Comm_shrink, whose own agreement
 * finds the survivors: MPI knows which processes failed, the job's store
 * (if any) only which ranks stopped answering. */
static int comm_shrink(void *comm, unsigned char *alive, int agreed, const struct plx_comm_args *a, void **out)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    const struct mpi_ulfm *u = mpi__ulfm(IMPL);
    if (!u->usable)
        return plx_plugin_error(host, PLX_ERR_UNSUPPORTED, NAME ": cannot shrink: ULFM is absent (%s)", u->why);
    unsigned char *want = NULL;
    if (agreed && !(want = malloc((size_t)c->size)))
        return plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    if (want)
        memcpy(want, alive, (size_t)c->size);
    MPI_Comm nc = MPI_COMM_NULL;
    struct impl *n = NULL;
    lock();
    int rc = u->shrink(c->comm, &nc);
    const char *what = "MPIX_Comm_shrink";
    if (rc == MPI_SUCCESS && (rc = survivors(c->comm, nc, c->size, alive)) != MPI_SUCCESS)
        what = "MPI_Group_translate_ranks";
    if (rc == MPI_SUCCESS && (n = calloc(1, sizeof *n)))
        setup_comm(n, nc);
    unlock();
    if (rc != MPI_SUCCESS) {
        free(want);
        if (nc != MPI_COMM_NULL)
            MPI_Comm_free(&nc);
        return mpi_fail(host, rc, what);
    }
    int differs = want && memcmp(want, alive, (size_t)c->size) != 0;
    free(want);
    if (!n || differs) {
        if (n && n->core_comm != MPI_COMM_NULL)
            MPI_Comm_free(&n->core_comm);
        MPI_Comm_free(&nc);
        free(n);
        return n ? plx_plugin_error(host, PLX_ERR_INTERNAL, NAME ": MPIX_Comm_shrink kept other ranks than the "
                                    "core's agreement on '%s'", a->name)
                 : plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    }
    n->host = c->host;
    n->abort_kills_job = c->abort_kills_job;
    n->blocking_timeout = c->blocking_timeout;
    n->native_collv = c->native_collv;
    n->check_counts = c->check_counts;
    host->log(host->ctx, PLX_LOG_DEBUG, NAME ": '%s' is rank %d of %d after MPIX_Comm_shrink", a->name, n->rank,
              n->size);
    *out = n;
    return 0;
}

static void finalize(void)
{
    if (we_initialized && !finalized) {
        finalized = 1;
        if (half_type != MPI_DATATYPE_NULL) {
            for (int d = 0; d < 2; d++)
                for (int o = 0; o < 4; o++)
                    MPI_Op_free(&half_ops[d][o]);
            MPI_Type_free(&half_type);
        }
        MPI_Finalize();
    }
}

/* ---- alltoallv / allgatherv (ABI 1.4) ----------------------------------- */

static const char *vname(int coll)
{
    return coll == PLX_COLL_ALLTOALLV ? "alltoallv" : "allgatherv";
}

/* The layout as MPI's ints in q->ints: send counts, send displacements,
 * receive counts, receive displacements (allgatherv: the receive half).
 * Refuses a value above INT_MAX, naming the rank and the index. */
static int v_ints(struct impl *c, const struct plx_coll_args *a, struct req *q)
{
    const struct plx_host *host = c->host;
    size_t P = (size_t)c->size;
    const size_t *src[4] = {a->send_counts, a->send_displs, a->recv_counts, a->recv_displs};
    static const char *const names[4] = {"send count", "send displacement", "receive count", "receive displacement"};
    if (!(q->ints = malloc(4 * P * sizeof *q->ints)))
        return plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; src[k] && i < P; i++) {
            if (src[k][i] > INT_MAX)
                return plx_plugin_error(host, PLX_ERR_UNSUPPORTED,
                                        NAME ": %s: rank %d: %s %zu at index %zu exceeds MPI's int (%d); use a "
                                        "backend without that limit (tcp)", vname(a->coll), c->rank,
                                        names[k], src[k][i], i, INT_MAX);
            q->ints[k * P + i] = (int)src[k][i];
        }
    return 0;
}

/* [mpi-*] check_counts: MPI does not compare the ranks' counts (a larger
 * block than expected may surface as MPI_ERR_TRUNCATE on the receiver, a
 * smaller one not at all), so this asks every rank what it sends each peer
 * (one small alltoall or allgather) and, with one allgather more, makes
 * every rank refuse the call alike, naming the first disagreeing pair. Off
 * by default: two extra exchanges per call double a small call's latency. */
static int check_counts(struct impl *c, const struct plx_coll_args *a)
{
    const struct plx_host *host = c->host;
    int P = c->size, me = c->rank, a2a = a->coll == PLX_COLL_ALLTOALLV;
    uint64_t *say = malloc((size_t)P * sizeof *say), *peer = malloc((size_t)P * sizeof *peer);
    uint64_t mine[3] = {UINT64_MAX, 0, 0}, *all = malloc(3 * (size_t)P * sizeof *all);
    int rc = MPI_SUCCESS;
    if (!say || !peer || !all) {
        free(say);
        free(peer);
        free(all);
        return plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    }
    for (int i = 0; i < P; i++)
        say[i] = a2a ? a->send_counts[i] : a->recv_counts[me];
    rc = a2a ? MPI_Alltoall(say, 1, MPI_UINT64_T, peer, 1, MPI_UINT64_T, c->comm)
             : MPI_Allgather(say, 1, MPI_UINT64_T, peer, 1, MPI_UINT64_T, c->comm);
    for (int i = 0; rc == MPI_SUCCESS && i < P; i++)
        if (peer[i] != a->recv_counts[i]) { /* rank i sends peer[i] to me */
            mine[0] = (uint64_t)i * (uint64_t)P + (uint64_t)me;
            mine[1] = peer[i];
            mine[2] = a->recv_counts[i];
            break;
        }
    if (rc == MPI_SUCCESS)
        rc = MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, c->comm);
    int bad = -1;
    for (int k = 0; rc == MPI_SUCCESS && k < P; k++)
        if (all[3 * k] != UINT64_MAX && (bad < 0 || all[3 * k] < all[3 * bad]))
            bad = k;
    uint64_t b[3] = {0, 0, 0};
    if (bad >= 0)
        memcpy(b, all + 3 * bad, sizeof b);
    free(say);
    free(peer);
    free(all);
    if (rc != MPI_SUCCESS)
        return mpi_fail(host, rc, "check_counts' exchange");
    if (bad < 0)
        return 0;
    int from = (int)(b[0] / (uint64_t)P), to = (int)(b[0] % (uint64_t)P);
    return plx_plugin_error(host, PLX_ERR_MISMATCH,
                            NAME ": %s: rank %d sends %llu elements to rank %d, rank %d expects %llu from rank %d "
                            "(index %d)%s", vname(a->coll), from, (unsigned long long)b[1], to, to,
                            (unsigned long long)b[2], from, from, to == me || from == me ? "" : " (found by check_counts)");
}

/* MPI's word for a block larger than the receiver expects, in plexus's terms. */
static int v_fail(const struct impl *c, int rc, const char *what)
{
    const struct plx_host *host = c->host;
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
        return plx_plugin_error(host, PLX_ERR_MISMATCH,
                                NAME ": %s: rank %d received more elements from some rank than its receive counts "
                                "say (MPI_ERR_TRUNCATE): the ranks' counts disagree; set [" NAME "] check_counts = "
                                "true to name the ranks and the index", what, c->rank);
    return mpi_fail(host, rc, what);
}

static int start_v(struct impl *c, const struct plx_coll_args *a, struct req *q, int now)
{
    size_t es = plx_plugin_dtype_size(a->dtype), P = (size_t)c->size, me = (size_t)c->rank;
    MPI_Datatype t = mpi_type(a->dtype);
    const int *sc = q->ints, *sd = q->ints + P, *rc = q->ints + 2 * P, *rd = q->ints + 3 * P;
    const void *s = a->send;
    void *r = a->recv;
    MPI_Comm cm = c->comm;
    if (a->coll == PLX_COLL_ALLGATHERV) {
        s = (const char *)s == (char *)r + (size_t)rd[me] * es ? MPI_IN_PLACE : s;
        return now ? MPI_Allgatherv(s, rc[me], t, r, rc, rd, t, cm)
                   : MPI_Iallgatherv(s, rc[me], t, r, rc, rd, t, cm, &q->r);
    }
    if (s == r) { /* stage the outgoing blocks, as for alltoall */
        size_t ext = 0;
        for (size_t i = 0; i < P; i++)
            if (sc[i] && (size_t)sd[i] + (size_t)sc[i] > ext)
                ext = (size_t)sd[i] + (size_t)sc[i];
        if (!(q->tmp = malloc(ext * es + 1)))
            return -1;
        memcpy(q->tmp, s, ext * es);
        s = q->tmp;
    }
    return now ? MPI_Alltoallv(s, sc, sd, t, r, rc, rd, t, cm)
               : MPI_Ialltoallv(s, sc, sd, t, r, rc, rd, t, cm, &q->r);
}

/* ---- operations ----------------------------------------------------------- */

/* Start a collective, or with `now` run MPI's blocking form (its tuned
 * algorithms are faster than the nonblocking schedules) and complete q. */
static int start(struct impl *c, const struct plx_coll_args *a, struct req *q, int now)
{
    size_t es = plx_plugin_dtype_size(a->dtype), n = a->count, P = (size_t)c->size, me = (size_t)c->rank;
    MPI_Datatype t = mpi_type(a->dtype);
    MPI_Op op = mpi_op(a->dtype, a->op);
    const void *s = a->send;
    void *r = a->recv;
    int cnt = (int)n, root = a->root, is_root = c->rank == root;
    MPI_Comm cm = c->comm;
    if (now)
        q->done = 1;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE:
        s = s == r ? MPI_IN_PLACE : s;
        return now ? MPI_Allreduce(s, r, cnt, t, op, cm) : MPI_Iallreduce(s, r, cnt, t, op, cm, &q->r);
    case PLX_COLL_BROADCAST:
        return now ? MPI_Bcast(r, cnt, t, root, cm) : MPI_Ibcast(r, cnt, t, root, cm, &q->r);
    case PLX_COLL_REDUCE:
        s = is_root && s == r ? MPI_IN_PLACE : s;
        return now ? MPI_Reduce(s, r, cnt, t, op, root, cm) : MPI_Ireduce(s, r, cnt, t, op, root, cm, &q->r);
    case PLX_COLL_ALLGATHER:
        s = (const char *)s == (char *)r + me * n * es ? MPI_IN_PLACE : s;
        return now ? MPI_Allgather(s, cnt, t, r, cnt, t, cm) : MPI_Iallgather(s, cnt, t, r, cnt, t, cm, &q->r);
    case PLX_COLL_REDUCE_SCATTER:
        if ((char *)r == (const char *)s + me * n * es) { /* plexus in place: result lands on our own block */
            if (!(q->tmp = malloc(n * es + 1)))
                return -1;
            q->copy_to = r;
            q->copy_from = q->tmp;
            q->copy_bytes = n * es;
            r = q->tmp;
        }
        if (!now)
            return MPI_Ireduce_scatter_block(s, r, cnt, t, op, cm, &q->r);
        int rc = MPI_Reduce_scatter_block(s, r, cnt, t, op, cm);
        if (rc == MPI_SUCCESS && q->copy_bytes)
            memcpy(q->copy_to, q->copy_from, q->copy_bytes);
        return rc;
    case PLX_COLL_GATHER:
        s = is_root && (const char *)s == (char *)r + me * n * es ? MPI_IN_PLACE : s;
        return now ? MPI_Gather(s, cnt, t, r, cnt, t, root, cm) : MPI_Igather(s, cnt, t, r, cnt, t, root, cm, &q->r);
    case PLX_COLL_SCATTER:
        r = is_root && (const char *)r == (const char *)s + me * n * es ? MPI_IN_PLACE : r;
        return now ? MPI_Scatter(s, cnt, t, r, cnt, t, root, cm) : MPI_Iscatter(s, cnt, t, r, cnt, t, root, cm, &q->r);
    case PLX_COLL_ALLTOALLV:
    case PLX_COLL_ALLGATHERV:
        return start_v(c, a, q, now);
    case PLX_COLL_ALLTOALL:
        if (s == r) { /* stage the outgoing blocks: in-place nonblocking alltoall is not portable */
            if (!(q->tmp = malloc(n * es * P + 1)))
                return -1;
            memcpy(q->tmp, s, n * es * P);
            s = q->tmp;
        }
        return now ? MPI_Alltoall(s, cnt, t, r, cnt, t, cm) : MPI_Ialltoall(s, cnt, t, r, cnt, t, cm, &q->r);
    default:
        return now ? MPI_Barrier(cm) : MPI_Ibarrier(cm, &q->r);
    }
}

static int collective(void *comm, const struct plx_coll_args *a, void **out)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    if (a->count > 0x7fffffff)
        return plx_plugin_error(host, PLX_ERR_UNSUPPORTED, NAME ": %zu elements exceed MPI's int counts", a->count);
    /* MPI's blocking calls are faster than its nonblocking schedules, but
     * cannot time out: blocking_timeout = true trades the speed for the timeout. */
    int now = PLX_HAS_FIELD(a, struct plx_coll_args, flags) && (a->flags & PLX_COLL_FLAG_BLOCKING) &&
              !c->blocking_timeout;
    /* A blocking call completes here: its request lives on this stack, and
     * done_req goes back. */
    struct req stack = {0}, *q = now ? &stack : coll_req_get(c);
    if (!q)
        return plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory");
    q->is_coll = 1;
    q->is_v = a->coll == PLX_COLL_ALLTOALLV || a->coll == PLX_COLL_ALLGATHERV;
    int rc = q->is_v ? v_ints(c, a, q) : 0;
    if (rc == 0 && q->is_v && c->check_counts) {
        lock();
        rc = check_counts(c, a);
        unlock();
    }
    if (rc == 0) {
        if (q->is_v && !__atomic_exchange_n(&c->logged_v, 1, __ATOMIC_ACQ_REL))
            host->log(host->ctx, PLX_LOG_DEBUG, NAME ": rank %d: %s runs natively (MPI_%s%s)", c->rank,
                      vname(a->coll), now ? "" : "I",
                      a->coll == PLX_COLL_ALLTOALLV ? "alltoallv" : "allgatherv");
        lock();
        rc = start(c, a, q, now);
        unlock();
        if (rc != MPI_SUCCESS)
            rc = rc == -1 ? plx_plugin_error(host, PLX_ERR_NOMEM, NAME ": out of memory")
                 : q->is_v ? v_fail(c, rc, now ? "MPI_Alltoallv/MPI_Allgatherv" : "starting a v-collective")
                           : mpi_fail(host, rc, "starting a collective");
    }
    if (rc != 0 || now) {
        if (q == &stack) {
            free(q->tmp);
            free(q->ints);
        } else {
            coll_req_put(c, q);
        }
        if (rc == 0)
            *out = &done_req;
        return rc;
    }
    *out = q;
    return 0;
}

/* ---- prepared collectives (ABI 1.12) --------------------------------------- */

/* What every run of a prepared allreduce passes MPI, looked up once; the
 * other collectives run through start() with a request of the run's own
 * (whose staging copy for an in-place form is made anew each run). */
struct prepared {
    struct plx_coll_args a;
    MPI_Datatype t;
    MPI_Op op;
    const void *s; /* MPI_IN_PLACE for plexus's in-place allreduce */
    int cnt;
};

static int coll_prepare(void *comm, const struct plx_coll_args *a, void **out)
{
    struct impl *c = comm;
    if (c->blocking_timeout) /* each run must time out: the core's path through MPI_I* + MPI_Test */
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, NAME ": blocking_timeout: runs go through MPI_I*");
    if (a->count > 0x7fffffff || a->coll == PLX_COLL_ALLTOALLV || a->coll == PLX_COLL_ALLGATHERV)
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, NAME ": not prepared: a v-collective, or %zu "
                                "elements (more than MPI's int counts)", a->count);
    struct prepared *p = calloc(1, sizeof *p);
    if (!p)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, NAME ": out of memory");
    p->a = *a;
    p->t = mpi_type(a->dtype);
    p->op = mpi_op(a->dtype, a->op);
    p->s = a->send == a->recv ? MPI_IN_PLACE : a->send;
    p->cnt = (int)a->count;
    *out = p;
    return 0;
}

static int coll_run(void *comm, void *prep, uint64_t seq)
{
    (void)seq;
    struct impl *c = comm;
    struct prepared *p = prep;
    int rc;
    lock();
    if (p->a.coll == PLX_COLL_ALLREDUCE) {
        rc = MPI_Allreduce(p->s, p->a.recv, p->cnt, p->t, p->op, c->comm);
    } else {
        struct req q = {0};
        rc = start(c, &p->a, &q, 1);
        free(q.tmp);
    }
    unlock();
    if (rc == MPI_SUCCESS)
        return 0;
    return rc == -1 ? plx_plugin_error(c->host, PLX_ERR_NOMEM, NAME ": out of memory")
                    : mpi_fail(c->host, rc, "a prepared collective");
}

static void coll_unprepare(void *comm, void *prep)
{
    (void)comm;
    free(prep);
}

/* A core tag (sequence number << 24 | step) folded into [0, tag_ub]. Both
 * ends fold alike; two messages between one pair that fold to one tag are
 * still matched in order (MPI does not overtake), as the core's algorithms
 * post them in the same order on both ends. */
static int core_tag(const struct impl *c, uint64_t tag)
{
    uint64_t seq = (tag >> 24) & UINT64_C(0x3fffffffff), step = tag & 0xffffffu;
    return (int)((step + seq * 4099u) % ((uint64_t)c->tag_ub + 1));
}

static int p2p(void *comm, const struct plx_p2p_args *a, void **out, int is_send)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    MPI_Comm mc = c->comm;
    int tag = (int)a->tag;
    if (a->tag & PLX_TAG_CORE_BIT) {
        if (c->core_comm == MPI_COMM_NULL)
            return plx_plugin_error(host, PLX_ERR_UNSUPPORTED, NAME ": no MPI context for the core's algorithms (MPI_Comm_dup failed)");
        mc = c->core_comm;
        tag = core_tag(c, a->tag);
    } else if (a->tag > (uint64_t)c->tag_ub) {
        return plx_plugin_error(host, PLX_ERR_INVALID_ARG, NAME ": tag %llu is above this MPI's limit %d (MPI_TAG_UB)",
                    (unsigned long long)a->tag, c->tag_ub);
    }
    if (a->bytes > 0x7fffffff)
        return plx_plugin_error(host, PLX_ERR_UNSUPPORTED, NAME ": messages above 2 GiB are not supported");
    struct req *q = *out; /* the core's memory (req_size) */
    if (!q)
        return plx_plugin_error(host, PLX_ERR_INVALID_USAGE, NAME ": no request memory (req_size) from the core");
    memset(q, 0, sizeof *q);
    lock();
    int rc = is_send ? MPI_Isend(a->buf, (int)a->bytes, MPI_BYTE, a->peer, tag, mc, &q->r)
                     : MPI_Irecv(a->buf, (int)a->bytes, MPI_BYTE, a->peer == PLX_ANY_SOURCE ? MPI_ANY_SOURCE : a->peer,
                                 tag, mc, &q->r);
    unlock();
    if (rc != MPI_SUCCESS)
        return mpi_fail(host, rc, is_send ? "MPI_Isend" : "MPI_Irecv");
    *out = q;
    return 0;
}

static int isend(void *comm, const struct plx_p2p_args *a, void **out)
{
    return p2p(comm, a, out, 1);
}

static int irecv(void *comm, const struct plx_p2p_args *a, void **out)
{
    return p2p(comm, a, out, 0);
}

static int test(void *comm, void *req, int *done)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    struct req *q = req;
    if (q->done) {
        *done = 1;
        return q->status;
    }
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return plx_plugin_error(host, PLX_ERR_ABORTED, NAME ": communicator aborted");
    int flag = 0;
    lock();
    int rc = MPI_Test(&q->r, &flag, MPI_STATUS_IGNORE); /* drives MPICH's progress */
    unlock();
    if (rc != MPI_SUCCESS) {
        q->done = 1;
        q->status = q->is_v ? v_fail(c, rc, "MPI_Test") : mpi_fail(host, rc, "MPI_Test");
    } else if (flag) {
        if (q->copy_bytes)
            memcpy(q->copy_to, q->copy_from, q->copy_bytes);
        q->done = 1;
    }
    *done = q->done;
    return q->done ? q->status : 0;
}

static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    const struct plx_host *host = ((struct impl *)comm)->host;
    uint64_t deadline = plx_plugin_deadline(timeout_ms);
    for (unsigned spins = 0;; spins++) {
        int done = 0, rc = test(comm, req, &done);
        if (done || rc)
            return rc;
        if (host->clock_ns() >= deadline)
            return plx_plugin_error(host, PLX_ERR_TIMEOUT, NAME ": not complete after %lld ms", (long long)timeout_ms);
        plx_plugin_poll_pause(spins);
    }
}

static void req_free(void *comm, void *req)
{
    struct impl *c = comm;
    const struct plx_host *host = c->host;
    struct req *q = req;
    if (q == &done_req)
        return;
    if (!q->done && !mpi_gone()) { /* never block */
        if (q->is_coll) {
            /* MPI forbids cancelling or freeing a pending collective, and it
             * may still touch the staging copy: both stay allocated (this
             * happens only after a timeout or an abort). */
            __atomic_add_fetch(&c->orphans, 1, __ATOMIC_ACQ_REL);
            host->log(host->ctx, PLX_LOG_WARN, NAME ": a pending collective was given up; its request is left to MPI");
            return;
        }
        lock();
        if (MPI_Cancel(&q->r) == MPI_SUCCESS)
            MPI_Request_free(&q->r);
        unlock();
    }
    if (q->is_coll)
        coll_req_put(c, q);
    /* a point-to-point request is in the core's memory, which it keeps */
}

/* native_collv = false leaves the v-collectives to the core; the masks
 * decide the rest. */
static int op_supported(void *comm, int coll, int dtype, int op, int mem_kind)
{
    (void)dtype;
    (void)op;
    (void)mem_kind;
    const struct impl *c = comm;
    if (coll == PLX_COLL_ALLTOALLV || coll == PLX_COLL_ALLGATHERV)
        return c && c->native_collv;
    return 1;
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    struct plx_caps caps = {
        .struct_size = size,
        .flags = PLX_CAP_SPLIT | PLX_CAP_THREAD_SAFE | PLX_CAP_INPLACE | PLX_CAP_MULTI_NODE | PLX_CAP_ANY_SOURCE |
                 PLX_CAP_P2P | PLX_CAP_OWN_BOOTSTRAP |
                 (mpi__ulfm(IMPL)->usable ? PLX_CAP_NATIVE_SHRINK | PLX_CAP_SHRINK_AGREES : 0),
        /* alltoallv/allgatherv: the core routes them here only at minor 4+ */
        .collectives = (PLX_BIT(PLX_COLL_SEND) - 1) | PLX_BIT(PLX_COLL_ALLTOALLV) | PLX_BIT(PLX_COLL_ALLGATHERV),
        .dtypes = PLX_BIT(PLX_DTYPE_COUNT) - 1,
        .redops = PLX_BIT(PLX_SUM) | PLX_BIT(PLX_PROD) | PLX_BIT(PLX_MIN) | PLX_BIT(PLX_MAX) | PLX_BIT(PLX_BAND) |
                  PLX_BIT(PLX_BOR) | PLX_BIT(PLX_BXOR),
        .mem_kinds = PLX_BIT(PLX_MEM_HOST),
        .max_message_bytes = 0x7fffffff,
    };
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    return 0;
}

static const struct plx_key keys[] = {
    {"abort_kills_job", PLX_KEY_BOOL, "false", NULL,
     "plx_comm_abort calls MPI_Abort, which ends every rank of the job (this one too: it does not return)"},
    {"blocking_timeout", PLX_KEY_BOOL, "false", NULL,
     "blocking collectives run as MPI_I* + MPI_Test so the timeout applies (MPI's blocking calls, the default, "
     "are faster but wait forever for a missing rank)"},
    {"native_collv", PLX_KEY_BOOL, "true", NULL,
     "alltoallv and allgatherv run through MPI_(I)alltoallv / MPI_(I)allgatherv; false leaves them to the core's "
     "generic pairwise exchange over MPI point-to-point (for comparison)"},
    {"check_counts", PLX_KEY_BOOL, "false", NULL,
     "before each native alltoallv / allgatherv, exchange the counts and refuse the call on every rank if two "
     "ranks disagree, naming them and the index (two small extra exchanges per call; MPI itself reports only a "
     "block larger than expected, as MPI_ERR_TRUNCATE)"},
    {NULL, 0, NULL, NULL, NULL},
};

/* The description says what ULFM the loaded library offers (plexus-info
 * prints it); filled when the plugin is loaded, before the core reads it. */
static char description[768];

__attribute__((constructor)) static void describe(void)
{
#if defined(PLX_MPI_ABI)
    const char *why = mpi__abi_load();
    if (why) {
        snprintf(description, sizeof description, "MPI through the MPI-5 standard ABI: %s", why);
        return;
    }
#endif
    const struct mpi_ulfm *u = mpi__ulfm(IMPL);
    snprintf(description, sizeof description,
             "%s through its nonblocking collectives (start with %s); revoke: %s; shrink: %s; grow: no "
             "(the core grows a communicator through the job's store, which this plugin does not bootstrap on); "
             "ULFM: %s", IMPL, LAUNCHER, u->usable ? "MPIX_Comm_revoke (ULFM)" : "no, ULFM is absent",
             u->usable ? "MPIX_Comm_shrink (ULFM)" : "no, ULFM is absent", u->why);
}

static const struct plx_backend backend = { /* description filled at load */
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = NAME,
    .version = "0.1.0",
    .description = description,
    .keys = keys,
    .probe = probe,
    .comm_create = comm_create,
    .get_caps = get_caps,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .isend = isend,
    .irecv = irecv,
    .collective = collective,
    .test = test,
    .wait = wait_req,
    .req_free = req_free,
    .req_size = sizeof(struct req),
    .comm_split = comm_split,
    .finalize = finalize,
    .op_supported = op_supported,
    .comm_revoke = comm_revoke,
    .comm_shrink = comm_shrink,
    .coll_prepare = coll_prepare,
    .coll_run = coll_run,
    .coll_unprepare = coll_unprepare,
};

/* One entry, one host: the `mpi` alias is the loader's ([mpi] alias = ...),
 * which hands this plugin's operations out under that name. */
PLX_PLUGIN_ENTRY(backend, entry_host, 5)
