/* work.c - work handles (test, wait, free) and the failure bookkeeping of a
 * communicator. The executor that runs generic collectives is executor.c;
 * the p2p adapter the algorithms drive is p2p.c. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collv.h"
#include "comm.h"
#include "diag_hooks.h"
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
        snprintf(c->failed_msg, sizeof c->failed_msg, "%s", msg);
        __atomic_store_n(&c->failed, status, __ATOMIC_RELEASE); /* read unlocked by check_usable */
    }
    pthread_mutex_unlock(&c->mu);
    return status;
}

/* Errors that say nothing about the communicator's health. */
int plx__breaks_comm(int status)
{
    return status != 0 && status != PLX_ERR_INVALID_ARG && status != PLX_ERR_UNSUPPORTED &&
           status != PLX_ERR_INVALID_USAGE;
}

void plx__work_native_init(struct plx_work *w, struct plx_comm *c, const struct plx_coll_args *a, int scale_avg,
                           struct plx__lowp_avg *lowp, void *req)
{
    /* field by field: errmsg (most of the struct) is written only on failure */
    w->errmsg[0] = '\0';
    memset(&w->fp, 0, sizeof w->fp);
    w->next = NULL;
    w->done = w->status = w->freed_by_user = 0;
    w->lowp = lowp;
    w->comm = c;
    w->kind = WORK_NATIVE;
    w->req = req;
    w->args = *a;
    w->scale_avg = scale_avg;
}

int plx__work_native(struct plx_comm *c, const struct plx_coll_args *a, int scale_avg, struct plx__lowp_avg *lowp,
                     void *req, struct plx_work **out)
{
    struct plx_work *w = malloc(sizeof *w);
    if (!w) {
        c->be->ops.req_free(c->bc, req);
        return plx__lowp_avg_end(lowp, plx__err(PLX_ERR_NOMEM, "out of memory"));
    }
    plx__work_native_init(w, c, a, scale_avg, lowp, req);
    *out = w;
    return 0;
}

/* ---- public work API ---------------------------------------------------- */

/* AVG served by a native SUM: divide where the result landed. */
int plx__work_native_end(struct plx_work *w, int rc)
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
        if (plx__breaks_comm(rc))
            rc = plx__comm_fail(c, rc, w->errmsg, sizeof w->errmsg);
    }
    if (a->coll < PLX_COLL_SEND)
        plx__diag_state(c, a->seq, rc ? PLX__OP_FAILED : PLX__OP_DONE, NULL);
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
        return plx__work_native_end(w, rc);
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
    uint64_t deadline = plx__deadline_ms(timeout_ms);
    int rc = plx__wait_req(c, w->req, deadline, -1);
    if (rc == PLX__STILL_PENDING)
        return plx__err(PLX_ERR_TIMEOUT, "%s on '%s' [%s]: rank %d not finished after %lld ms (still pending)",
                        plx_coll_name(w->args.coll), c->name, c->be->name, c->rank, (long long)timeout_ms);
    return plx__work_native_end(w, rc);
}

void plx__work_native_release(struct plx_work *w)
{
    struct plx_comm *c = w->comm;
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
    plx__vspec_release(&w->args); /* a native v-collective's layout: done with it or cancelled */
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
        if (done) {
            plx__vspec_release(&w->args);
            free(w);
        }
        return;
    }
    plx__work_native_release(w);
    free(w);
}
