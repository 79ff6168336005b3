/* work.c - work handles, the per-communicator executor that runs generic
 * collectives in issue order, and the p2p adapter the algorithms drive. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "error.h"
#include "host.h"
#include "log.h"
#include "reduce.h"

/* ---- failure bookkeeping ---------------------------------------------- */

int plx__comm_fail(struct plx_comm *c, int status, char *msg, size_t len)
{
    status = plx__diag_explain(c, status, msg, len);
    plx__family_explain(c, status, msg, len);
    plx__err(status, "%s", msg);
    pthread_mutex_lock(&c->mu);
    if (!c->failed) {
        c->failed = status;
        snprintf(c->failed_msg, sizeof c->failed_msg, "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
    return status;
}

/* Errors that say nothing about the communicator's health. */
static int breaks_comm(int status)
{
    return status != 0 && status != PLX_ERR_INVALID_ARG && status != PLX_ERR_UNSUPPORTED &&
           status != PLX_ERR_INVALID_USAGE;
}

/* ---- p2p adapter -------------------------------------------------------- */

struct preq {
    void *req;
    struct plx__fp_io *fp; /* the first message to / from peer of a collective (fingerprint.c) */
    int peer;
    int is_send;
};

static int post_raw(struct plx_comm *c, int is_send, int peer, void *buf, size_t bytes, uint64_t tag, void **req)
{
    struct plx_p2p_args a = {
        .struct_size = sizeof a, .peer = peer, .buf = buf, .bytes = bytes, .tag = tag,
        .mem_kind = PLX_MEM_HOST, .timeout_ms = c->timeout_ms,
    };
    return is_send ? c->be->ops.isend(c->bc, &a, req) : c->be->ops.irecv(c->bc, &a, req);
}

static void free_raw(struct plx_comm *c, void *req);

static int start(struct plx_comm *c, int is_send, int peer, const void *buf, size_t bytes, uint64_t tag, void **out)
{
    struct preq *p = malloc(sizeof *p);
    if (!p)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    p->req = NULL;
    p->fp = NULL;
    int rc = plx__fp_wants(c, is_send, peer, tag)
                 ? plx__fp_start(c, is_send, peer, (void *)buf, bytes, tag, post_raw, free_raw, &p->fp)
                 : post_raw(c, is_send, peer, (void *)buf, bytes, tag, &p->req);
    if (rc != 0) {
        free(p);
        return rc;
    }
    p->peer = peer;
    p->is_send = is_send;
    *out = p;
    return 0;
}

static int a_isend(void *ctx, int peer, const void *buf, size_t bytes, uint64_t tag, void **req)
{
    return start(ctx, 1, peer, buf, bytes, tag, req);
}

static int a_irecv(void *ctx, int peer, void *buf, size_t bytes, uint64_t tag, void **req)
{
    return start(ctx, 0, peer, buf, bytes, tag, req);
}

/* Wait for a backend request until deadline_ns (0: no deadline). Checks the
 * abort flag between slices so plx_comm_abort unblocks even a backend
 * without comm_abort. Does not free the request. Returns the request's
 * status, or STILL_PENDING when the deadline passed first (distinct from a
 * request that itself ended in PLX_ERR_TIMEOUT). */
#define STILL_PENDING 1
static int wait_req(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer)
{
    const int64_t slice_ms = 100;
    unsigned spins = 0;
    uint64_t t0 = plx__clock_ns();
    for (;;) {
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
            return plx__err(PLX_ERR_ABORTED, "communicator '%s' was aborted", c->name);
        uint64_t now = plx__clock_ns();
        int slow = plx__diag_slow_wait(c, now - t0, peer); /* cheap until the wait is slow (ledger.c) */
        if (slow)
            return slow;
        if (deadline_ns && now >= deadline_ns) {
            int done = 0;
            int rc = c->be->ops.test(c->bc, req, &done);
            return done ? rc : STILL_PENDING;
        }
        if (c->be->ops.wait) {
            int64_t ms = deadline_ns ? (int64_t)((deadline_ns - now) / 1000000) + 1 : slice_ms;
            if (ms > slice_ms)
                ms = slice_ms;
            int rc = c->be->ops.wait(c->bc, req, ms);
            if (rc != PLX_ERR_TIMEOUT)
                return rc;
            /* A request that completed with a timeout of its own is done. */
            int done = 0;
            rc = c->be->ops.test(c->bc, req, &done);
            if (done)
                return rc;
        } else {
            int done = 0;
            int rc = c->be->ops.test(c->bc, req, &done);
            if (done)
                return rc;
            /* Back off: spin briefly for latency, then yield, then sleep. */
            if (++spins > 64) {
                if (spins < 256) {
                    sched_yield();
                } else {
                    struct timespec ts = {0, spins < 2048 ? 20000 : 200000};
                    nanosleep(&ts, NULL);
                }
            }
        }
    }
}

static int wait_raw(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer)
{
    uint64_t t0 = plx__clock_ns();
    int rc = wait_req(c, req, deadline_ns, peer);
    if (rc == STILL_PENDING)
        rc = plx__err(PLX_ERR_TIMEOUT, "rank %d waited %llu ms for rank %d on %s: timeout", c->rank,
                 (unsigned long long)((plx__clock_ns() - t0) / 1000000), peer, c->be->name);
    c->be->ops.req_free(c->bc, req);
    return rc;
}

static void free_raw(struct plx_comm *c, void *req)
{
    c->be->ops.req_free(c->bc, req);
}

static int a_wait(void *ctx, void *req, uint64_t deadline_ns)
{
    struct plx_comm *c = ctx;
    struct preq *p = req;
    int rc = p->fp ? plx__fp_wait(c, p->fp, deadline_ns, wait_raw, free_raw) : wait_raw(c, p->req, deadline_ns, p->peer);
    free(p);
    return rc;
}

static void a_discard(void *ctx, void *req)
{
    struct plx_comm *c = ctx;
    struct preq *p = req;
    if (p->fp)
        plx__fp_discard(c, p->fp, free_raw);
    else
        free_raw(c, p->req);
    free(p);
}

void plx__p2p_init(struct plx_comm *c)
{
    c->p2p = (struct plx__p2p){
        .ctx = c, .rank = c->rank, .size = c->size,
        .isend = a_isend, .irecv = a_irecv, .wait = a_wait, .discard = a_discard,
    };
}

/* ---- generic collectives ---------------------------------------------- */

static int run_generic(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp, char *errmsg,
                       size_t errlen)
{
    int64_t t = a->timeout_ms >= 0 ? a->timeout_ms : c->timeout_ms;
    uint64_t deadline = t == PLX_TIMEOUT_INFINITE ? 0 : plx__clock_ns() + (uint64_t)t * 1000000u;
    plx__ledger_state(c, a->seq, PLX__OP_RUNNING);
    plx__fp_begin(c, fp);
    int rc = a->flags & PLX__COLL_FLAG_STAGED ? plx__stage_run(c, a, deadline)
                                              : plx__algo_run(&c->p2p, &c->tuning, &c->scratch, a, deadline);
    plx__fp_begin(c, NULL);
    plx__ledger_state(c, a->seq, rc ? PLX__OP_FAILED : PLX__OP_DONE);
    if (rc != 0) {
        plx__err_prefix("%s(seq %llu) on '%s': ", plx_coll_name(a->coll), (unsigned long long)a->seq, c->name);
        snprintf(errmsg, errlen, "%s", plx_last_error());
        if (breaks_comm(rc))
            rc = plx__comm_fail(c, rc, errmsg, errlen);
    }
    return rc;
}

static void *executor_main(void *arg)
{
    struct plx_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while ((!c->head || c->busy) && !c->stopping)
            pthread_cond_wait(&c->cv, &c->mu);
        if (!c->head)
            break; /* stopping and drained */
        struct plx_work *w = c->head;
        c->head = w->next;
        if (!c->head)
            c->tail = NULL;
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);

        int rc;
        if (c->stopping)
            rc = plx__err(PLX_ERR_ABORTED, "communicator '%s' was destroyed with this work pending", c->name);
        else
            rc = run_generic(c, &w->args, &w->fp, w->errmsg, sizeof w->errmsg);
        rc = plx__lowp_avg_end(w->lowp, rc);
        w->lowp = NULL;
        if (rc != 0 && !w->errmsg[0])
            snprintf(w->errmsg, sizeof w->errmsg, "%s", plx_last_error());

        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        w->status = rc;
        w->done = 1;
        if (w->freed_by_user)
            free(w);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int plx__run_generic_blocking(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp)
{
    pthread_mutex_lock(&c->mu);
    if (!c->busy && !c->head) {
        /* Fast path: nothing queued, run in the caller's thread (no hand-off latency). */
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        char msg[512];
        int rc = run_generic(c, a, fp, msg, sizeof msg);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    pthread_mutex_unlock(&c->mu);
    struct plx_work *w;
    int rc = plx__work_generic(c, a, NULL, fp, &w);
    if (rc != 0)
        return rc;
    rc = plx_work_wait(w, PLX_TIMEOUT_INFINITE);
    plx_work_free(w);
    return rc;
}

int plx__work_generic(struct plx_comm *c, const struct plx_coll_args *a, struct plx__lowp_avg *lowp,
                      const struct plx__fp *fp, struct plx_work **out)
{
    struct plx_work *w = calloc(1, sizeof *w);
    if (!w)
        return plx__lowp_avg_end(lowp, plx__err(PLX_ERR_NOMEM, "out of memory"));
    w->comm = c;
    w->kind = WORK_GENERIC;
    w->args = *a;
    w->fp = *fp;
    w->lowp = lowp;
    pthread_mutex_lock(&c->mu);
    if (!c->thread_started) {
        if (pthread_create(&c->thread, NULL, executor_main, c) != 0) {
            pthread_mutex_unlock(&c->mu);
            plx__lowp_avg_end(lowp, PLX_ERR_SYSTEM);
            free(w);
            return plx__err(PLX_ERR_SYSTEM, "cannot start the executor thread of '%s': %s", c->name,
                            strerror(errno));
        }
        c->thread_started = 1;
    }
    if (c->tail)
        c->tail->next = w;
    else
        c->head = w;
    c->tail = w;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    *out = w;
    return 0;
}

void plx__executor_stop(struct plx_comm *c)
{
    pthread_mutex_lock(&c->mu);
    int pending = c->busy || c->head;
    pthread_mutex_unlock(&c->mu);
    if (pending) /* destroy with work in flight: make it fail fast, not time out */
        plx_comm_abort(c);
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    int started = c->thread_started;
    pthread_mutex_unlock(&c->mu);
    if (started)
        pthread_join(c->thread, NULL);
}

int plx__work_native(struct plx_comm *c, const struct plx_coll_args *a, int scale_avg, struct plx__lowp_avg *lowp,
                     void *req, struct plx_work **out)
{
    struct plx_work *w = calloc(1, sizeof *w);
    if (!w) {
        c->be->ops.req_free(c->bc, req);
        return plx__lowp_avg_end(lowp, plx__err(PLX_ERR_NOMEM, "out of memory"));
    }
    w->lowp = lowp;
    w->comm = c;
    w->kind = WORK_NATIVE;
    w->req = req;
    w->args = *a;
    w->scale_avg = scale_avg;
    *out = w;
    return 0;
}

int plx__work_done(struct plx_comm *c, int status, struct plx_work **out)
{
    struct plx_work *w = calloc(1, sizeof *w);
    if (!w)
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    w->comm = c;
    w->kind = WORK_DONE;
    w->done = 1;
    w->status = status;
    *out = w;
    return 0;
}

/* ---- public work API ---------------------------------------------------- */

/* AVG served by a native SUM: divide where the result landed. */
static int finish_native(struct plx_work *w, int rc)
{
    struct plx_comm *c = w->comm;
    const struct plx_coll_args *a = &w->args;
    c->be->ops.req_free(c->bc, w->req);
    w->req = NULL;
    rc = plx__lowp_avg_end(w->lowp, rc);
    w->lowp = NULL;
    if (rc == 0 && w->scale_avg) {
        if (a->coll == PLX_COLL_ALLREDUCE || a->coll == PLX_COLL_REDUCE_SCATTER ||
            (a->coll == PLX_COLL_REDUCE && c->rank == a->root))
            rc = plx__scale_div(a->recv, a->count, a->dtype, (uint64_t)c->size);
    }
    if (rc != 0) {
        if (a->coll < PLX_COLL_SEND)
            plx__err_prefix("%s(seq %llu) on '%s' [%s]: ", plx_coll_name(a->coll), (unsigned long long)a->seq,
                            c->name, c->be->name);
        else
            plx__err_prefix("%s(rank %d, peer %d) on '%s' [%s]: ", plx_coll_name(a->coll), c->rank, a->root,
                            c->name, c->be->name);
        snprintf(w->errmsg, sizeof w->errmsg, "%s", plx_last_error());
        if (breaks_comm(rc))
            rc = plx__comm_fail(c, rc, w->errmsg, sizeof w->errmsg);
    }
    if (a->coll < PLX_COLL_SEND)
        plx__ledger_state(c, a->seq, rc ? PLX__OP_FAILED : PLX__OP_DONE);
    w->status = rc;
    w->done = 1;
    return rc;
}

static int replay(struct plx_work *w)
{
    if (w->status != 0)
        plx__err(w->status, "%s", w->errmsg);
    return w->status;
}

PLX_API int plx_work_test(struct plx_work *w, int *done)
{
    if (!w || !done)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_work_test: work or done is NULL");
    struct plx_comm *c = w->comm;
    switch (w->kind) {
    case WORK_DONE:
        *done = 1;
        return replay(w);
    case WORK_GENERIC:
        pthread_mutex_lock(&c->mu);
        *done = w->done;
        pthread_mutex_unlock(&c->mu);
        return *done ? replay(w) : 0;
    default:
        if (w->done) {
            *done = 1;
            return replay(w);
        }
        int rc = c->be->ops.test(c->bc, w->req, done);
        if (!*done)
            return 0;
        return finish_native(w, rc);
    }
}

static struct timespec abs_deadline(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

PLX_API int plx_work_wait(struct plx_work *w, int64_t timeout_ms)
{
    if (!w)
        return plx__err(PLX_ERR_INVALID_ARG, "plx_work_wait: work is NULL");
    struct plx_comm *c = w->comm;
    if (timeout_ms == PLX_TIMEOUT_DEFAULT)
        timeout_ms = c->timeout_ms;
    if (w->kind == WORK_DONE)
        return replay(w);
    if (w->kind == WORK_GENERIC) {
        struct timespec dl = abs_deadline(timeout_ms < 0 ? 0 : timeout_ms);
        pthread_mutex_lock(&c->mu);
        while (!w->done) {
            if (timeout_ms == PLX_TIMEOUT_INFINITE) {
                pthread_cond_wait(&c->cv, &c->mu);
            } else if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT && !w->done) {
                pthread_mutex_unlock(&c->mu);
                return plx__err(PLX_ERR_TIMEOUT, "%s(seq %llu) on '%s': not finished after %lld ms (still pending)",
                                plx_coll_name(w->args.coll), (unsigned long long)w->args.seq, c->name,
                                (long long)timeout_ms);
            }
        }
        pthread_mutex_unlock(&c->mu);
        return replay(w);
    }
    if (w->done)
        return replay(w);
    uint64_t deadline = timeout_ms == PLX_TIMEOUT_INFINITE ? 0 : plx__clock_ns() + (uint64_t)timeout_ms * 1000000u;
    int rc = wait_req(c, w->req, deadline, -1);
    if (rc == STILL_PENDING)
        return plx__err(PLX_ERR_TIMEOUT, "%s on '%s' [%s]: rank %d not finished after %lld ms (still pending)",
                        plx_coll_name(w->args.coll), c->name, c->be->name, c->rank, (long long)timeout_ms);
    return finish_native(w, rc);
}

PLX_API void plx_work_free(struct plx_work *w)
{
    if (!w)
        return;
    struct plx_comm *c = w->comm;
    if (w->kind == WORK_GENERIC) {
        pthread_mutex_lock(&c->mu);
        int done = w->done;
        if (!done)
            w->freed_by_user = 1; /* the executor frees it when it finishes */
        pthread_mutex_unlock(&c->mu);
        if (done)
            free(w);
        return;
    }
    if (w->kind == WORK_NATIVE && !w->done) {
        /* The buffers are borrowed until completion: wait, then cancel. */
        plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        if (!w->done) {
            plx__log(PLX_LOG_WARN, "core", "%s on '%s': freed while pending; cancelling", plx_coll_name(w->args.coll),
                     c->name);
            c->be->ops.req_free(c->bc, w->req);
        }
    }
    plx__lowp_avg_end(w->lowp, PLX_ERR_ABORTED); /* cancelled: nothing to round */
    free(w);
}
