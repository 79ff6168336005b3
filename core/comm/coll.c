/* coll.c - the public collective and point-to-point entry points: check
 * arguments once, then run natively in the backend or through the core's
 * generic algorithms, or refuse with PLX_ERR_UNSUPPORTED before any call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callname.h"
#include "collv.h"
#include "comm.h"
#include "diag_hooks.h"
#include "hier.h"
#include "cuda_mem.h"
#include "error.h"
#include "reduce.h"

static int elem_ok(int dtype)
{
    return dtype >= 0 && dtype < PLX_DTYPE_COUNT;
}

/* Elements in the larger of the two buffers of coll, for overflow checks. */
static int total_elems(const struct plx_comm *c, int coll, size_t count, size_t *out)
{
    size_t mult = 1;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_GATHER ||
        coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL)
        mult = (size_t)c->size;
    if (count && mult > SIZE_MAX / count)
        return -1;
    *out = count * mult;
    return 0;
}

/* Elements this rank sends and receives, and whether it does either. */
void plx__coll_extent(const struct plx_comm *c, const struct plx_coll_args *a, size_t *sn, size_t *rn, int *use_send,
                      int *use_recv)
{
    size_t n = a->count, np = a->count * (size_t)c->size; /* coll.c checked the product */
    int root = c->rank == a->root;
    *sn = *rn = n;
    *use_send = *use_recv = 1;
    switch (a->coll) {
    case PLX_COLL_BROADCAST: *use_send = root; break;
    case PLX_COLL_REDUCE: *use_recv = root; break;
    case PLX_COLL_ALLGATHER: *rn = np; break;
    case PLX_COLL_REDUCE_SCATTER: *sn = np; break;
    case PLX_COLL_GATHER: *rn = np; *use_recv = root; break;
    case PLX_COLL_SCATTER: *sn = np; *use_send = root; break;
    case PLX_COLL_ALLTOALL: *sn = *rn = np; break;
    case PLX_COLL_BARRIER: *sn = *rn = 0; break;
    default: break;
    }
}

int plx__check_usable(struct plx_comm *c, const char *what)
{
    if (__atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE))
        return plx__err(PLX_ERR_REVOKED, "%s on '%s': this rank revoked the communicator", what, c->name);
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return plx__err(PLX_ERR_ABORTED, "%s on '%s': the communicator was aborted", what, c->name);
    /* The common case costs one load: failed is published after its message. */
    if (!__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&c->mu);
    int failed = c->failed;
    char msg[sizeof c->failed_msg];
    memcpy(msg, c->failed_msg, sizeof msg);
    pthread_mutex_unlock(&c->mu);
    if (failed == PLX_ERR_REVOKED) /* a revoke stays what it is, on every later operation */
        return plx__err(PLX_ERR_REVOKED, "%s on '%s': the communicator was revoked (%s)", what, c->name, msg);
    if (failed)
        return plx__err(PLX_ERR_INVALID_USAGE,
                        "%s on '%s': the communicator is unusable after an earlier error (%s); destroy it and "
                        "create a new one", what, c->name, msg);
    return 0;
}

/* The memory kind of buf1/buf2: as the caller says, else as the CUDA driver
 * says (host when CUDA is not loaded). *staged (collectives only, may be
 * NULL): CUDA memory the backend cannot take, copied through host memory
 * because [core] cuda_staging is set; *mem is then PLX_MEM_HOST. */
static int resolve_mem(struct plx_comm *c, const struct plx_op_options *o, const char *what, const void *buf1,
                       const void *buf2, int *mem, int *staged)
{
    int asked = o && PLX_HAS_FIELD(o, struct plx_op_options, mem_kind) ? o->mem_kind : PLX_MEM_AUTO;
    if (asked == PLX_MEM_HOST || asked == PLX_MEM_CUDA)
        *mem = asked;
    else if (asked == PLX_MEM_AUTO)
        *mem = plx__cuda_kind2(buf1, buf2);
    else
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': invalid mem_kind %d", what, c->name, asked);
    if (staged)
        *staged = 0;
    /* 0 is the documented default: host memory only. */
    uint32_t kinds = c->caps.mem_kinds ? c->caps.mem_kinds : PLX_BIT(PLX_MEM_HOST);
    if (*mem == PLX_MEM_HOST && !(kinds & PLX_BIT(PLX_MEM_HOST)))
        return plx__err(PLX_ERR_UNSUPPORTED,
                        "%s: backend '%s' takes device memory only; pass CUDA buffers (or set "
                        "plx_op_options.mem_kind = PLX_MEM_CUDA)", what, c->be->name);
    if (*mem == PLX_MEM_CUDA && !(kinds & PLX_BIT(PLX_MEM_CUDA))) {
        int p2p = c->be->ops.isend && c->be->ops.irecv;
        if (staged && c->cuda_staging && p2p) {
            *staged = 1;
            *mem = PLX_MEM_HOST;
            return 0;
        }
        return plx__err(PLX_ERR_UNSUPPORTED,
                        "%s on '%s': backend '%s' cannot take CUDA memory (it handles host memory only). Fix: use "
                        "a backend with CUDA support (PLEXUS_BACKEND=nccl), pass host buffers, or %s",
                        what, c->name, c->be->name,
                        !staged ? "copy to host yourself (point-to-point calls are never staged)"
                        : !c->cuda_staging ? "set [core] cuda_staging = true (PLEXUS_CORE_CUDA_STAGING=1) to "
                                             "copy through host memory"
                                           : "use a backend with point-to-point (staging runs the core's "
                                             "generic algorithms)");
    }
    return 0;
}

static int64_t op_timeout(const struct plx_op_options *o)
{
    if (o && PLX_HAS_FIELD(o, struct plx_op_options, timeout_ms) && o->timeout_ms >= 0)
        return o->timeout_ms;
    return -1;
}

/* Can the backend run a natively? *scale_avg: run SUM and divide after. */
static int native_ok(struct plx_comm *c, struct plx_coll_args *a, int *scale_avg)
{
    const struct plx_caps *k = &c->caps;
    *scale_avg = 0;
    if (!c->be->ops.collective || !(k->collectives & PLX_BIT(a->coll)))
        return 0;
    /* The layout of a v-collective rides in fields ABI 1.4 added: a plugin
     * of an older minor never sees one, whatever bits its mask has (masks
     * such as PLX_BIT(PLX_COLL_SEND) - 1 stop below them, but a mask is the
     * plugin's word, not a promise about fields it cannot read). */
    if (plx__coll_is_v(a->coll) && c->be->abi_minor < 4)
        return 0;
    if (a->coll != PLX_COLL_BARRIER && !(k->dtypes & PLX_BIT(a->dtype)))
        return 0;
    int op = a->op;
    if (plx__call_has_op(a->coll)) {
        if (op == PLX_AVG && !(k->redops & PLX_BIT(PLX_AVG))) {
            op = PLX_SUM;
            *scale_avg = 1;
        }
        if (!(k->redops & PLX_BIT(op)))
            return 0;
    }
    int inplace = a->send == a->recv && a->coll != PLX_COLL_BROADCAST && a->coll != PLX_COLL_BARRIER;
    if (a->coll == PLX_COLL_ALLGATHERV && a->recv_counts) /* in place: send is our own block of recv */
        inplace = (const char *)a->send == (const char *)a->recv + a->recv_displs[c->rank] * plx_dtype_size(a->dtype);
    if (inplace && !(k->flags & PLX_CAP_INPLACE))
        return 0;
    if (c->be->ops.op_supported && !c->be->ops.op_supported(c->bc, a->coll, a->dtype, op, a->mem_kind))
        return 0;
    a->op = op;
    return 1;
}

static int generic_ok(const struct plx_comm *c, const struct plx_coll_args *a)
{
    return c->be->ops.isend && c->be->ops.irecv && a->mem_kind == PLX_MEM_HOST;
}

/* The arguments of a collective other than barrier: element type,
 * reduction, root, a count the address space holds, and the buffers this
 * rank needs. */
static int check_args(const struct plx_comm *c, const struct plx_coll_args *a, const char *what)
{
    size_t total;
    if (!elem_ok(a->dtype))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': invalid dtype %d", what, c->name, a->dtype);
    if (plx__call_has_op(a->coll) && (a->op < 0 || a->op >= PLX_REDOP_COUNT))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': invalid reduction op %d", what, c->name, a->op);
    /* Checked from the arguments alone, so every rank refuses alike, before any transfer. */
    if (plx__call_has_op(a->coll) && !plx__redop_takes(a->dtype, a->op))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': %s is a bitwise op, for integer types only, not %s", what,
                        c->name, plx_redop_name(a->op), plx_dtype_name(a->dtype));
    if (plx__call_has_root(a->coll) && (a->root < 0 || a->root >= c->size))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': root %d is not a rank of a communicator of size %d",
                        what, c->name, a->root, c->size);
    if (total_elems(c, a->coll, a->count, &total) != 0 || total > SIZE_MAX / plx_dtype_size(a->dtype))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': count %zu overflows the address space", what, c->name,
                        a->count);
    if (!a->count)
        return 0;
    /* Which buffers must exist on this rank. */
    int need_send = !(a->coll == PLX_COLL_SCATTER && c->rank != a->root) && a->coll != PLX_COLL_BROADCAST;
    int need_recv = !((a->coll == PLX_COLL_REDUCE || a->coll == PLX_COLL_GATHER) && c->rank != a->root);
    if ((need_send && !a->send) || (need_recv && !a->recv))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': %s buffer is NULL with count %zu", what, c->name,
                        need_send && !a->send ? "send" : "receive", a->count);
    return 0;
}

/* Run a on the backend's own collective (fingerprint checked first where
 * the communicator checks every native call); w NULL means blocking;
 * running: the op was posted as running already. */
static int run_native(struct plx_comm *c, struct plx_coll_args *a, const char *what, const struct plx__fp *fp,
                      int scale_avg, struct plx__lowp_avg *lowp, struct plx_work **w, int running)
{
    int rc;
    void *req = NULL;
    if ((plx__diag_checks(c) & PLX__DIAG_NATIVE_EVERY) && (rc = plx__diag_native_check(c, fp)) != 0) {
        char msg[sizeof c->failed_msg];
        plx__err_prefix("%s(seq %llu) on '%s' [%s]: ", what, (unsigned long long)a->seq, c->name, c->be->name);
        snprintf(msg, sizeof msg, "%s", plx_last_error());
        rc = plx__comm_fail(c, rc, msg, sizeof msg);
        plx__diag_state(c, a->seq, PLX__OP_FAILED, NULL);
        return plx__lowp_avg_end(lowp, rc);
    }
    if (!running)
        plx__diag_state(c, a->seq, PLX__OP_RUNNING, NULL);
    if ((rc = c->be->ops.collective(c->bc, a, &req)) != 0) {
        plx__diag_state(c, a->seq, PLX__OP_FAILED, NULL);
        plx__err_prefix("%s(seq %llu) on '%s' [%s]: ", what, (unsigned long long)a->seq, c->name, c->be->name);
        return plx__lowp_avg_end(lowp, rc);
    }
    if (w)
        return plx__work_native(c, a, scale_avg, lowp, req, w);
    /* A backend that ran the op inside collective() (shm, mpi's blocking
     * calls) answers the first test: no deadline to compute, no wait, and
     * where it succeeded and nothing is left to do with the result, no
     * work record either. */
    int done = 0;
    rc = c->be->ops.test(c->bc, req, &done);
    if (done && rc == 0 && !scale_avg && !lowp && !plx__coll_is_v(a->coll)) {
        c->be->ops.req_free(c->bc, req);
        plx__diag_state(c, a->seq, PLX__OP_DONE, NULL);
        return 0;
    }
    struct plx_work ws, *tmp = &ws;
    plx__work_native_init(tmp, c, a, scale_avg, lowp, req);
    if (done) {
        rc = plx__work_native_end(tmp, rc);
        plx__work_native_release(tmp);
        return rc;
    }
    /* The backend enforces the op's timeout itself and can say which rank
     * is missing; the core's wait is a backstop a little later. */
    int64_t t = a->timeout_ms >= 0 ? a->timeout_ms : c->timeout_ms;
    rc = plx_work_wait(tmp, plx_coll_backstop_ms(t));
    if (!tmp->done) {
        char msg[sizeof c->failed_msg];
        snprintf(msg, sizeof msg, "%s", plx_last_error());
        rc = plx__comm_fail(c, rc, msg, sizeof msg);
        plx__diag_state(c, a->seq, PLX__OP_FAILED, NULL);
        c->be->ops.req_free(c->bc, tmp->req); /* cancel: the caller's buffers are returned */
        tmp->req = NULL;
        tmp->done = 1;
        plx__err(rc, "%s", msg);
    }
    plx__work_native_release(tmp);
    return rc;
}

static int refuse(const struct plx_comm *c, const struct plx_coll_args *a, const char *what)
{
    if (c->be->ops.isend && c->be->ops.irecv) /* device memory: the generic algorithms reduce on the host */
        return plx__err(PLX_ERR_UNSUPPORTED,
                        "%s(%s, %s) on '%s': backend '%s' cannot run it natively, and the core's generic "
                        "algorithms take host memory only (pass host buffers)", what, plx_dtype_name(a->dtype),
                        plx__call_has_op(a->coll) ? plx_redop_name(a->op) : "-", c->name, c->be->name);
    return plx__err(PLX_ERR_UNSUPPORTED,
                    "%s(%s, %s) on '%s': backend '%s' cannot run it natively and has no point-to-point for the "
                    "core's generic algorithm (choose one that has, e.g. PLEXUS_BACKEND=tcp)", what,
                    plx_dtype_name(a->dtype), plx__call_has_op(a->coll) ? plx_redop_name(a->op) : "-", c->name,
                    c->be->name);
}

/* The checks every call makes first (the communicator, the arguments, the
 * memory kind), then its options into a. */
static int check_call(struct plx_comm *c, struct plx_coll_args *a, const struct plx_op_options *o, const char *what,
                      int *staged)
{
    int rc = plx__check_usable(c, what);
    if (rc)
        return rc;
    if (a->coll != PLX_COLL_BARRIER && (rc = check_args(c, a, what)) != 0)
        return rc;
    if ((rc = resolve_mem(c, o, what, a->send, a->recv, &a->mem_kind, staged)) != 0)
        return rc;
    a->timeout_ms = op_timeout(o);
    if (o && PLX_HAS_FIELD(o, struct plx_op_options, stream))
        a->stream = o->stream;
    return 0;
}

int plx__coll_plan(struct plx_comm *c, struct plx_coll_args *a, const struct plx_op_options *o, int *direct)
{
    const char *what = plx_coll_name(a->coll);
    *direct = 0;
    int staged;
    int rc = check_call(c, a, o, what, &staged);
    if (rc)
        return rc;
    if (plx__lowp_avg_needed(a) || plx__hier_wants(c, a))
        return 0; /* each run as submit runs it, which checks the rest */
    struct plx_coll_args n = *a;
    int scale_avg = 0;
    int native = !staged && native_ok(c, &n, &scale_avg);
    if (!native && !generic_ok(c, &n))
        return refuse(c, a, what);
    if (native && !scale_avg && !(plx__diag_checks(c) & PLX__DIAG_NATIVE_EVERY)) {
        *a = n;
        a->flags |= PLX_COLL_FLAG_BLOCKING;
        *direct = 1;
    }
    return 0;
}

/* Validate and run a collective; w NULL means blocking. */
static int submit(struct plx_comm *c, struct plx_coll_args *a, const struct plx_op_options *o, struct plx_work **w)
{
    const char *what = plx_coll_name(a->coll);
    plx__err_clear();
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "%s: comm is NULL", what);
    if (w)
        *w = NULL;
    int staged;
    int rc = check_call(c, a, o, what, &staged);
    if (rc)
        return rc;
    if (staged && plx__coll_is_v(a->coll))
        return plx__err(PLX_ERR_UNSUPPORTED, "%s on '%s': CUDA buffers are not staged for this collective on "
                        "backend '%s'; pass host buffers", what, c->name, c->be->name);
    if (staged)
        a->flags |= PLX__COLL_FLAG_STAGED;

    /* The call as made, for its fingerprint (low-precision AVG and native_ok
     * rewrite a below); its seq is set with a's. */
    struct plx__fp fp = plx__fp_of(a);
    uint64_t bytes = a->coll == PLX_COLL_BARRIER ? 0 : a->count * plx_dtype_size(a->dtype);
    /* f16/bf16 AVG runs as an f32 SUM of pre-divided copies (avg_lowp.c). */
    struct plx__lowp_avg *lowp = NULL;
    if (plx__lowp_avg_needed(a) && (rc = plx__lowp_avg_begin(c, a, &lowp)) != 0)
        return rc;
    if (plx__hier_wants(c, a)) { /* intra-host and inter-host backends composed (hier.c) */
        /* On the executor like a generic op: nonblocking returns at once,
         * and every op of c keeps its issue order. */
        a->seq = fp.seq = __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_RELAXED);
        a->flags |= PLX__COLL_FLAG_HIER;
        /* fp is checked before the steps (hier.c) */
        if (!w)
            return plx__lowp_avg_end(lowp, plx__run_generic_blocking(c, a, &fp));
        return plx__work_generic(c, a, lowp, &fp, w);
    }
    int scale_avg = 0;
    int native = !staged && native_ok(c, a, &scale_avg);
    if (!native && !generic_ok(c, a))
        return plx__lowp_avg_end(lowp, refuse(c, a, what));
    a->seq = fp.seq = __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_RELAXED);
    if (!w)
        a->flags |= PLX_COLL_FLAG_BLOCKING;
    /* A native call starts now, unless fingerprints are exchanged first. */
    int running = native && !(plx__diag_checks(c) & PLX__DIAG_NATIVE_EVERY);
    if (running)
        plx__diag_post_running(c, &fp, bytes);
    else
        plx__diag_post(c, &fp, bytes);

    if (native)
        return run_native(c, a, what, &fp, scale_avg, lowp, w, running);
    if (!w)
        return plx__lowp_avg_end(lowp, plx__run_generic_blocking(c, a, &fp));
    return plx__work_generic(c, a, lowp, &fp, w);
}

int plx__coll_submit(struct plx_comm *c, struct plx_coll_args *a, const struct plx_op_options *o,
                     struct plx_work **w)
{
    return submit(c, a, o, w);
}

#define ARGS(kind, s, r, n, dt, o, rt)                                                                   \
    struct plx_coll_args a = {.struct_size = sizeof a, .coll = (kind), .send = (s), .recv = (r),          \
                              .count = (n), .dtype = (dt), .op = (o), .root = (rt), .timeout_ms = -1}

PLX_API int plx_iallreduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op,
                           const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_ALLREDUCE, send, recv, count, dtype, op, 0);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "iallreduce: work is NULL");
}

PLX_API int plx_allreduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op)
{
    ARGS(PLX_COLL_ALLREDUCE, send, recv, count, dtype, op, 0);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_ibroadcast(struct plx_comm *c, void *buf, size_t count, int dtype, int root,
                           const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_BROADCAST, buf, buf, count, dtype, 0, root);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "ibroadcast: work is NULL");
}

PLX_API int plx_broadcast(struct plx_comm *c, void *buf, size_t count, int dtype, int root)
{
    ARGS(PLX_COLL_BROADCAST, buf, buf, count, dtype, 0, root);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_ireduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op, int root,
                        const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_REDUCE, send, recv, count, dtype, op, root);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "ireduce: work is NULL");
}

PLX_API int plx_reduce(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op, int root)
{
    ARGS(PLX_COLL_REDUCE, send, recv, count, dtype, op, root);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_iallgather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype,
                           const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_ALLGATHER, send, recv, count, dtype, 0, 0);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "iallgather: work is NULL");
}

PLX_API int plx_allgather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype)
{
    ARGS(PLX_COLL_ALLGATHER, send, recv, count, dtype, 0, 0);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_ireduce_scatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op,
                                const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_REDUCE_SCATTER, send, recv, count, dtype, op, 0);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "ireduce_scatter: work is NULL");
}

PLX_API int plx_reduce_scatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int op)
{
    ARGS(PLX_COLL_REDUCE_SCATTER, send, recv, count, dtype, op, 0);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_igather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root,
                        const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_GATHER, send, recv, count, dtype, 0, root);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "igather: work is NULL");
}

PLX_API int plx_gather(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root)
{
    ARGS(PLX_COLL_GATHER, send, recv, count, dtype, 0, root);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_iscatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root,
                         const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_SCATTER, send, recv, count, dtype, 0, root);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "iscatter: work is NULL");
}

PLX_API int plx_scatter(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype, int root)
{
    ARGS(PLX_COLL_SCATTER, send, recv, count, dtype, 0, root);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_ialltoall(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype,
                          const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_ALLTOALL, send, recv, count, dtype, 0, 0);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "ialltoall: work is NULL");
}

PLX_API int plx_alltoall(struct plx_comm *c, const void *send, void *recv, size_t count, int dtype)
{
    ARGS(PLX_COLL_ALLTOALL, send, recv, count, dtype, 0, 0);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_ibarrier(struct plx_comm *c, const struct plx_op_options *o, struct plx_work **w)
{
    ARGS(PLX_COLL_BARRIER, NULL, NULL, 0, PLX_U8, 0, 0);
    return w ? submit(c, &a, o, w) : plx__err(PLX_ERR_INVALID_ARG, "ibarrier: work is NULL");
}

PLX_API int plx_barrier(struct plx_comm *c)
{
    ARGS(PLX_COLL_BARRIER, NULL, NULL, 0, PLX_U8, 0, 0);
    return submit(c, &a, NULL, NULL);
}

PLX_API int plx_comm_native(const struct plx_comm *c, int coll, int dtype, int op)
{
    if (!c || coll < 0 || coll >= PLX_COLL_COUNT)
        return PLX_ERR_INVALID_ARG;
    if (plx__call_has_op(coll) && !plx__redop_takes(dtype, op)) /* a bitwise float, or out of range */
        return PLX_ERR_INVALID_ARG;
    struct plx_coll_args a = {.struct_size = sizeof a, .coll = coll, .dtype = dtype, .op = op,
                              .mem_kind = PLX_MEM_HOST};
    int scale;
    if (native_ok((struct plx_comm *)c, &a, &scale))
        return 1;
    return generic_ok(c, &a) ? 0 : PLX_ERR_UNSUPPORTED;
}

/* ---- point-to-point ----------------------------------------------------- */

static int p2p(struct plx_comm *c, int is_send, void *buf, size_t count, int dtype, int peer, int tag,
               const struct plx_op_options *o, struct plx_work **w)
{
    const char *what = is_send ? "send" : "recv";
    plx__err_clear();
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "%s: comm is NULL", what);
    int rc = plx__check_usable(c, what);
    if (rc)
        return rc;
    if (!elem_ok(dtype))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': invalid dtype %d", what, c->name, dtype);
    int any = !is_send && peer == PLX_ANY_SOURCE;
    if ((peer < 0 || peer >= c->size) && !any)
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': peer %d is not a rank of a communicator of size %d", what,
                        c->name, peer, c->size);
    if (any && !(c->caps.flags & PLX_CAP_ANY_SOURCE))
        return plx__err(PLX_ERR_UNSUPPORTED, "recv on '%s': backend '%s' cannot receive from any source", c->name,
                        c->be->name);
    if (tag < 0)
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': tag %d is negative (tags are 0 .. 2^31-1)", what, c->name,
                        tag);
    if (count > SIZE_MAX / plx_dtype_size(dtype) || (count && !buf))
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': bad buffer or count %zu", what, c->name, count);
    if (!c->be->ops.isend || !c->be->ops.irecv)
        return plx__err(PLX_ERR_UNSUPPORTED, "%s on '%s': backend '%s' has no point-to-point (choose one that has, "
                        "e.g. PLEXUS_BACKEND=tcp)", what, c->name,
                        c->be->name);
    int mem;
    if ((rc = resolve_mem(c, o, what, buf, NULL, &mem, NULL)) != 0)
        return rc;
    struct plx_p2p_args a = {
        .struct_size = sizeof a, .peer = peer, .buf = buf, .bytes = count * plx_dtype_size(dtype),
        .tag = (uint64_t)tag, .mem_kind = mem, .timeout_ms = op_timeout(o),
        .stream = o && PLX_HAS_FIELD(o, struct plx_op_options, stream) ? o->stream : NULL,
    };
    /* A backend with req_size (ABI 1.5) builds its request inside the work. */
    struct plx_work *own = NULL;
    if (c->be->ops.req_size && !(own = malloc(sizeof *own + c->be->ops.req_size)))
        return plx__err(PLX_ERR_NOMEM, "%s on '%s': out of memory", what, c->name);
    void *req = own ? own->req_mem : NULL;
    rc = is_send ? c->be->ops.isend(c->bc, &a, &req) : c->be->ops.irecv(c->bc, &a, &req);
    if (rc != 0) {
        free(own);
        plx__err_prefix("%s(rank %d, peer %d) on '%s' [%s]: ", what, c->rank, peer, c->name, c->be->name);
        return rc;
    }
    struct plx_coll_args ca = {.struct_size = sizeof ca, .coll = is_send ? PLX_COLL_SEND : PLX_COLL_RECV,
                               .send = buf, .recv = buf, .count = count, .dtype = dtype, .root = peer};
    struct plx_work *tmp = own;
    if (own)
        plx__work_native_init(own, c, &ca, 0, NULL, req);
    else if ((rc = plx__work_native(c, &ca, 0, NULL, req, &tmp)) != 0)
        return rc;
    if (w) {
        *w = tmp;
        return 0;
    }
    rc = plx_work_wait(tmp, PLX_TIMEOUT_DEFAULT);
    if (!tmp->done) {
        c->be->ops.req_free(c->bc, tmp->req);
        tmp->req = NULL;
        tmp->done = 1;
    }
    plx_work_free(tmp);
    return rc;
}

PLX_API int plx_isend(struct plx_comm *c, const void *buf, size_t count, int dtype, int peer, int tag,
                      const struct plx_op_options *o, struct plx_work **w)
{
    return w ? p2p(c, 1, (void *)buf, count, dtype, peer, tag, o, w)
             : plx__err(PLX_ERR_INVALID_ARG, "isend: work is NULL");
}

PLX_API int plx_send(struct plx_comm *c, const void *buf, size_t count, int dtype, int peer, int tag)
{
    return p2p(c, 1, (void *)buf, count, dtype, peer, tag, NULL, NULL);
}

PLX_API int plx_irecv(struct plx_comm *c, void *buf, size_t count, int dtype, int peer, int tag,
                      const struct plx_op_options *o, struct plx_work **w)
{
    return w ? p2p(c, 0, buf, count, dtype, peer, tag, o, w) : plx__err(PLX_ERR_INVALID_ARG, "irecv: work is NULL");
}

PLX_API int plx_recv(struct plx_comm *c, void *buf, size_t count, int dtype, int peer, int tag)
{
    return p2p(c, 0, buf, count, dtype, peer, tag, NULL, NULL);
}
