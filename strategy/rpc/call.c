/* call.c - calls: starting a request, waiting for its response within its
 * timeout, running handlers, and the progress thread's service of each
 * incoming message. Calls to this rank itself run in the caller's thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "deadline.h"

static const char *kind_name(int kind)
{
    switch (kind) {
    case RPC_CALL: return "call";
    case RPC_REMOTE: return "remote";
    case RPC_FETCH: return "to_here";
    case RPC_INCREF: return "fork";
    case RPC_DECREF: return "release";
    default: return "message";
    }
}

static void unlink_call(struct plx_rpc *rpc, struct plx__rpc_call *c)
{
    for (struct plx__rpc_call **pp = &rpc->calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return;
        }
}

void plx__rpc_fail_all(struct plx_rpc *rpc)
{
    for (struct plx__rpc_call **pp = &rpc->calls; *pp;) {
        struct plx__rpc_call *c = *pp;
        if (!c->done) {
            c->done = 1;
            c->status = rpc->broken;
            snprintf(c->err, sizeof c->err, "rpc %s '%s' to rank %d: %.600s", kind_name(c->kind), c->name, c->dst,
                     rpc->broken_msg);
            rpc->outstanding--;
        }
        if (c->abandoned) {
            *pp = c->next;
            free(c->out);
            free(c);
        } else {
            pp = &c->next;
        }
    }
}

int plx__rpc_start(struct plx_rpc *rpc, int dst, int kind, const char *name, const void *args, size_t len,
                   uint64_t rref_id, int64_t timeout_ms, struct plx__rpc_call **out)
{
    size_t nl = name ? strlen(name) : 0;
    if (dst < 0 || dst >= rpc->size || dst == rpc->rank)
        return plx_set_error(PLX_ERR_INVALID_ARG, "rpc %s '%s': no rank %d to send to (rank %d of %d)", kind_name(kind),
                        name ? name : "", dst, rpc->rank, rpc->size);
    if (nl > PLX_RPC_NAME_MAX || (len && !args) || len > PLX__RPC_MAX_PAYLOAD - nl)
        return plx_set_error(PLX_ERR_INVALID_ARG, "rpc %s to rank %d: bad name or arguments", kind_name(kind), dst);
    struct plx__rpc_call *c = calloc(1, sizeof *c);
    char *payload = nl + len ? malloc(nl + len) : NULL;
    if (!c || (nl + len && !payload)) {
        free(c);
        free(payload);
        return plx_set_error(PLX_ERR_NOMEM, "rpc %s '%s' to rank %d: out of memory", kind_name(kind), name ? name : "",
                        dst);
    }
    if (nl)
        memcpy(payload, name, nl);
    if (len)
        memcpy(payload + nl, args, len);
    c->dst = dst;
    c->kind = kind;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
    c->deadline_ns = plx__s_deadline(timeout_ms, rpc->timeout_ms);
    pthread_mutex_lock(&rpc->mu);
    int rc = 0;
    if (rpc->stopped || rpc->broken) {
        rc = rpc->stopped && !rpc->broken
                 ? plx_set_error(PLX_ERR_INVALID_USAGE, "rpc %s '%s' to rank %d: the agent is shut down", kind_name(kind),
                            c->name, dst)
                 : plx_set_error(rpc->broken, "rpc %s '%s' to rank %d: %s", kind_name(kind), c->name, dst,
                            rpc->broken_msg);
    } else {
        c->id = ++rpc->next_call;
        c->next = rpc->calls;
        rpc->calls = c;
        rpc->outstanding++;
        rpc->issued++;
    }
    pthread_mutex_unlock(&rpc->mu);
    if (rc) {
        free(c);
        free(payload);
        return rc;
    }
    struct plx__rpc_hdr h = {.kind = (uint32_t)kind, .call_id = c->id, .rref_id = rref_id, .name_len = (uint32_t)nl,
                             .payload_len = nl + len};
    rc = plx__rpc_send(rpc, dst, &h, payload);
    if (rc) {
        pthread_mutex_lock(&rpc->mu);
        if (!c->done) {
            c->done = 1;
            rpc->outstanding--;
        }
        unlink_call(rpc, c);
        pthread_mutex_unlock(&rpc->mu);
        free(c->out);
        free(c);
        plx_error_prefix("rpc %s '%s' to rank %d: ", kind_name(kind), name ? name : "", dst);
        return rc;
    }
    *out = c;
    return 0;
}

int plx__rpc_finish(struct plx_rpc *rpc, struct plx__rpc_call *c, void **result, size_t *len, uint64_t *rref_id)
{
    pthread_mutex_lock(&rpc->mu);
    while (!c->done) {
        struct timespec ts = plx__s_timespec(c->deadline_ns);
        pthread_cond_timedwait(&rpc->cv, &rpc->mu, &ts);
        if (!c->done && plx__s_now_ns() >= c->deadline_ns) {
            /* Give up, but keep counting it until its answer arrives (or
             * the agent breaks): shutdown waits for it. */
            int rc = plx_set_error(PLX_ERR_TIMEOUT, "rpc %s '%s' to rank %d: no response before its timeout",
                              kind_name(c->kind), c->name, c->dst);
            c->abandoned = 1; /* from here on the progress thread frees c */
            pthread_mutex_unlock(&rpc->mu);
            return rc;
        }
    }
    unlink_call(rpc, c);
    pthread_mutex_unlock(&rpc->mu);
    int rc = c->status;
    if (rref_id)
        *rref_id = c->rref_id;
    if (rc) {
        plx_set_error(rc, "%s", c->err);
        free(c->out);
    } else if (result) {
        *result = c->out;
        if (len)
            *len = c->out_len;
    } else {
        free(c->out);
    }
    free(c);
    return rc;
}

int plx__rpc_invoke(struct plx_rpc *rpc, const char *name, int caller, const void *args, size_t len, void **result,
                    size_t *result_len, char *err, size_t err_cap)
{
    plx_rpc_handler fn = NULL;
    void *ctx = NULL;
    pthread_mutex_lock(&rpc->mu);
    for (int i = 0; i < rpc->nhandlers; i++)
        if (!strcmp(rpc->handlers[i].name, name)) {
            fn = rpc->handlers[i].fn;
            ctx = rpc->handlers[i].ctx;
        }
    pthread_mutex_unlock(&rpc->mu);
    *result = NULL;
    *result_len = 0;
    if (!fn) {
        snprintf(err, err_cap, "rank %d has no handler '%s'", rpc->rank, name);
        return PLX_ERR_NOT_FOUND;
    }
    char msg[512] = "";
    int rc = fn(ctx, caller, args, len, result, result_len, msg, sizeof msg);
    if (rc) {
        free(*result);
        *result = NULL;
        snprintf(err, err_cap, "handler '%s' on rank %d failed (%s): %s", name, rpc->rank, plx_err_name(rc),
                 *msg ? msg : "(no message)");
        return rc < 0 ? rc : PLX_ERR_REMOTE;
    }
    if (*result_len && !*result) {
        snprintf(err, err_cap, "handler '%s' on rank %d returned %zu bytes at NULL", name, rpc->rank, *result_len);
        return PLX_ERR_INTERNAL;
    }
    return 0;
}

static void respond(struct plx_rpc *rpc, int dst, uint64_t call_id, int status, uint64_t rref_id, void *payload,
                    size_t len)
{
    struct plx__rpc_hdr h = {.kind = RPC_RESP, .status = status, .call_id = call_id, .rref_id = rref_id,
                             .payload_len = len};
    plx__rpc_send(rpc, dst, &h, payload); /* a failure breaks the agent; the receive loop reports it */
}

static void respond_error(struct plx_rpc *rpc, int dst, uint64_t call_id, int status, const char *msg)
{
    respond(rpc, dst, call_id, status, 0, strdup(msg), strlen(msg));
}

/* The answer to one of this rank's calls: it completes the call (one whose
 * caller gave up is freed here). */
static void on_response(struct plx_rpc *rpc, int src, const struct plx__rpc_hdr *h, void *payload)
{
    int orphan = 0; /* a value made for a remote() whose caller gave up */
    pthread_mutex_lock(&rpc->mu);
    struct plx__rpc_call *c = rpc->calls;
    while (c && c->id != h->call_id)
        c = c->next;
    if (c && !c->done) {
        orphan = c->abandoned && c->kind == RPC_REMOTE && h->status == 0;
        c->status = h->status;
        c->rref_id = h->rref_id;
        if (h->status) {
            snprintf(c->err, sizeof c->err, "rpc %s '%s' to rank %d: %.*s", kind_name(c->kind), c->name, c->dst,
                     (int)(h->payload_len < 600 ? h->payload_len : 600), payload ? (char *)payload : "");
        } else {
            c->out = payload;
            c->out_len = h->payload_len;
            payload = NULL;
        }
        c->done = 1;
        rpc->outstanding--;
        if (c->abandoned) {
            unlink_call(rpc, c);
            free(c->out);
            free(c);
        }
        pthread_cond_broadcast(&rpc->cv);
    }
    pthread_mutex_unlock(&rpc->mu);
    free(payload);
    if (orphan) /* nobody holds it: the owner must not keep it forever */
        plx__rpc_release_id(rpc, src, h->rref_id);
}

/* A copy of value id that this rank owns, for a holder's fetch. */
static int fetch_value(struct plx_rpc *rpc, uint64_t id, void **result, size_t *rlen, char *err, size_t err_cap)
{
    int rc = 0;
    pthread_mutex_lock(&rpc->mu);
    struct plx__rpc_value *v = plx__rpc_value_find(rpc, id);
    if (!v) {
        rc = PLX_ERR_NOT_FOUND;
        snprintf(err, err_cap, "rank %d owns no value %llu (every holder released it?)", rpc->rank,
                 (unsigned long long)id);
    } else if (v->len && !(*result = malloc(v->len))) {
        rc = PLX_ERR_NOMEM;
        snprintf(err, err_cap, "rank %d: out of memory copying value %llu", rpc->rank, (unsigned long long)id);
    } else {
        if (v->len)
            memcpy(*result, v->data, v->len);
        *rlen = v->len;
    }
    pthread_mutex_unlock(&rpc->mu);
    return rc;
}

void plx__rpc_serve(struct plx_rpc *rpc, int src, const struct plx__rpc_hdr *h, void *payload)
{
    char err[600], name[PLX_RPC_NAME_MAX + 1] = "";
    if (h->kind == RPC_RESP) {
        on_response(rpc, src, h, payload);
        return;
    }
    if (h->name_len > PLX_RPC_NAME_MAX || h->name_len > h->payload_len) {
        free(payload);
        respond_error(rpc, src, h->call_id, PLX_ERR_PROTOCOL, "malformed request");
        return;
    }
    if (h->name_len)
        memcpy(name, payload, h->name_len);
    name[h->name_len] = 0;
    const char *args = payload ? (const char *)payload + h->name_len : NULL;
    size_t alen = h->payload_len - h->name_len;
    void *result = NULL;
    size_t rlen = 0;
    int rc = 0;
    uint64_t id = 0;
    switch (h->kind) {
    case RPC_CALL:
    case RPC_REMOTE:
        rc = plx__rpc_invoke(rpc, name, src, args, alen, &result, &rlen, err, sizeof err);
        if (!rc && h->kind == RPC_REMOTE) {
            pthread_mutex_lock(&rpc->mu);
            rc = plx__rpc_value_add(rpc, result, rlen, &id);
            pthread_mutex_unlock(&rpc->mu);
            if (rc) {
                free(result);
                snprintf(err, sizeof err, "rank %d: out of memory keeping the value of '%s'", rpc->rank, name);
            }
            result = NULL;
            rlen = 0;
        }
        break;
    case RPC_FETCH:
        rc = fetch_value(rpc, h->rref_id, &result, &rlen, err, sizeof err);
        break;
    case RPC_INCREF:
    case RPC_DECREF:
        pthread_mutex_lock(&rpc->mu);
        if (plx__rpc_value_ref(rpc, h->rref_id, h->kind == RPC_INCREF ? 1 : -1)) {
            rc = PLX_ERR_NOT_FOUND;
            snprintf(err, sizeof err, "rank %d owns no value %llu to %s", rpc->rank, (unsigned long long)h->rref_id,
                     h->kind == RPC_INCREF ? "fork" : "release");
        }
        pthread_mutex_unlock(&rpc->mu);
        break;
    default:
        rc = PLX_ERR_PROTOCOL;
        snprintf(err, sizeof err, "rank %d got a message of unknown kind %u from rank %d", rpc->rank, h->kind, src);
    }
    free(payload);
    if (rc)
        respond_error(rpc, src, h->call_id, rc, err);
    else
        respond(rpc, src, h->call_id, 0, id, result, rlen);
}

/* ---- public calls ---------------------------------------------------------- */

struct plx_rpc_future {
    struct plx_rpc *rpc;
    struct plx__rpc_call *call; /* NULL: ran locally, result below */
    int status;
    void *out;
    size_t out_len;
    char err[768];
};

static int check_agent(struct plx_rpc *rpc, const char *what, const char *name, int blocking)
{
    if (!rpc || !name || !*name)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: no agent or handler name", what);
    if (blocking && plx__rpc_on_progress_thread(rpc))
        return plx_set_error(PLX_ERR_INVALID_USAGE,
                        "%s '%s': a handler must not block on another call (its answer would need this very thread); "
                        "use plx_rpc_async",
                        what, name);
    return 0;
}

/* A call to this rank: the handler runs here and now. */
static int local_call(struct plx_rpc *rpc, const char *name, const void *args, size_t len, void **result,
                      size_t *rlen)
{
    char err[600];
    void *out = NULL;
    size_t ol = 0;
    int rc = plx__rpc_invoke(rpc, name, rpc->rank, args, len, &out, &ol, err, sizeof err);
    if (rc)
        return plx_set_error(rc, "rpc call '%s' to rank %d: %s", name, rpc->rank, err);
    if (result) {
        *result = out;
        if (rlen)
            *rlen = ol;
    } else {
        free(out);
    }
    return 0;
}

PLX_API int plx_rpc_async(struct plx_rpc *rpc, int dst, const char *name, const void *args, size_t len,
                          int64_t timeout_ms, struct plx_rpc_future **fut)
{
    int rc = check_agent(rpc, "plx_rpc_async", name, 0);
    if (rc)
        return rc;
    if (!fut)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_async: no future");
    struct plx_rpc_future *f = calloc(1, sizeof *f);
    if (!f)
        return plx_set_error(PLX_ERR_NOMEM, "plx_rpc_async: out of memory");
    f->rpc = rpc;
    if (dst == rpc->rank) {
        f->status = local_call(rpc, name, args, len, &f->out, &f->out_len);
        if (f->status)
            snprintf(f->err, sizeof f->err, "%s", plx_last_error());
    } else if ((rc = plx__rpc_start(rpc, dst, RPC_CALL, name, args, len, 0, timeout_ms, &f->call))) {
        free(f);
        return rc;
    }
    *fut = f;
    return 0;
}

PLX_API int plx_rpc_test(struct plx_rpc_future *f, int *done)
{
    if (!f || !done)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_test: no future");
    if (!f->call) {
        *done = 1;
        return 0;
    }
    pthread_mutex_lock(&f->rpc->mu);
    *done = f->call->done || plx__s_now_ns() >= f->call->deadline_ns;
    pthread_mutex_unlock(&f->rpc->mu);
    return 0;
}

PLX_API int plx_rpc_wait(struct plx_rpc_future *f, void **result, size_t *result_len)
{
    if (!f)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_wait: no future");
    if (f->call && plx__rpc_on_progress_thread(f->rpc)) {
        int done;
        plx_rpc_test(f, &done);
        if (!done)
            return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_rpc_wait: a handler must not wait for a call");
    }
    int rc;
    if (f->call) {
        rc = plx__rpc_finish(f->rpc, f->call, result, result_len, NULL);
    } else {
        rc = f->status;
        if (rc)
            plx_set_error(rc, "%s", f->err);
        else if (result) {
            *result = f->out;
            if (result_len)
                *result_len = f->out_len;
            f->out = NULL;
        }
        free(f->out);
    }
    free(f);
    return rc;
}

PLX_API int plx_rpc_sync(struct plx_rpc *rpc, int dst, const char *name, const void *args, size_t len,
                         void **result, size_t *result_len, int64_t timeout_ms)
{
    int rc = check_agent(rpc, "plx_rpc_sync", name, 1);
    if (rc)
        return rc;
    if (dst == rpc->rank)
        return local_call(rpc, name, args, len, result, result_len);
    struct plx__rpc_call *c;
    if ((rc = plx__rpc_start(rpc, dst, RPC_CALL, name, args, len, 0, timeout_ms, &c)))
        return rc;
    return plx__rpc_finish(rpc, c, result, result_len, NULL);
}
