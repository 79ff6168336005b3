/* rref.c - remote references. The owner keeps each value with a count of
 * the references that exist anywhere: remote() creates it with one (the
 * caller's), fork() adds one before the bytes for a third rank exist (the
 * forking holder still holds its own, so the count cannot reach zero in
 * between), release() takes one away; at zero the owner frees the value. */
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define WIRE_MAGIC 0x52524546u /* "RREF" */

struct plx_rref {
    int owner;
    uint64_t id;
};

/* ---- the owner's table (under mu) ---------------------------------------- */

int plx__rpc_value_add(struct plx_rpc *rpc, void *data, size_t len, uint64_t *id)
{
    struct plx__rpc_value *nv = realloc(rpc->values, (rpc->nvalues + 1) * sizeof *nv);
    if (!nv)
        return PLX_ERR_NOMEM;
    rpc->values = nv;
    *id = ++rpc->next_value;
    nv[rpc->nvalues++] = (struct plx__rpc_value){*id, 1, data, len};
    return 0;
}

struct plx__rpc_value *plx__rpc_value_find(struct plx_rpc *rpc, uint64_t id)
{
    for (size_t i = 0; i < rpc->nvalues; i++)
        if (rpc->values[i].id == id)
            return &rpc->values[i];
    return NULL;
}

int plx__rpc_value_ref(struct plx_rpc *rpc, uint64_t id, int delta)
{
    struct plx__rpc_value *v = plx__rpc_value_find(rpc, id);
    if (!v)
        return -1;
    v->refs += delta;
    if (v->refs <= 0) {
        free(v->data);
        *v = rpc->values[--rpc->nvalues];
    }
    return 0;
}

/* ---- public -------------------------------------------------------------------- */

static struct plx_rref *new_rref(int owner, uint64_t id)
{
    struct plx_rref *r = malloc(sizeof *r);
    if (r) {
        r->owner = owner;
        r->id = id;
    }
    return r;
}

static int blocking_ok(struct plx_rpc *rpc, const char *what)
{
    if (!rpc)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: no agent", what);
    if (plx__rpc_on_progress_thread(rpc))
        return plx_set_error(PLX_ERR_INVALID_USAGE, "%s: a handler must not block on another call", what);
    return 0;
}

PLX_API int plx_rpc_remote(struct plx_rpc *rpc, int owner, const char *name, const void *args, size_t len,
                           int64_t timeout_ms, struct plx_rref **out)
{
    int rc = blocking_ok(rpc, "plx_rpc_remote");
    if (rc)
        return rc;
    if (!name || !out)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rpc_remote: no handler name or output");
    uint64_t id;
    if (owner == rpc->rank) {
        char err[600];
        void *val = NULL;
        size_t vl = 0;
        if ((rc = plx__rpc_invoke(rpc, name, rpc->rank, args, len, &val, &vl, err, sizeof err)))
            return plx_set_error(rc, "rpc remote '%s' on rank %d: %s", name, owner, err);
        pthread_mutex_lock(&rpc->mu);
        rc = plx__rpc_value_add(rpc, val, vl, &id);
        pthread_mutex_unlock(&rpc->mu);
        if (rc) {
            free(val);
            return plx_set_error(rc, "rpc remote '%s': out of memory", name);
        }
    } else {
        struct plx__rpc_call *c;
        if ((rc = plx__rpc_start(rpc, owner, RPC_REMOTE, name, args, len, 0, timeout_ms, &c)))
            return rc;
        if ((rc = plx__rpc_finish(rpc, c, NULL, NULL, &id)))
            return rc;
    }
    if (!(*out = new_rref(owner, id))) {
        plx__rpc_release_id(rpc, owner, id);
        return plx_set_error(PLX_ERR_NOMEM, "plx_rpc_remote: out of memory");
    }
    return 0;
}

PLX_API int plx_rref_owner(const struct plx_rref *r)
{
    return r ? r->owner : -1;
}

PLX_API uint64_t plx_rref_id(const struct plx_rref *r)
{
    return r ? r->id : 0;
}

PLX_API int plx_rref_to_here(struct plx_rpc *rpc, const struct plx_rref *r, void **value, size_t *len,
                             int64_t timeout_ms)
{
    int rc = blocking_ok(rpc, "plx_rref_to_here");
    if (rc)
        return rc;
    if (!r || !value)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rref_to_here: no reference or output");
    if (r->owner == rpc->rank) {
        pthread_mutex_lock(&rpc->mu);
        struct plx__rpc_value *v = plx__rpc_value_find(rpc, r->id);
        void *copy = v && v->len ? malloc(v->len) : NULL;
        size_t vl = v ? v->len : 0;
        if (copy)
            memcpy(copy, v->data, vl);
        pthread_mutex_unlock(&rpc->mu);
        if (!v)
            return plx_set_error(PLX_ERR_NOT_FOUND, "plx_rref_to_here: rank %d owns no value %llu", rpc->rank,
                            (unsigned long long)r->id);
        if (vl && !copy)
            return plx_set_error(PLX_ERR_NOMEM, "plx_rref_to_here: out of memory");
        *value = copy;
        if (len)
            *len = vl;
        return 0;
    }
    struct plx__rpc_call *c;
    if ((rc = plx__rpc_start(rpc, r->owner, RPC_FETCH, NULL, NULL, 0, r->id, timeout_ms, &c)))
        return rc;
    return plx__rpc_finish(rpc, c, value, len, NULL);
}

PLX_API int plx_rref_fork(struct plx_rpc *rpc, const struct plx_rref *r, void *wire, int64_t timeout_ms)
{
    int rc = blocking_ok(rpc, "plx_rref_fork");
    if (rc)
        return rc;
    if (!r || !wire)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rref_fork: no reference or buffer");
    if (r->owner == rpc->rank) {
        pthread_mutex_lock(&rpc->mu);
        rc = plx__rpc_value_ref(rpc, r->id, 1);
        pthread_mutex_unlock(&rpc->mu);
        if (rc)
            return plx_set_error(PLX_ERR_NOT_FOUND, "plx_rref_fork: rank %d owns no value %llu", rpc->rank,
                            (unsigned long long)r->id);
    } else {
        struct plx__rpc_call *c;
        if ((rc = plx__rpc_start(rpc, r->owner, RPC_INCREF, NULL, NULL, 0, r->id, timeout_ms, &c)) ||
            (rc = plx__rpc_finish(rpc, c, NULL, NULL, NULL)))
            return rc;
    }
    unsigned char *w = wire;
    uint32_t magic = WIRE_MAGIC;
    int32_t owner = r->owner;
    memcpy(w, &owner, 4);
    memcpy(w + 4, &magic, 4);
    memcpy(w + 8, &r->id, 8);
    return 0;
}

PLX_API int plx_rref_from_wire(struct plx_rpc *rpc, const void *wire, size_t len, struct plx_rref **out)
{
    if (!rpc || !wire || !out || len < PLX_RREF_WIRE_BYTES)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rref_from_wire: need %d bytes from plx_rref_fork",
                        PLX_RREF_WIRE_BYTES);
    const unsigned char *w = wire;
    int32_t owner;
    uint32_t magic;
    uint64_t id;
    memcpy(&owner, w, 4);
    memcpy(&magic, w + 4, 4);
    memcpy(&id, w + 8, 8);
    if (magic != WIRE_MAGIC || owner < 0 || owner >= rpc->size)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rref_from_wire: these bytes are not a forked RRef");
    if (!(*out = new_rref(owner, id)))
        return plx_set_error(PLX_ERR_NOMEM, "plx_rref_from_wire: out of memory");
    return 0;
}

PLX_API int plx_rref_release(struct plx_rpc *rpc, struct plx_rref *r)
{
    if (!r)
        return 0;
    if (!rpc)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_rref_release: no agent");
    int owner = r->owner;
    uint64_t id = r->id;
    free(r);
    return plx__rpc_release_id(rpc, owner, id);
}

int plx__rpc_release_id(struct plx_rpc *rpc, int owner, uint64_t id)
{
    int rc;
    if (owner == rpc->rank) {
        pthread_mutex_lock(&rpc->mu);
        rc = plx__rpc_value_ref(rpc, id, -1);
        pthread_mutex_unlock(&rpc->mu);
        return rc ? plx_set_error(PLX_ERR_NOT_FOUND, "plx_rref_release: rank %d owns no value %llu", rpc->rank,
                             (unsigned long long)id)
                  : 0;
    }
    /* Fire and forget: the call stays counted until the owner's answer, so
     * shutdown waits for it. */
    struct plx__rpc_call *c;
    if ((rc = plx__rpc_start(rpc, owner, RPC_DECREF, NULL, NULL, 0, id, -1, &c)))
        return rc;
    pthread_mutex_lock(&rpc->mu);
    if (c->done) { /* already answered or failed */
        for (struct plx__rpc_call **pp = &rpc->calls; *pp; pp = &(*pp)->next)
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        free(c->out);
        free(c);
    } else {
        c->abandoned = 1;
    }
    pthread_mutex_unlock(&rpc->mu);
    return 0;
}
