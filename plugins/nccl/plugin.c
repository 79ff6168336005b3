/* plugin.c - the NCCL backend: collectives on CUDA memory through NCCL,
 * loaded at run time (libs.c). Rank 0 creates a fresh unique id per
 * communicator and publishes it in the communicator's store; init is
 * nonblocking and polled with a timeout; each operation records a CUDA event
 * so test() never blocks; a watchdog thread polls ncclCommGetAsyncError and
 * aborts the communicator on an error. No NCCL or CUDA call is made from
 * atexit or a destructor: only from these entry points.
 *
 * Its tests (suite gpu) need an NVIDIA GPU with NCCL and exit 77 without. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elastic.h"
#include "libs.h"


static const char *nerr(ncclResult_t r)
{
    return nc.ncclGetErrorString ? nc.ncclGetErrorString(r) : "NCCL error";
}

struct impl {
    const struct plx_host *host; /* this communicator's instance of the host services */
    ncclComm_t comm;
    int rank, size, device;
    CUcontext ctx;
    CUstream stream;        /* used when the caller passes none */
    CUdeviceptr flag;       /* one device byte: the barrier's allreduce */
    int64_t timeout_ms;
    pthread_t watchdog;
    pthread_mutex_t mu;
    int stop, failed;       /* failed: an async error or abort happened */
    char failed_msg[200];
};

struct req {
    CUevent ev;
    int done, status;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Poll a nonblocking communicator until it leaves ncclInProgress. */
static ncclResult_t settle(struct impl *c, int64_t timeout_ms)
{
    uint64_t deadline = plx_plugin_deadline(timeout_ms);
    ncclResult_t st = ncclInProgress;
    while (nc.ncclCommGetAsyncError(c->comm, &st) == ncclSuccess && st == ncclInProgress) {
        if (c->host->clock_ns() > deadline)
            return ncclInProgress;
        sleep_ms(1);
    }
    return st;
}

/* Abort with a bounded wait: ncclCommAbort can itself hang when peers are gone. */
static void *abort_thread(void *arg)
{
    nc.ncclCommAbort((ncclComm_t)arg);
    return NULL;
}

static void abort_bounded(struct impl *c)
{
    pthread_t t;
    if (!c->comm || pthread_create(&t, NULL, abort_thread, c->comm) != 0)
        return;
    for (int i = 0; i < 100 && pthread_tryjoin_np(t, NULL) != 0; i++)
        sleep_ms(50);
    if (pthread_tryjoin_np(t, NULL) != 0) {
        c->host->log(c->host->ctx, PLX_LOG_ERROR, "nccl: ncclCommAbort did not return within 5 s; leaving it");
        pthread_detach(t);
    }
    c->comm = NULL;
}

static void mark_failed(struct impl *c, const char *msg)
{
    pthread_mutex_lock(&c->mu);
    if (!c->failed) {
        c->failed = 1;
        snprintf(c->failed_msg, sizeof c->failed_msg, "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
}

static void *watchdog_main(void *arg)
{
    struct impl *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            return NULL;
        ncclResult_t st = ncclSuccess;
        if (c->comm && nc.ncclCommGetAsyncError(c->comm, &st) == ncclSuccess && st != ncclSuccess &&
            st != ncclInProgress) {
            char msg[200];
            snprintf(msg, sizeof msg, "nccl: asynchronous error on rank %d: %s", c->rank, nerr(st));
            mark_failed(c, msg);
            abort_bounded(c);
            return NULL;
        }
        sleep_ms(100);
    }
}

/* What NCCL_CONFIG_INITIALIZER does, plus nonblocking mode: the size and
 * version say which fields we know (the 2.28 layout, accepted by newer NCCL). */
static void init_config(plx_ncclConfig_t *cfg, const char *name)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    cfg->magic = NCCL_CONFIG_MAGIC;
    cfg->version = PLX_NCCL_VERSION(2, 28, 9);
    cfg->blocking = 0;
    cfg->cgaClusterSize = cfg->minCTAs = cfg->maxCTAs = NCCL_CONFIG_UNDEF_INT;
    cfg->splitShare = cfg->trafficClass = cfg->collnetEnable = cfg->CTAPolicy = NCCL_CONFIG_UNDEF_INT;
    cfg->shrinkShare = cfg->nvlsCTAs = cfg->nChannelsPerNetPeer = cfg->nvlinkCentricSched = NCCL_CONFIG_UNDEF_INT;
    cfg->netName = NULL;
    cfg->commName = name;
}

static int probe(struct plx_probe_result *out)
{
    out->state = nccl_libs_probe(out->reason, sizeof out->reason);
    return 0;
}

static int setup_device(struct impl *c, const struct plx_comm_args *a)
{
    int64_t dev = plx_plugin_config_int(c->host, a->config, "device", -1);
    int count = 0;
    cu.cuDeviceGetCount(&count);
    c->device = dev >= 0 ? (int)dev : (count ? a->local_rank % count : 0);
    CUdevice d;
    if (cu.cuDeviceGet(&d, c->device) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c->ctx, d) != CUDA_SUCCESS ||
        cu.cuCtxSetCurrent(c->ctx) != CUDA_SUCCESS || cu.cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cu.cuMemAlloc(&c->flag, 1) != CUDA_SUCCESS)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: rank %d cannot use CUDA device %d", c->rank, c->device);
    return 0;
}

static int start_comm(struct impl *c)
{
    c->stop = 0;
    if (pthread_create(&c->watchdog, NULL, watchdog_main, c) != 0)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: cannot start the watchdog thread");
    return 0;
}

/* A core of ABI 1.5 hands each communicator its own host services; an
 * older one has only the entry's. */
static const struct plx_host *host_of(const struct plx_comm_args *a, const struct plx_host *otherwise)
{
    return PLX_HAS_FIELD(a, struct plx_comm_args, host) && a->host ? a->host : otherwise;
}

static struct impl *new_impl(const struct plx_host *host, int rank, int size, int64_t timeout_ms)
{
    struct impl *c = calloc(1, sizeof *c);
    if (c) {
        c->host = host;
        c->rank = rank;
        c->size = size;
        c->timeout_ms = timeout_ms;
        pthread_mutex_init(&c->mu, NULL);
    }
    return c;
}

static int comm_create(const struct plx_comm_args *a, void **out)
{
    const struct plx_host *host = host_of(a, nccl_host);
    char reason[256];
    if (nccl_libs_probe(reason, sizeof reason) != PLX_PROBE_USABLE ||
        nccl_cuda_ready(reason, sizeof reason) != PLX_PROBE_USABLE)
        return plx_plugin_error(host, PLX_ERR_UNAVAILABLE, "nccl: %s", reason);
    if (!a->store)
        return plx_plugin_error(host, PLX_ERR_INVALID_USAGE, "nccl: needs a rendezvous store to share the unique id");
    struct impl *c = new_impl(host, a->rank, a->size, a->timeout_ms);
    if (!c)
        return plx_plugin_error(host, PLX_ERR_NOMEM, "nccl: out of memory");
    int rc = setup_device(c, a);
    ncclUniqueId id;
    if (!rc && a->rank == 0) { /* a fresh id per communicator, under its own name */
        ncclResult_t r = nc.ncclGetUniqueId(&id);
        rc = r != ncclSuccess ? plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: ncclGetUniqueId: %s", nerr(r))
                              : c->host->store_set(a->store, "nccl/unique-id", &id, sizeof id);
    } else if (!rc) {
        void *v = NULL;
        size_t len = 0;
        rc = c->host->store_get(a->store, "nccl/unique-id", &v, &len, plx_plugin_create_ms(a));
        if (!rc && len != sizeof id)
            rc = plx_plugin_error(c->host, PLX_ERR_PROTOCOL, "nccl: the unique id in the store has %zu bytes, not %d", len,
                      NCCL_UNIQUE_ID_BYTES);
        if (!rc)
            memcpy(&id, v, sizeof id);
        if (v)
            c->host->free(v);
    }
    if (!rc) {
        plx_ncclConfig_t cfg;
        init_config(&cfg, a->name);
        ncclResult_t r = nc.ncclCommInitRankConfig(&c->comm, a->size, id, a->rank, &cfg);
        if (r == ncclInProgress || r == ncclSuccess)
            r = settle(c, plx_plugin_create_ms(a));
        if (r == ncclInProgress) {
            abort_bounded(c);
            rc = plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "nccl: rank %d: communicator init not finished after %lld ms (a rank missing?)",
                      a->rank, (long long)plx_plugin_create_ms(a));
        } else if (r != ncclSuccess) {
            abort_bounded(c);
            rc = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: rank %d: ncclCommInitRankConfig: %s", a->rank, nerr(r));
        }
    }
    if (!rc)
        rc = start_comm(c);
    if (rc) {
        if (c->stream)
            cu.cuStreamDestroy(c->stream);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* A communicator made from parent's (split, shrink): its device and
 * context, a stream and flag of its own, its watchdog. */
static int adopt(const struct impl *parent, struct impl *s)
{
    s->device = parent->device;
    s->ctx = parent->ctx;
    cu.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
    cu.cuMemAlloc(&s->flag, 1);
    return start_comm(s);
}

static int comm_split(void *comm, int color, int key, const struct plx_comm_args *a, void **out)
{
    struct impl *c = comm;
    *out = NULL;
    ncclComm_t n = NULL;
    plx_ncclConfig_t cfg;
    init_config(&cfg, a ? a->name : NULL);
    ncclResult_t r = nc.ncclCommSplit(c->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &n, &cfg);
    if (r == ncclInProgress)
        r = settle(c, c->timeout_ms);
    if (r != ncclSuccess)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: ncclCommSplit: %s", nerr(r));
    if (color < 0 || !n)
        return 0;
    struct impl *s = new_impl(host_of(a, c->host), a->rank, a->size, a->timeout_ms);
    if (!s)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "nccl: out of memory");
    s->comm = n;
    int rc = adopt(c, s);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* ncclCommShrink (NCCL 2.27+, looked up at run time): the survivors the
 * core agreed on build their communicator without the excluded ranks;
 * NCCL_SHRINK_ABORT first ends what the parent still has in flight, which
 * after a failure never completes. */
typedef ncclResult_t (*shrink_fn)(ncclComm_t comm, int *exclude, int count, ncclComm_t *newcomm,
                                  plx_ncclConfig_t *config, int flags);
#define PLX_NCCL_SHRINK_ABORT 0x01

static int comm_shrink(void *comm, unsigned char *alive, int agreed, const struct plx_comm_args *a, void **out)
{
    struct impl *c = comm;
    *out = NULL;
    shrink_fn shrink = (shrink_fn)nccl_elastic.shrink;
    if (!shrink || !agreed) /* get_caps claims neither without ncclCommShrink, nor an agreement of its own */
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, "nccl: cannot shrink: %s", nccl_elastic.calls);
    int *exclude = malloc((size_t)c->size * sizeof *exclude), n = 0;
    if (!exclude)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "nccl: out of memory");
    for (int r = 0; r < c->size; r++)
        if (!alive[r])
            exclude[n++] = r;
    plx_ncclConfig_t cfg;
    init_config(&cfg, a->name);
    ncclComm_t nc_new = NULL;
    ncclResult_t r = shrink(c->comm, exclude, n, &nc_new, &cfg, PLX_NCCL_SHRINK_ABORT);
    free(exclude);
    if ((r != ncclSuccess && r != ncclInProgress) || !nc_new)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: ncclCommShrink: %s",
                                r != ncclSuccess && r != ncclInProgress ? nerr(r) : "no communicator");
    struct impl *s = new_impl(host_of(a, c->host), a->rank, a->size, a->timeout_ms);
    if (!s) {
        nc.ncclCommAbort(nc_new);
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "nccl: out of memory");
    }
    s->comm = nc_new;
    if (r == ncclInProgress && settle(s, plx_plugin_create_ms(a)) == ncclInProgress) {
        abort_bounded(s);
        free(s);
        return plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "nccl: ncclCommShrink not finished after %lld ms",
                                (long long)plx_plugin_create_ms(a));
    }
    int rc = adopt(c, s);
    if (rc) {
        nc.ncclCommAbort(nc_new);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void stop_watchdog(struct impl *c)
{
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->watchdog, NULL);
}

static int comm_destroy(void *comm)
{
    struct impl *c = comm;
    stop_watchdog(c);
    if (c->comm) {
        /* Finalize is collective; if it cannot finish in time, abort. */
        ncclResult_t r = nc.ncclCommFinalize(c->comm);
        if (r == ncclInProgress || r == ncclSuccess)
            r = settle(c, c->timeout_ms);
        if (r == ncclSuccess)
            nc.ncclCommDestroy(c->comm);
        else
            abort_bounded(c);
    }
    if (c->stream)
        cu.cuStreamDestroy(c->stream);
    if (c->flag)
        cu.cuMemFree(c->flag);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return 0;
}

static int comm_abort(void *comm)
{
    struct impl *c = comm;
    mark_failed(c, "nccl: communicator aborted");
    abort_bounded(c);
    return 0;
}

static ncclDataType_t ntype(int dt)
{
    static const ncclDataType_t t[PLX_DTYPE_COUNT] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64,
                                                      ncclUint64, ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};
    return t[dt];
}

static ncclRedOp_t nop(int op)
{
    static const ncclRedOp_t o[PLX_AVG + 1] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg}; /* no bitwise ops */
    return o[op];
}

/* Gather, scatter and alltoall as grouped point-to-point. */
static ncclResult_t grouped(struct impl *c, const struct plx_coll_args *a, cudaStream_t st)
{
    size_t n = a->count, b = n * plx_plugin_dtype_size(a->dtype);
    ncclDataType_t t = ntype(a->dtype);
    const char *s = a->send;
    char *r = a->recv;
    ncclResult_t rc = nc.ncclGroupStart();
    for (int p = 0; rc == ncclSuccess && p < c->size; p++) {
        switch (a->coll) {
        case PLX_COLL_GATHER:
            if (c->rank == a->root)
                rc = nc.ncclRecv(r + (size_t)p * b, n, t, p, c->comm, st);
            if (rc == ncclSuccess && p == a->root)
                rc = nc.ncclSend(s, n, t, p, c->comm, st);
            break;
        case PLX_COLL_SCATTER:
            if (c->rank == a->root)
                rc = nc.ncclSend(s + (size_t)p * b, n, t, p, c->comm, st);
            if (rc == ncclSuccess && p == a->root)
                rc = nc.ncclRecv(r, n, t, p, c->comm, st);
            break;
        default: /* alltoall */
            rc = nc.ncclSend(s + (size_t)p * b, n, t, p, c->comm, st);
            if (rc == ncclSuccess)
                rc = nc.ncclRecv(r + (size_t)p * b, n, t, p, c->comm, st);
        }
    }
    ncclResult_t e = nc.ncclGroupEnd();
    return rc != ncclSuccess ? rc : e;
}

/* alltoallv and allgatherv (ABI 1.4) as grouped point-to-point on the
 * stream, self included (NCCL pairs a rank's send to itself with its
 * receive). Empty blocks are skipped on both ends: each end knows its
 * count. NCCL cannot tell two ranks that disagree on a count; such a call
 * hangs until the communicator's timeout (use [core] fingerprint_native or
 * a backend with point-to-point run generically to find them). */
static ncclResult_t grouped_v(struct impl *c, const struct plx_coll_args *a, cudaStream_t st)
{
    size_t es = plx_plugin_dtype_size(a->dtype), me = (size_t)c->rank;
    ncclDataType_t t = ntype(a->dtype);
    const char *s = a->send;
    char *r = a->recv;
    int a2a = a->coll == PLX_COLL_ALLTOALLV;
    const char *own = r + a->recv_displs[me] * es;
    ncclResult_t rc = nc.ncclGroupStart();
    for (int p = 0; rc == ncclSuccess && p < c->size; p++) {
        size_t sn = a2a ? a->send_counts[p] : a->recv_counts[me], rn = a->recv_counts[p];
        const char *sp = a2a ? s + a->send_displs[p] * es : s;
        if (!a2a && (size_t)p == me && s == own)
            continue; /* allgatherv in place: our block is already there */
        if (sn)
            rc = nc.ncclSend(sp, sn, t, p, c->comm, st);
        if (rc == ncclSuccess && rn)
            rc = nc.ncclRecv(r + a->recv_displs[p] * es, rn, t, p, c->comm, st);
    }
    ncclResult_t e = nc.ncclGroupEnd();
    return rc != ncclSuccess ? rc : e;
}

static int enqueue(struct impl *c, cudaStream_t st, ncclResult_t r, const char *what, void **out)
{
    if (r != ncclSuccess && r != ncclInProgress)
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: %s on rank %d: %s", what, c->rank, nerr(r));
    struct req *q = calloc(1, sizeof *q);
    if (!q)
        return plx_plugin_error(c->host, PLX_ERR_NOMEM, "nccl: out of memory");
    if (cu.cuEventCreate(&q->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS || cu.cuEventRecord(q->ev, st) != CUDA_SUCCESS) {
        free(q);
        return plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: cannot record a completion event for %s", what);
    }
    *out = q;
    return 0;
}

static int collective(void *comm, const struct plx_coll_args *a, void **out)
{
    struct impl *c = comm;
    pthread_mutex_lock(&c->mu);
    int failed = c->failed;
    pthread_mutex_unlock(&c->mu);
    if (failed || !c->comm)
        return plx_plugin_error(c->host, PLX_ERR_ABORTED, "%s", c->failed_msg);
    if (a->mem_kind != PLX_MEM_CUDA)
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, "nccl: %s needs CUDA memory (pass mem_kind PLX_MEM_CUDA)",
                    a->coll == PLX_COLL_ALLREDUCE ? "allreduce" : "this collective");
    /* Grouped send/recv on one buffer would read blocks while others land
     * on them: refused before anything is enqueued (same on every rank
     * that passes send == recv). */
    if (a->coll == PLX_COLL_ALLTOALLV && a->send == a->recv)
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED,
                                "nccl: alltoallv in place (send == recv) on rank %d: pass a separate send buffer",
                                c->rank);
    cudaStream_t st = a->stream ? (cudaStream_t)a->stream : c->stream;
    cu.cuCtxSetCurrent(c->ctx);
    ncclDataType_t t = ntype(a->dtype);
    ncclResult_t r;
    size_t n = a->count;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE: r = nc.ncclAllReduce(a->send, a->recv, n, t, nop(a->op), c->comm, st); break;
    case PLX_COLL_BROADCAST: r = nc.ncclBroadcast(a->recv, a->recv, n, t, a->root, c->comm, st); break;
    case PLX_COLL_REDUCE: r = nc.ncclReduce(a->send, a->recv, n, t, nop(a->op), a->root, c->comm, st); break;
    case PLX_COLL_ALLGATHER: r = nc.ncclAllGather(a->send, a->recv, n, t, c->comm, st); break;
    case PLX_COLL_REDUCE_SCATTER: r = nc.ncclReduceScatter(a->send, a->recv, n, t, nop(a->op), c->comm, st); break;
    case PLX_COLL_BARRIER: /* a one-byte allreduce */
        r = nc.ncclAllReduce((void *)c->flag, (void *)c->flag, 1, ncclUint8, ncclSum, c->comm, st);
        break;
    case PLX_COLL_ALLTOALLV:
    case PLX_COLL_ALLGATHERV: r = grouped_v(c, a, st); break;
    default: r = grouped(c, a, st); break;
    }
    return enqueue(c, st, r, "collective", out);
}

static int p2p(void *comm, const struct plx_p2p_args *a, void **out, int is_send)
{
    struct impl *c = comm;
    if (a->mem_kind != PLX_MEM_CUDA)
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, "nccl: send/recv needs CUDA memory");
    if (a->peer == PLX_ANY_SOURCE)
        return plx_plugin_error(c->host, PLX_ERR_UNSUPPORTED, "nccl: no receive from any source");
    cudaStream_t st = a->stream ? (cudaStream_t)a->stream : c->stream;
    cu.cuCtxSetCurrent(c->ctx);
    ncclResult_t r = nc.ncclGroupStart();
    if (r == ncclSuccess)
        r = is_send ? nc.ncclSend(a->buf, a->bytes, ncclUint8, a->peer, c->comm, st)
                    : nc.ncclRecv(a->buf, a->bytes, ncclUint8, a->peer, c->comm, st);
    ncclResult_t e = nc.ncclGroupEnd();
    return enqueue(c, st, r != ncclSuccess ? r : e, is_send ? "send" : "recv", out);
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
    struct req *q = req;
    if (!q->done) {
        pthread_mutex_lock(&c->mu);
        int failed = c->failed;
        pthread_mutex_unlock(&c->mu);
        CUresult r = cu.cuEventQuery(q->ev);
        if (failed) {
            q->done = 1;
            q->status = plx_plugin_error(c->host, PLX_ERR_ABORTED, "%s", c->failed_msg);
        } else if (r == CUDA_SUCCESS) {
            q->done = 1;
        } else if (r != CUDA_ERROR_NOT_READY) {
            q->done = 1;
            q->status = plx_plugin_error(c->host, PLX_ERR_SYSTEM, "nccl: CUDA error %d while waiting on rank %d", r, c->rank);
        }
    }
    *done = q->done;
    return q->done ? q->status : 0;
}

static int wait_req(void *comm, void *req, int64_t timeout_ms)
{
    struct impl *c = comm;
    uint64_t deadline = plx_plugin_deadline(timeout_ms);
    for (;;) {
        int done = 0, rc = test(comm, req, &done);
        if (done)
            return rc;
        if (c->host->clock_ns() > deadline) {
            /* A collective that does not finish in time will not finish: abort. */
            char msg[200];
            snprintf(msg, sizeof msg, "nccl: rank %d: operation not finished after %lld ms; communicator aborted",
                     c->rank, (long long)timeout_ms);
            mark_failed(c, msg);
            abort_bounded(c);
            return plx_plugin_error(c->host, PLX_ERR_TIMEOUT, "%s", msg);
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static void req_free(void *comm, void *req)
{
    (void)comm;
    struct req *q = req;
    if (q->ev)
        cu.cuEventDestroy(q->ev);
    free(q);
}

static int get_caps(void *comm, struct plx_caps *out)
{
    (void)comm;
    uint32_t size = out->struct_size;
    int v = nccl_version;
    struct plx_caps caps = {
        .struct_size = size,
        .flags = PLX_CAP_ASYNC | PLX_CAP_ABORT | PLX_CAP_SPLIT | PLX_CAP_INPLACE | PLX_CAP_MULTI_NODE | PLX_CAP_P2P |
                 (nccl_elastic.shrink ? PLX_CAP_NATIVE_SHRINK : 0),
        /* alltoallv/allgatherv: routed here by a core of ABI 1.4+ only */
        .collectives = (PLX_BIT(PLX_COLL_SEND) - 1) | PLX_BIT(PLX_COLL_ALLTOALLV) | PLX_BIT(PLX_COLL_ALLGATHERV),
        .dtypes = (PLX_BIT(PLX_DTYPE_COUNT) - 1) & ~(v >= PLX_NCCL_VERSION(2, 10, 0) ? 0u : PLX_BIT(PLX_BF16)),
        .redops = (PLX_BIT(PLX_AVG + 1) - 1) & ~(v >= PLX_NCCL_VERSION(2, 10, 0) ? 0u : PLX_BIT(PLX_AVG)),
        .mem_kinds = PLX_BIT(PLX_MEM_CUDA),
    };
    memcpy(out, &caps, size < sizeof caps ? size : sizeof caps);
    return 0;
}

static const struct plx_key keys[] = {
    {"library_path", PLX_KEY_STRING, NULL, NULL,
     "Folder searched for libcuda.so.1 and libnccl.so.2 after the system's path"},
    {"driver_gpus", PLX_KEY_STRING, NULL, NULL,
     "Folder with one entry per GPU of the NVIDIA kernel driver, which the probe counts instead of "
     "initialising CUDA (unset: /proc/driver/nvidia/gpus, else the /dev/nvidiaN nodes)"},
    {"device", PLX_KEY_UINT, NULL, NULL,
     "CUDA device ordinal for every rank of the communicator (unset: LOCAL_RANK modulo the device count)"},
    {NULL, 0, NULL, NULL, NULL},
};

static const struct plx_backend backend = {
    .struct_size = sizeof(struct plx_backend),
    .abi_minor = PLX_ABI_MINOR,
    .name = "nccl",
    .version = "0.1.0",
    .description = "NVIDIA NCCL on CUDA memory (loaded at run time)",
    .keys = keys,
    .probe = probe,
    .get_caps = get_caps,
    .comm_create = comm_create,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .isend = isend,
    .irecv = irecv,
    .collective = collective,
    .test = test,
    .wait = wait_req,
    .req_free = req_free,
    .comm_split = comm_split,
    .comm_revoke = nccl_comm_revoke,
    .comm_shrink = comm_shrink,
};

/* ABI 1.3 at least: nccl reads its keys typed, through the communicator's view. */
PLX_PLUGIN_ENTRY(backend, nccl_host, 3)
