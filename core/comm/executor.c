/* executor.c - generic collectives (the core's algorithms over the p2p
 * adapter) in issue order: in the caller's thread when the communicator is
 * idle, else queued to one executor thread per communicator. */
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
#include "hier.h"
#include "host.h"
#include "log.h"

/* fp: the user's call (coll.c), checked in-band by the p2p adapter and
 * recorded in the ledger. */
static int run_generic(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp, char *errmsg,
                       size_t errlen)
{
    if (a->flags & PLX__COLL_FLAG_HIER)
        return plx__hier_run_failing(c, a, fp, errmsg, errlen);
    int64_t t = a->timeout_ms >= 0 ? a->timeout_ms : c->timeout_ms;
    uint64_t deadline = plx__deadline_ms(t);
    plx__diag_state(c, a->seq, PLX__OP_RUNNING, fp);
    int rc = a->flags & PLX__COLL_FLAG_STAGED ? plx__stage_run(c, a, deadline)
                                              : plx__algo_run(&c->p2p, &c->tuning, &c->scratch, a, deadline);
    plx__diag_state(c, a->seq, rc ? PLX__OP_FAILED : PLX__OP_DONE, fp);
    if (rc != 0) {
        plx__err_prefix("%s(seq %llu) on '%s': ", plx_coll_name(a->coll), (unsigned long long)a->seq, c->name);
        snprintf(errmsg, errlen, "%s", plx_last_error());
        if (plx__breaks_comm(rc))
            rc = plx__comm_fail(c, rc, errmsg, errlen);
    }
    return rc;
}

static void *executor_main(void *arg)
{
    struct plx_comm *c = arg;
    pthread_setname_np(pthread_self(), "plx-executor"); /* for top -H, gdb, perf */
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
        if (w->freed_by_user) {
            plx__vspec_release(&w->args);
            free(w);
        }
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
        int rc = run_generic(c, a, fp, c->inline_errmsg, sizeof c->inline_errmsg);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        /* Only the executor waits for busy to clear, and only with work
         * queued: waking it after every inline call costs each call a futex
         * wake and a context switch, which on a small host preempts a rank. */
        if (c->head)
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
