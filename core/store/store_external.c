/* store_external.c - a store the caller hands plx_comm_init() as callbacks
 * (struct plx_store_callbacks), wrapped in the core's store interface so
 * prefixed views, the host services and every plugin use it unchanged. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store.h"

struct external {
    struct plx_store base;
    struct plx_store_callbacks cb; /* copied, at most the caller's struct_size */
};

static int fail(int rc, const char *what, const char *key)
{
    if (rc >= 0)
        rc = PLX_ERR_INTERNAL;
    /* A callback may have said why through plexus's error already (a
     * framework shim does); else say which call failed. */
    if (!plx_last_error()[0])
        plx__err(rc, "external store: %s('%s') failed: %s", what, key, plx_strerror(rc));
    else
        plx__err_prefix("external store: %s('%s'): ", what, key);
    return rc;
}

static int e_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    struct external *e = (struct external *)s;
    plx__err_clear();
    int rc = e->cb.set(e->cb.user, key, val, len);
    return rc ? fail(rc, "set", key) : 0;
}

static int e_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    struct external *e = (struct external *)s;
    *val = NULL;
    *len = 0;
    plx__err_clear();
    int rc = e->cb.get(e->cb.user, key, val, len, timeout_ms);
    return rc ? fail(rc, "get", key) : 0;
}

static int e_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    struct external *e = (struct external *)s;
    plx__err_clear();
    int rc = e->cb.add(e->cb.user, key, delta, result);
    return rc ? fail(rc, "add", key) : 0;
}

static int e_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct external *e = (struct external *)s;
    plx__err_clear();
    int rc = e->cb.wait(e->cb.user, keys, n, timeout_ms);
    return rc ? fail(rc, "wait", n ? keys[0] : "") : 0;
}

static int e_check(struct plx_store *s, const char *key)
{
    struct external *e = (struct external *)s;
    if (e->cb.check)
        return e->cb.check(e->cb.user, key);
    const char *keys[1] = {key};
    return e->cb.wait(e->cb.user, keys, 1, 0) == 0;
}

static int e_del(struct plx_store *s, const char *key)
{
    struct external *e = (struct external *)s;
    if (!e->cb.del)
        return plx__err(PLX_ERR_UNSUPPORTED, "external store: no del callback (deleting '%s')", key);
    return e->cb.del(e->cb.user, key);
}

static void e_destroy(struct plx_store *s)
{
    free(s);
}

static const struct plx__store_ops external_ops = {
    .set = e_set, .get = e_get, .add = e_add, .wait = e_wait,
    .check = e_check, .del = e_del, .destroy = e_destroy,
};

int plx__store_external_open(const struct plx_store_callbacks *cb, int64_t timeout_ms, struct plx_store **out)
{
    *out = NULL;
    if (!cb || cb->struct_size < offsetof(struct plx_store_callbacks, check))
        return plx__err(PLX_ERR_INVALID_ARG, "external store: callbacks missing or struct_size %u too small",
                        cb ? cb->struct_size : 0);
    if (!cb->set || !cb->get || !cb->add || !cb->wait)
        return plx__err(PLX_ERR_INVALID_ARG, "external store: set, get, add and wait are required (%s is NULL)",
                        !cb->set ? "set" : !cb->get ? "get" : !cb->add ? "add" : "wait");
    struct external *e = calloc(1, sizeof *e);
    if (!e)
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    size_t n = cb->struct_size < sizeof e->cb ? cb->struct_size : sizeof e->cb;
    memcpy(&e->cb, cb, n);
    e->cb.struct_size = sizeof e->cb;
    e->base.ops = &external_ops;
    e->base.timeout_ms = timeout_ms;
    e->base.refs = 1;
    *out = &e->base;
    return 0;
}

int plx__store_is_callers(const struct plx_store *s)
{
    return s && s->ops == &external_ops;
}
