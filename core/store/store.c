/* store.c - store dispatch by url scheme, prefixed views and the wrappers
 * that apply a store's default timeout. */
#include "store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"

static const struct {
    const char *scheme;
    plx__store_open_fn open;
} schemes[] = {
    {"mem://", plx__store_mem_open},
    {"tcp://", plx__store_tcp_open},
    {"file://", plx__store_file_open},
};

int plx__store_open(const char *url, int rank, int size, int64_t timeout_ms, struct plx_store **out)
{
    return plx__store_open_in(NULL, url, rank, size, timeout_ms, out);
}

int plx__store_open_in(const struct plx_config *v, const char *url, int rank, int size, int64_t timeout_ms,
                       struct plx_store **out)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].scheme);
        if (!strncmp(url, schemes[i].scheme, n)) {
            int rc = schemes[i].open(v, url + n, rank, size, timeout_ms, out);
            if (rc == 0 && *out) {
                (*out)->timeout_ms = timeout_ms;
                (*out)->refs = 1;
            }
            return rc;
        }
    }
    return plx__err(PLX_ERR_INVALID_ARG, "rendezvous url '%s': unknown scheme (use tcp://host:port, file:///dir, "
                    "mem://name or env://)", url);
}

void plx__store_retain(struct plx_store *s)
{
    if (s)
        __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
}

int plx__store_lost(const struct plx_store *s, char *out, size_t n)
{
    return s && s->ops->lost ? s->ops->lost(s, out, n) : 0;
}

void plx__store_release(struct plx_store *s)
{
    if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        s->ops->destroy(s);
}

static int64_t eff_timeout(struct plx_store *s, int64_t t)
{
    return plx__store_capped_ms(s, t == -1 ? s->timeout_ms : t);
}

int64_t plx__store_capped_ms(const struct plx_store *s, int64_t timeout_ms)
{
    uint64_t cap = __atomic_load_n(&s->cap_ns, __ATOMIC_RELAXED);
    if (!cap)
        return timeout_ms;
    int64_t left = plx__ms_left(cap);
    return timeout_ms == PLX_TIMEOUT_INFINITE || timeout_ms < 0 || left < timeout_ms ? left : timeout_ms;
}

int plx__store_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    return s->ops->set(s, key, val, len);
}

int plx__store_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    return s->ops->get(s, key, val, len, eff_timeout(s, timeout_ms));
}

int plx__store_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    return s->ops->add(s, key, delta, result);
}

int plx__store_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    return s->ops->wait(s, keys, n, eff_timeout(s, timeout_ms));
}

/* ---- prefixed view ---------------------------------------------------- */

struct prefixed {
    struct plx_store base;
    struct plx_store *inner;
    char *prefix;
    pthread_mutex_t mu; /* keys: a communicator's threads may write at once */
    char **keys;        /* what this view created (set, add), for plx__store_view_leave */
    size_t nkeys, cap;
    plx__store_probe_fn probe; /* asked between slices of a long wait, or NULL */
    void *probe_arg;
    char gone[512];            /* what the probe said when it ended a wait, or "" */
};

/* Remember key as one this view created; a key written again (a counter)
 * is kept once while the list is short, and a duplicate later only costs a
 * second delete. */
static void remember(struct prefixed *p, const char *key)
{
    pthread_mutex_lock(&p->mu);
    int seen = 0;
    for (size_t i = 0; i < p->nkeys && p->nkeys < 256 && !seen; i++)
        seen = !strcmp(p->keys[i], key);
    if (!seen && p->nkeys == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        char **k = realloc(p->keys, cap * sizeof *k);
        if (k) {
            p->keys = k;
            p->cap = cap;
        }
    }
    if (!seen && p->nkeys < p->cap && (p->keys[p->nkeys] = strdup(key)))
        p->nkeys++;
    pthread_mutex_unlock(&p->mu);
}

static char *join(const struct prefixed *p, const char *key)
{
    size_t n = strlen(p->prefix) + strlen(key) + 2;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s/%s", p->prefix, key);
    return k;
}

#define WITH_KEY(call)                                                         \
    struct prefixed *p = (struct prefixed *)s;                                 \
    char *k = join(p, key);                                                    \
    if (!k)                                                                    \
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");                \
    int rc = (call);                                                           \
    free(k);                                                                   \
    return rc

static int p_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    remember((struct prefixed *)s, key);
    WITH_KEY(p->inner->ops->set(p->inner, k, val, len));
}

/* The slice of a watched wait. */
#define PROBE_MS 1000

/* A wait on the inner store in slices, the probe asked between them: a
 * rank that is gone ends the wait with the probe's reason, not the
 * timeout. t < 0: no limit. */
static int watched_wait(struct prefixed *p, const char *const *ks, size_t n, int64_t t)
{
    int64_t left = t;
    for (;;) {
        int64_t slice = t < 0 || left > PROBE_MS ? PROBE_MS : left;
        int rc = p->inner->ops->wait(p->inner, ks, n, slice);
        if (rc != PLX_ERR_TIMEOUT || (t >= 0 && (left -= slice) <= 0))
            return rc;
        char why[512];
        plx__store_probe_fn probe = __atomic_load_n(&p->probe, __ATOMIC_ACQUIRE);
        if (probe && probe(p->probe_arg, why, sizeof why)) {
            pthread_mutex_lock(&p->mu);
            snprintf(p->gone, sizeof p->gone, "%s", why);
            pthread_mutex_unlock(&p->mu);
            return plx__err(PLX_ERR_PEER_LOST, "%s", why);
        }
    }
}

static int p_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t t)
{
    struct prefixed *pw = (struct prefixed *)s;
    if (__atomic_load_n(&pw->probe, __ATOMIC_ACQUIRE) && (t < 0 || t > PROBE_MS)) {
        char *kw = join(pw, key);
        if (!kw)
            return plx__err(PLX_ERR_NOMEM, "store: out of memory");
        int rc = watched_wait(pw, (const char *const *)&kw, 1, t);
        free(kw);
        if (rc != 0)
            return rc;
    }
    WITH_KEY(p->inner->ops->get(p->inner, k, val, len, t));
}

static int p_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    if (delta != 0) /* add 0 reads a counter, which another rank made */
        remember((struct prefixed *)s, key);
    WITH_KEY(p->inner->ops->add(p->inner, k, delta, result));
}

static int p_check(struct plx_store *s, const char *key)
{
    WITH_KEY(p->inner->ops->check(p->inner, k));
}

static int p_del(struct plx_store *s, const char *key)
{
    WITH_KEY(p->inner->ops->del(p->inner, k));
}

static int p_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t t)
{
    struct prefixed *p = (struct prefixed *)s;
    char **ks = calloc(n ? n : 1, sizeof *ks);
    int rc = ks ? 0 : PLX_ERR_NOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!(ks[i] = join(p, keys[i])))
            rc = PLX_ERR_NOMEM;
    if (rc == 0 && __atomic_load_n(&p->probe, __ATOMIC_ACQUIRE) && (t < 0 || t > PROBE_MS))
        rc = watched_wait(p, (const char *const *)ks, n, t);
    else if (rc == 0)
        rc = p->inner->ops->wait(p->inner, (const char *const *)ks, n, t);
    else
        plx__err(rc, "store: out of memory");
    for (size_t i = 0; ks && i < n; i++)
        free(ks[i]);
    free(ks);
    return rc;
}

static void p_destroy(struct plx_store *s)
{
    struct prefixed *p = (struct prefixed *)s;
    plx__store_release(p->inner);
    for (size_t i = 0; i < p->nkeys; i++)
        free(p->keys[i]);
    free(p->keys);
    pthread_mutex_destroy(&p->mu);
    free(p->prefix);
    free(p);
}

/* A wait the probe ended (a rank gone), else the inner store's loss. */
static int p_lost(const struct plx_store *s, char *out, size_t n)
{
    struct prefixed *p = (struct prefixed *)s;
    pthread_mutex_lock(&p->mu);
    int said = p->gone[0] != '\0';
    if (said)
        snprintf(out, n, "%s", p->gone);
    pthread_mutex_unlock(&p->mu);
    return said || plx__store_lost(p->inner, out, n);
}

static const struct plx__store_ops prefixed_ops = {
    .set = p_set, .get = p_get, .add = p_add, .wait = p_wait,
    .check = p_check, .del = p_del, .destroy = p_destroy, .lost = p_lost,
};

int plx__store_prefixed(struct plx_store *base, const char *prefix, struct plx_store **out)
{
    struct prefixed *p = calloc(1, sizeof *p);
    if (!p || !(p->prefix = strdup(prefix))) {
        free(p);
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    }
    p->base.ops = &prefixed_ops;
    p->base.timeout_ms = base->timeout_ms;
    p->base.refs = 1;
    p->inner = base;
    pthread_mutex_init(&p->mu, NULL);
    plx__store_retain(base);
    *out = &p->base;
    return 0;
}

/* "a\nb\n": the keys this view created. */
static char *key_list(struct prefixed *p, size_t *len)
{
    pthread_mutex_lock(&p->mu);
    size_t n = 1;
    for (size_t i = 0; i < p->nkeys; i++)
        n += strlen(p->keys[i]) + 1;
    char *list = malloc(n), *o = list;
    for (size_t i = 0; list && i < p->nkeys; i++)
        o += sprintf(o, "%s\n", p->keys[i]);
    if (list)
        *o = '\0';
    *len = list ? (size_t)(o - list) : 0;
    pthread_mutex_unlock(&p->mu);
    return list;
}

static int p_inner(struct prefixed *p, const char *key, char **out)
{
    if (!(*out = join(p, key)))
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    return 0;
}

/* The last one to leave: every rank's list, then every key on it. */
static int delete_all(struct prefixed *p, int size, int64_t timeout_ms)
{
    int rc = 0;
    for (int r = 0; r < size && rc == 0; r++) {
        char name[48], *k = NULL;
        snprintf(name, sizeof name, "plexus-keys/%d", r);
        void *val = NULL;
        size_t len = 0;
        if ((rc = p_inner(p, name, &k)) == 0 && (rc = p->inner->ops->get(p->inner, k, &val, &len, timeout_ms)) == 0) {
            char *list = val;
            for (char *line = list, *nl; rc == 0 && line < list + len && (nl = memchr(line, '\n', (size_t)(list + len - line)));
                 line = nl + 1) {
                *nl = '\0';
                char *lk = NULL;
                if ((rc = p_inner(p, line, &lk)) == 0)
                    rc = p->inner->ops->del(p->inner, lk);
                free(lk);
            }
            if (rc == 0)
                rc = p->inner->ops->del(p->inner, k);
        }
        free(val);
        free(k);
    }
    char *left = NULL;
    if (rc == 0 && (rc = p_inner(p, "plexus-left", &left)) == 0)
        rc = p->inner->ops->del(p->inner, left);
    free(left);
    return rc;
}

void plx__store_view_watch(struct plx_store *view, plx__store_probe_fn probe, void *arg)
{
    if (view->ops != &prefixed_ops)
        return;
    struct prefixed *p = (struct prefixed *)view;
    if (probe)
        p->probe_arg = arg;
    __atomic_store_n(&p->probe, probe, __ATOMIC_RELEASE);
}

int plx__store_view_leave(struct plx_store *view, int rank, int size, int64_t timeout_ms)
{
    if (view->ops != &prefixed_ops)
        return 0;
    struct prefixed *p = (struct prefixed *)view;
    char name[48], *k = NULL, why[8];
    snprintf(name, sizeof name, "plexus-keys/%d", rank);
    if (plx__store_lost(p->inner, why, sizeof why))
        return 0; /* the store is gone, and its keys with it */
    size_t len = 0;
    char *list = key_list(p, &len);
    if (!list)
        return plx__err(PLX_ERR_NOMEM, "store: out of memory");
    int64_t left = 0;
    int rc = p_inner(p, name, &k);
    if (rc == 0)
        rc = p->inner->ops->set(p->inner, k, list, len);
    free(k);
    free(list);
    k = NULL;
    if (rc == 0 && (rc = p_inner(p, "plexus-left", &k)) == 0)
        rc = p->inner->ops->add(p->inner, k, 1, &left);
    free(k);
    if (rc == 0 && left == size)
        rc = delete_all(p, size, timeout_ms);
    return rc;
}

void plx__store_cap(struct plx_store *s, uint64_t deadline_ns)
{
    for (; s; s = s->ops == &prefixed_ops ? ((struct prefixed *)s)->inner : NULL)
        __atomic_store_n(&s->cap_ns, deadline_ns, __ATOMIC_RELAXED);
}

void plx__store_set_timeout(struct plx_store *s, int64_t timeout_ms)
{
    for (; s; s = s->ops == &prefixed_ops ? ((struct prefixed *)s)->inner : NULL)
        s->timeout_ms = timeout_ms;
}
