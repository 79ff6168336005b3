/* agent.c - the RPC agent's life: create (capability check, private
 * communicators, progress thread), the progress thread's receive loop,
 * sending and reaping messages, shutdown's agreement, destroy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "deadline.h"
#include "plexus/backend.h" /* PLX_CAP_* */
#include "plexus/info.h"

/* The agent this thread serves, if it is a progress thread: set by the
 * thread itself, so no other thread's memory is read to tell. */
static _Thread_local const struct plx_rpc *serving;

int plx__rpc_on_progress_thread(const struct plx_rpc *rpc)
{
    return serving == rpc;
}

PLX_API void plx_rpc_options_init(struct plx_rpc_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->timeout_ms = -1;
}

/* The progress thread needs a receive from any rank while other threads
 * send on the same communicator. */
static int check_caps(struct plx_comm *comm)
{
    const char *be = plx_comm_backend(comm);
    int i = plx_backend_find(be);
    struct plx_backend_info info = {.struct_size = sizeof info};
    if (i < 0 || plx_backend_info((size_t)i, &info))
        return plx_set_error(PLX_ERR_UNSUPPORTED, "plx_rpc_create: cannot read the capabilities of backend '%s'", be);
    uint32_t need = PLX_CAP_THREAD_SAFE | PLX_CAP_ANY_SOURCE;
    if ((info.cap_flags & need) != need)
        return plx_set_error(PLX_ERR_UNSUPPORTED,
                        "plx_rpc_create: backend '%s' lacks %s%s%s; RPC needs a progress thread receiving from any "
                        "rank while other threads send",
                        be, info.cap_flags & PLX_CAP_THREAD_SAFE ? "" : "thread safety",
                        (info.cap_flags & need) == 0 ? " and " : "",
                        info.cap_flags & PLX_CAP_ANY_SOURCE ? "" : "any-source receives");
    return 0;
}

int plx__rpc_send(struct plx_rpc *rpc, int dst, const struct plx__rpc_hdr *h, void *payload)
{
    struct plx__rpc_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(payload);
        return plx_set_error(PLX_ERR_NOMEM, "rpc: out of memory");
    }
    o->hdr = *h;
    o->hdr.src = rpc->rank;
    o->payload = payload;
    pthread_mutex_lock(&rpc->send_mu);
    int rc = plx_isend(rpc->data, &o->hdr, sizeof o->hdr, PLX_U8, dst, PLX__RPC_TAG_HDR, NULL, &o->wh);
    if (!rc && h->payload_len)
        rc = plx_isend(rpc->data, payload, h->payload_len, PLX_U8, dst, PLX__RPC_TAG_DATA, NULL, &o->wd);
    pthread_mutex_unlock(&rpc->send_mu);
    pthread_mutex_lock(&rpc->mu);
    o->next = rpc->outs;
    rpc->outs = o;
    pthread_mutex_unlock(&rpc->mu);
    return rc;
}

static int out_done(struct plx__rpc_out *o)
{
    int d1 = 1, d2 = 1;
    if (o->wh)
        plx_work_test(o->wh, &d1);
    if (o->wd)
        plx_work_test(o->wd, &d2);
    return d1 && d2;
}

static void out_free(struct plx__rpc_out *o, int64_t wait_ms)
{
    if (o->wh)
        plx_work_wait(o->wh, wait_ms);
    if (o->wd)
        plx_work_wait(o->wd, wait_ms);
    plx_work_free(o->wh);
    plx_work_free(o->wd);
    free(o->payload);
    free(o);
}

void plx__rpc_reap(struct plx_rpc *rpc, int wait_all)
{
    struct plx__rpc_out *done = NULL;
    pthread_mutex_lock(&rpc->mu);
    for (struct plx__rpc_out **pp = &rpc->outs; *pp;) {
        struct plx__rpc_out *o = *pp;
        if (wait_all || out_done(o)) {
            *pp = o->next;
            o->next = done;
            done = o;
        } else {
            pp = &o->next;
        }
    }
    pthread_mutex_unlock(&rpc->mu);
    while (done) {
        struct plx__rpc_out *o = done;
        done = o->next;
        out_free(o, rpc->timeout_ms);
    }
}

/* Post a receive of each peer's shutdown byte. */
static int watch_peers(struct plx_rpc *rpc)
{
    rpc->bye = calloc((size_t)rpc->size, sizeof *rpc->bye);
    rpc->bye_buf = calloc((size_t)rpc->size, 1);
    if (!rpc->bye || !rpc->bye_buf)
        return plx_set_error(PLX_ERR_NOMEM, "rpc: out of memory");
    for (int p = 0; p < rpc->size; p++) {
        if (p == rpc->rank)
            continue;
        int rc = plx_irecv(rpc->data, &rpc->bye_buf[p], 1, PLX_U8, p, PLX__RPC_TAG_BYE, NULL, &rpc->bye[p]);
        if (rc)
            return rc;
    }
    return 0;
}

/* A peer's receive that ended before its shutdown byte means it is lost. */
static int check_peers(struct plx_rpc *rpc)
{
    for (int p = 0; p < rpc->size; p++) {
        int done = 0, rc;
        if (!rpc->bye[p] || (rc = plx_work_test(rpc->bye[p], &done), !done))
            continue;
        plx_work_free(rpc->bye[p]);
        rpc->bye[p] = NULL;
        if (rc) {
            plx_error_prefix("rank %d lost: ", p);
            return rc;
        }
    }
    return 0;
}

/* Wait for the shutdown bytes (STOP came: every peer sent its byte), or
 * abort them when the agent broke. */
static void unwatch_peers(struct plx_rpc *rpc, int broken)
{
    if (broken)
        plx_comm_abort(rpc->data);
    for (int p = 0; rpc->bye && p < rpc->size; p++) {
        if (rpc->bye[p])
            plx_work_wait(rpc->bye[p], rpc->timeout_ms);
        plx_work_free(rpc->bye[p]);
    }
    free(rpc->bye);
    free(rpc->bye_buf);
    rpc->bye = NULL;
    rpc->bye_buf = NULL;
}

/* Wait for w in slices: between them, notice lost peers, reap finished
 * sends, and leave if destroy asks. */
static int wait_sliced(struct plx_rpc *rpc, struct plx_work *w, int64_t limit_ms)
{
    uint64_t end = plx__s_deadline(limit_ms, rpc->timeout_ms);
    for (;;) {
        int rc = plx_work_wait(w, 50);
        if (rc != PLX_ERR_TIMEOUT)
            return rc;
        if ((rc = check_peers(rpc)))
            return rc;
        plx__rpc_reap(rpc, 0);
        pthread_mutex_lock(&rpc->mu);
        int leave = rpc->abandon;
        pthread_mutex_unlock(&rpc->mu);
        if (leave)
            plx_comm_abort(rpc->data);
        if (plx__s_now_ns() > end)
            return plx_set_error(PLX_ERR_TIMEOUT, "rpc: a message's payload did not arrive within %lld ms",
                            (long long)limit_ms);
    }
}

static void *progress(void *p)
{
    struct plx_rpc *rpc = p;
    serving = rpc;
    char why[sizeof rpc->broken_msg] = "";
    int rc = watch_peers(rpc);
    if (rc)
        snprintf(why, sizeof why, "%s", plx_last_error());
    while (!rc) {
        struct plx__rpc_hdr h;
        struct plx_work *w = NULL;
        rc = plx_irecv(rpc->data, &h, sizeof h, PLX_U8, PLX_ANY_SOURCE, PLX__RPC_TAG_HDR, NULL, &w);
        if (!rc)
            rc = wait_sliced(rpc, w, PLX_TIMEOUT_INFINITE); /* the next message may be long in coming */
        if (rc) { /* the reason first: ending the receive below may say other things */
            snprintf(why, sizeof why, "%s", plx_last_error());
            if (w) /* still pending if a peer was lost: end it */
                plx_comm_abort(rpc->data);
        }
        plx_work_free(w);
        if (rc)
            break;
        if (h.kind == RPC_STOP)
            break;
        void *payload = NULL;
        if (h.payload_len > PLX__RPC_MAX_PAYLOAD || h.src < 0 || h.src >= rpc->size) {
            rc = plx_set_error(PLX_ERR_PROTOCOL, "rpc: rank %d: a message claims %llu bytes from rank %d", rpc->rank,
                          (unsigned long long)h.payload_len, h.src);
            snprintf(why, sizeof why, "%s", plx_last_error());
            break;
        }
        if (h.payload_len) {
            if (!(payload = malloc(h.payload_len))) {
                rc = plx_set_error(PLX_ERR_NOMEM, "rpc: out of memory for a %llu-byte message",
                              (unsigned long long)h.payload_len);
                snprintf(why, sizeof why, "%s", plx_last_error());
                break;
            }
            rc = plx_irecv(rpc->data, payload, h.payload_len, PLX_U8, h.src, PLX__RPC_TAG_DATA, NULL, &w);
            if (!rc)
                rc = wait_sliced(rpc, w, rpc->timeout_ms);
            if (rc) {
                snprintf(why, sizeof why, "%s", plx_last_error());
                if (w)
                    plx_comm_abort(rpc->data);
            }
            plx_work_free(w);
            if (rc) {
                free(payload);
                break;
            }
        }
        plx__rpc_serve(rpc, h.src, &h, payload);
        plx__rpc_reap(rpc, 0);
    }
    if (rc) { /* the communicator failed or a peer is lost: every pending call learns why */
        pthread_mutex_lock(&rpc->mu);
        rpc->broken = rc;
        snprintf(rpc->broken_msg, sizeof rpc->broken_msg, "rank %d's RPC agent stopped: %.700s", rpc->rank, why);
        plx__rpc_fail_all(rpc);
        pthread_cond_broadcast(&rpc->cv);
        pthread_mutex_unlock(&rpc->mu);
    }
    unwatch_peers(rpc, rc != 0);
    return NULL;
}

PLX_API int plx_rpc_create(struct plx_comm *comm, const struct plx_rpc_options *o, struct plx_rpc **out)
{
    struct plx_rpc_options opt;
    plx_rpc_options_init(&opt);
    if (o)
        memcpy(&opt, o, o->struct_size < sizeof opt ? o->struct_size : sizeof opt);
    if (!comm || !out)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_create: no communicator or output");
    int rc = opt.timeout_ms < 0 && opt.timeout_ms != PLX_TIMEOUT_DEFAULT && opt.timeout_ms != PLX_TIMEOUT_INFINITE
                 ? plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_create: timeout_ms %lld is neither milliseconds, "
                                 "PLX_TIMEOUT_DEFAULT nor PLX_TIMEOUT_INFINITE", (long long)opt.timeout_ms)
                 : check_caps(comm);
    /* Every rank must agree before the splits, or a refusing rank would
     * leave the others waiting in them. */
    char why[256];
    snprintf(why, sizeof why, "%s", rc ? plx_last_error() : "");
    int32_t worst = rc, all = 0;
    int crc = plx_allreduce(comm, &worst, &all, 1, PLX_I32, PLX_MIN);
    if (crc)
        return crc;
    if (rc)
        return plx_set_error(rc, "%s", why); /* the allreduce cleared it */
    if (all)
        return plx_set_error(PLX_ERR_UNSUPPORTED, "plx_rpc_create: another rank's backend cannot serve RPC (%s)",
                        plx_err_name(all));
    struct plx_rpc *rpc = calloc(1, sizeof *rpc);
    if (!rpc)
        return plx_set_error(PLX_ERR_NOMEM, "plx_rpc_create: out of memory");
    rpc->rank = plx_comm_rank(comm);
    rpc->size = plx_comm_size(comm);
    rpc->timeout_ms = opt.timeout_ms == PLX_TIMEOUT_DEFAULT || opt.timeout_ms == 0 ? 30000 : opt.timeout_ms;
    pthread_mutex_init(&rpc->mu, NULL);
    pthread_mutex_init(&rpc->send_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rpc->cv, &ca);
    pthread_condattr_destroy(&ca);
    rc = plx_comm_split(comm, 0, rpc->rank, &rpc->data);
    if (!rc)
        rc = plx_comm_split(comm, 0, rpc->rank, &rpc->ctl);
    if (!rc && rpc->size > 1) {
        if (pthread_create(&rpc->thread, NULL, progress, rpc))
            rc = plx_set_error(PLX_ERR_SYSTEM, "plx_rpc_create: cannot start the progress thread");
        else
            rpc->has_thread = 1;
    }
    if (rc) {
        plx_rpc_destroy(rpc);
        return rc;
    }
    *out = rpc;
    return 0;
}

PLX_API int plx_rpc_register(struct plx_rpc *rpc, const char *name, plx_rpc_handler fn, void *ctx)
{
    if (!rpc || !name || !fn || !*name || strlen(name) > PLX_RPC_NAME_MAX)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_register: bad agent, handler or name (1..%d bytes)",
                        PLX_RPC_NAME_MAX);
    pthread_mutex_lock(&rpc->mu);
    int rc = 0;
    for (int i = 0; i < rpc->nhandlers; i++)
        if (!strcmp(rpc->handlers[i].name, name))
            rc = plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_register: '%s' is registered already", name);
    struct plx__rpc_handler *nh = rc ? NULL : realloc(rpc->handlers, (size_t)(rpc->nhandlers + 1) * sizeof *nh);
    if (!rc && !nh)
        rc = plx_set_error(PLX_ERR_NOMEM, "plx_rpc_register: out of memory");
    if (!rc) {
        rpc->handlers = nh;
        struct plx__rpc_handler *h = &nh[rpc->nhandlers++];
        snprintf(h->name, sizeof h->name, "%s", name);
        h->fn = fn;
        h->ctx = ctx;
    }
    pthread_mutex_unlock(&rpc->mu);
    return rc;
}

PLX_API size_t plx_rpc_owned_count(struct plx_rpc *rpc)
{
    if (!rpc)
        return 0;
    pthread_mutex_lock(&rpc->mu);
    size_t n = rpc->nvalues;
    pthread_mutex_unlock(&rpc->mu);
    return n;
}

/* Wait until this rank has no call outstanding (or the deadline). */
static void wait_idle(struct plx_rpc *rpc, uint64_t end_ns)
{
    pthread_mutex_lock(&rpc->mu);
    while (rpc->outstanding > 0 && !rpc->broken && plx__s_now_ns() < end_ns) {
        struct timespec ts = plx__s_timespec(plx__s_deadline(20, 0)); /* re-check the deadline every 20 ms */
        pthread_cond_timedwait(&rpc->cv, &rpc->mu, &ts);
    }
    pthread_mutex_unlock(&rpc->mu);
}

PLX_API int plx_rpc_shutdown(struct plx_rpc *rpc, int64_t timeout_ms)
{
    if (!rpc)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_shutdown: no agent");
    if (plx__rpc_on_progress_thread(rpc))
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_rpc_shutdown: not from inside a handler");
    int64_t limit = timeout_ms == PLX_TIMEOUT_DEFAULT ? rpc->timeout_ms : timeout_ms;
    uint64_t end = plx__s_deadline(limit, 0);
    /* Quiescence: two consecutive rounds in which no rank has a call
     * outstanding and the global count of requests ever issued did not
     * change. A request issued before a round keeps its sender busy until
     * answered, and new requests are only issued while serving one, so
     * nothing can still be in flight after such a pair of rounds. */
    int64_t prev_issued = -1;
    while (rpc->size > 1) {
        wait_idle(rpc, end);
        pthread_mutex_lock(&rpc->mu);
        int64_t v[2] = {rpc->outstanding, rpc->issued}, r[2];
        int broken = rpc->broken;
        char msg[sizeof rpc->broken_msg];
        snprintf(msg, sizeof msg, "%s", rpc->broken_msg);
        pthread_mutex_unlock(&rpc->mu);
        if (broken)
            return plx_set_error(broken, "plx_rpc_shutdown: %s", msg);
        int rc = plx_allreduce(rpc->ctl, v, r, 2, PLX_I64, PLX_SUM);
        if (rc) {
            plx_error_prefix("plx_rpc_shutdown: ");
            return rc;
        }
        if (r[0] == 0 && r[1] == prev_issued)
            break;
        prev_issued = r[0] == 0 ? r[1] : -1;
        if (plx__s_now_ns() > end)
            return plx_set_error(PLX_ERR_TIMEOUT,
                            "plx_rpc_shutdown: rank %d: %lld calls still outstanding across ranks after %lld ms",
                            rpc->rank, (long long)r[0], (long long)limit);
    }
    if (rpc->has_thread) {
        /* Every peer's watch ends with our byte; each progress thread's
         * last message is STOP from its left neighbour. */
        static const unsigned char bye = 1;
        int rc = 0;
        for (int p = 0; p < rpc->size && !rc; p++) {
            struct plx_work *w = NULL;
            if (p != rpc->rank && !(rc = plx_isend(rpc->data, &bye, 1, PLX_U8, p, PLX__RPC_TAG_BYE, NULL, &w)))
                rc = plx_work_wait(w, limit);
            plx_work_free(w);
        }
        struct plx__rpc_hdr h = {.kind = RPC_STOP};
        if (!rc)
            rc = plx__rpc_send(rpc, (rpc->rank + 1) % rpc->size, &h, NULL);
        if (rc) {
            plx_error_prefix("plx_rpc_shutdown: ");
            return rc;
        }
        pthread_join(rpc->thread, NULL);
        rpc->has_thread = 0;
        plx__rpc_reap(rpc, 1);
    }
    pthread_mutex_lock(&rpc->mu);
    rpc->stopped = 1;
    pthread_mutex_unlock(&rpc->mu);
    return 0;
}

PLX_API void plx_rpc_destroy(struct plx_rpc *rpc)
{
    if (!rpc)
        return;
    if (rpc->has_thread) {
        pthread_mutex_lock(&rpc->mu);
        rpc->abandon = 1;
        pthread_mutex_unlock(&rpc->mu);
        pthread_join(rpc->thread, NULL);
    }
    if (rpc->data && !rpc->stopped)
        plx_comm_abort(rpc->data); /* sends that can no longer finish */
    plx__rpc_reap(rpc, 1);
    pthread_mutex_lock(&rpc->mu);
    if (!rpc->broken) {
        rpc->broken = PLX_ERR_ABORTED;
        snprintf(rpc->broken_msg, sizeof rpc->broken_msg, "the RPC agent of rank %d was destroyed", rpc->rank);
    }
    plx__rpc_fail_all(rpc);
    pthread_mutex_unlock(&rpc->mu);
    while (rpc->calls) { /* calls nobody waited for */
        struct plx__rpc_call *c = rpc->calls;
        rpc->calls = c->next;
        free(c->out);
        free(c);
    }
    for (size_t i = 0; i < rpc->nvalues; i++)
        free(rpc->values[i].data);
    free(rpc->values);
    free(rpc->handlers);
    plx_comm_destroy(rpc->ctl);
    plx_comm_destroy(rpc->data);
    pthread_mutex_destroy(&rpc->mu);
    pthread_mutex_destroy(&rpc->send_mu);
    pthread_cond_destroy(&rpc->cv);
    free(rpc);
}
