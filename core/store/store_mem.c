/* store_mem.c - mem://NAME: a store shared by the threads of one process
 * that open the same NAME. How in-process ranks (the sim backend, tests,
 * plexus-bench --ranks) find each other. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store.h"

enum { MEM_BUCKETS = 4096 };

struct entry {
    char *key;
    void *val;
    size_t len;
    struct entry *next;
};

/* One table per NAME, shared by every handle opened on it. */
struct table {
    char *name;
    int users;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Hashed: thousands of in-process ranks each keep keys here, and a
     * single list made every set cost a walk over all of them. */
    struct entry *buckets[MEM_BUCKETS];
    struct table *next;
};

struct handle {
    struct plx_store base;
    struct table *t;
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct table *registry;

static struct entry **bucket(struct table *t, const char *key)
{
    uint32_t h = 2166136261u;
    for (const char *c = key; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    return &t->buckets[h % MEM_BUCKETS];
}

static struct entry *find(struct table *t, const char *key)
{
    for (struct entry *e = *bucket(t, key); e; e = e->next)
        if (!strcmp(e->key, key))
            return e;
    return NULL;
}

static int put(struct table *t, const char *key, const void *val, size_t len)
{
    void *copy = malloc(len ? len : 1);
    if (!copy)
        return plx__err(PLX_ERR_NOMEM, "mem store: out of memory");
    if (len)
        memcpy(copy, val, len);
    struct entry *e = find(t, key);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->key = strdup(key))) {
            free(e);
            free(copy);
            return plx__err(PLX_ERR_NOMEM, "mem store: out of memory");
        }
        struct entry **b = bucket(t, key);
        e->next = *b;
        *b = e;
    }
    free(e->val);
    e->val = copy;
    e->len = len;
    pthread_cond_broadcast(&t->cv);
    return 0;
}

static int m_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    struct table *t = ((struct handle *)s)->t;
    pthread_mutex_lock(&t->mu);
    int rc = put(t, key, val, len);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

static struct timespec deadline_of(int64_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

/* Wait under t->mu until every key exists. */
static int wait_locked(struct table *t, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct timespec dl = deadline_of(timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        size_t missing = n;
        for (size_t i = 0; i < n; i++)
            if (find(t, keys[i])) {
                missing--;
            } else {
                if (timeout_ms == PLX_TIMEOUT_INFINITE) {
                    pthread_cond_wait(&t->cv, &t->mu);
                } else if (pthread_cond_timedwait(&t->cv, &t->mu, &dl) == ETIMEDOUT && !find(t, keys[i])) {
                    return plx__err(PLX_ERR_TIMEOUT, "mem store '%s': key '%s' not set within %lld ms", t->name,
                                    keys[i], (long long)timeout_ms);
                }
                break;
            }
        if (missing == 0)
            return 0;
    }
}

static int m_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    struct table *t = ((struct handle *)s)->t;
    pthread_mutex_lock(&t->mu);
    int rc = wait_locked(t, &key, 1, timeout_ms);
    if (rc == 0) {
        struct entry *e = find(t, key);
        *val = malloc(e->len ? e->len : 1);
        if (*val) {
            memcpy(*val, e->val, e->len);
            *len = e->len;
        } else {
            rc = plx__err(PLX_ERR_NOMEM, "mem store: out of memory");
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

static int m_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct table *t = ((struct handle *)s)->t;
    pthread_mutex_lock(&t->mu);
    int rc = wait_locked(t, keys, n, timeout_ms);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* Integers are kept as decimal text, as TCPStore does, so views agree. */
static int m_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result)
{
    struct table *t = ((struct handle *)s)->t;
    pthread_mutex_lock(&t->mu);
    struct entry *e = find(t, key);
    int64_t v = 0;
    if (e) {
        char buf[32] = {0};
        memcpy(buf, e->val, e->len < 31 ? e->len : 31);
        v = strtoll(buf, NULL, 10);
    }
    v += delta;
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    int rc = put(t, key, text, (size_t)n);
    pthread_mutex_unlock(&t->mu);
    if (result)
        *result = v;
    return rc;
}

static int m_check(struct plx_store *s, const char *key)
{
    struct table *t = ((struct handle *)s)->t;
    pthread_mutex_lock(&t->mu);
    int found = find(t, key) != NULL;
    pthread_mutex_unlock(&t->mu);
    return found;
}

static int m_del(struct plx_store *s, const char *key)
{
    struct table *t = ((struct handle *)s)->t;
    pthread_mutex_lock(&t->mu);
    for (struct entry **pe = bucket(t, key); *pe; pe = &(*pe)->next) {
        if (!strcmp((*pe)->key, key)) {
            struct entry *e = *pe;
            *pe = e->next;
            free(e->key);
            free(e->val);
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static void m_destroy(struct plx_store *s)
{
    struct handle *h = (struct handle *)s;
    struct table *t = h->t;
    pthread_mutex_lock(&registry_mu);
    if (--t->users == 0) {
        for (struct table **pt = &registry; *pt; pt = &(*pt)->next)
            if (*pt == t) {
                *pt = t->next;
                break;
            }
        for (size_t i = 0; i < MEM_BUCKETS; i++)
            for (struct entry *e = t->buckets[i], *next; e; e = next) {
                next = e->next;
                free(e->key);
                free(e->val);
                free(e);
            }
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t->name);
        free(t);
    }
    pthread_mutex_unlock(&registry_mu);
    free(h);
}

static const struct plx__store_ops mem_ops = {
    .set = m_set, .get = m_get, .add = m_add, .wait = m_wait,
    .check = m_check, .del = m_del, .destroy = m_destroy,
};

int plx__store_mem_open(const struct plx_config *v, const char *rest, int rank, int size, int64_t timeout_ms,
                        struct plx_store **out)
{
    (void)v;
    (void)rank;
    (void)size;
    (void)timeout_ms;
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        return plx__err(PLX_ERR_NOMEM, "mem store: out of memory");
    pthread_mutex_lock(&registry_mu);
    struct table *t = registry;
    while (t && strcmp(t->name, rest))
        t = t->next;
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || !(t->name = strdup(rest))) {
            pthread_mutex_unlock(&registry_mu);
            free(t);
            free(h);
            return plx__err(PLX_ERR_NOMEM, "mem store: out of memory");
        }
        pthread_mutex_init(&t->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->cv, &ca);
        pthread_condattr_destroy(&ca);
        t->next = registry;
        registry = t;
    }
    t->users++;
    pthread_mutex_unlock(&registry_mu);
    h->base.ops = &mem_ops;
    h->t = t;
    *out = &h->base;
    return 0;
}
