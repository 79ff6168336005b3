/* A store the caller owns, handed to plx_comm_init() as callbacks
 * (struct plx_store_callbacks): ranks as threads of this process, on the
 * backend named by argv[1] (sim, tcp), rendezvous through a small key-value
 * map written here, never through a url. Checks that the backend's
 * bootstrap went through the callbacks (keys under the communicator's
 * name), that a split child bootstraps through them too, that a missing key
 * times out with the callback's status, that a failing callback's message
 * reaches plx_last_error(), and that a store plus an init url is refused.
 *
 * usage: test_store_external BACKEND P */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

static int failures;
#define CHECK(cond)                                                                                              \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,            \
                    plx_last_error());                                                                           \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                                  \
        }                                                                                                        \
    } while (0)

/* ---- the caller's store: a list of (key, value) under one lock ---------- */

struct entry {
    char *key;
    void *val;
    size_t len;
    struct entry *next;
};

struct kv {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct entry *head;
    int calls, fail_next_set;
    int saw_world_key, saw_split_key;
};

static struct entry *find(struct kv *s, const char *key)
{
    for (struct entry *e = s->head; e; e = e->next)
        if (!strcmp(e->key, key))
            return e;
    return NULL;
}

static void put(struct kv *s, const char *key, const void *val, size_t len)
{
    struct entry *e = find(s, key);
    if (!e) {
        e = calloc(1, sizeof *e);
        e->key = strdup(key);
        e->next = s->head;
        s->head = e;
    }
    free(e->val);
    e->val = malloc(len ? len : 1);
    memcpy(e->val, val, len);
    e->len = len;
    if (!strncmp(key, "world/", 6))
        s->saw_world_key = 1;
    if (strstr(key, "/split"))
        s->saw_split_key = 1;
    pthread_cond_broadcast(&s->cv);
}

/* Wait until every key exists or timeout_ms passes (-2: forever). */
static int wait_keys(struct kv *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    int64_t ms = timeout_ms < 0 ? 3600000 : timeout_ms;
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    for (;;) {
        size_t have = 0;
        while (have < n && find(s, keys[have]))
            have++;
        if (have == n)
            return 0;
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT)
            return PLX_ERR_TIMEOUT;
    }
}

static int cb_set(void *user, const char *key, const void *val, size_t len)
{
    struct kv *s = user;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    int fail = s->fail_next_set;
    s->fail_next_set = 0;
    if (!fail)
        put(s, key, val, len);
    pthread_mutex_unlock(&s->mu);
    return fail ? PLX_ERR_SYSTEM : 0;
}

static int cb_get(void *user, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    struct kv *s = user;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    int rc = wait_keys(s, &key, 1, timeout_ms);
    if (rc == 0) {
        struct entry *e = find(s, key);
        *val = malloc(e->len ? e->len : 1);
        memcpy(*val, e->val, e->len);
        *len = e->len;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int cb_add(void *user, const char *key, int64_t delta, int64_t *result)
{
    struct kv *s = user;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    struct entry *e = find(s, key);
    char buf[32];
    long long v = e ? strtoll(e->val, NULL, 10) : 0; /* TCPStore keeps integers as decimal text */
    v += delta;
    snprintf(buf, sizeof buf, "%lld", v);
    put(s, key, buf, strlen(buf) + 1);
    *result = v;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int cb_wait(void *user, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct kv *s = user;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    int rc = wait_keys(s, keys, n, timeout_ms);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- ranks ---------------------------------------------------------------- */

struct job {
    struct kv *kv;
    const char *backend;
    int rank, size;
};

static void *rank_main(void *p)
{
    struct job *j = p;
    struct plx_store_callbacks cb = {
        .struct_size = sizeof cb, .user = j->kv, .set = cb_set, .get = cb_get, .add = cb_add, .wait = cb_wait,
    };
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = j->backend;
    o.rank = j->rank;
    o.size = j->size;
    o.timeout_ms = 20000;
    o.store = &cb;
    struct plx_comm *c = NULL, *child = NULL;
    int rc = plx_comm_init(&o, &c);
    CHECK(rc == 0);
    if (rc)
        return NULL;
    int32_t x = j->rank + 1, sum = 0;
    CHECK(plx_allreduce(c, &x, &sum, 1, PLX_I32, PLX_SUM) == 0);
    CHECK(sum == j->size * (j->size + 1) / 2);
    /* A child by split bootstraps through the same callbacks. */
    CHECK(plx_comm_split(c, j->rank % 2, j->rank, &child) == 0);
    if (child) {
        int32_t y = 1, n = 0;
        CHECK(plx_allreduce(child, &y, &n, 1, PLX_I32, PLX_SUM) == 0);
        CHECK(n == (j->size + 1 - j->rank % 2) / 2);
    }
    plx_comm_destroy(child);
    plx_comm_destroy(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_store_external BACKEND P\n");
        return 2;
    }
    const char *backend = argv[1];
    int P = atoi(argv[2]);
    struct kv kv = {.head = NULL};
    pthread_mutex_init(&kv.mu, NULL);
    pthread_cond_init(&kv.cv, NULL);

    struct job jobs[16];
    pthread_t th[16];
    for (int i = 0; i < P; i++) {
        jobs[i] = (struct job){&kv, backend, i, P};
        pthread_create(&th[i], NULL, rank_main, &jobs[i]);
    }
    for (int i = 0; i < P; i++)
        pthread_join(th[i], NULL);
    CHECK(kv.calls > 0);
    CHECK(kv.saw_world_key || P == 1);
    CHECK(kv.saw_split_key || P == 1);

    /* One rank of two alone: the backend's bootstrap waits for the other
     * through the callbacks and times out. */
    struct plx_store_callbacks cb = {
        .struct_size = sizeof cb, .user = &kv, .set = cb_set, .get = cb_get, .add = cb_add, .wait = cb_wait,
    };
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.rank = 0;
    o.size = 2;
    o.timeout_ms = 300;
    o.store = &cb;
    o.name = "lonely";
    struct plx_comm *c = NULL;
    int rc = plx_comm_init(&o, &c);
    CHECK(rc == PLX_ERR_TIMEOUT && c == NULL);
    printf("alone: %s\n", plx_last_error());

    /* A failing callback: its status, and a message naming the store. */
    kv.fail_next_set = 1;
    o.name = "failing";
    o.rank = 1; /* sim/tcp: a non-zero rank sets its own key first */
    rc = plx_comm_init(&o, &c);
    CHECK(rc != 0 && c == NULL);
    printf("failing set: %s\n", plx_last_error());
    kv.fail_next_set = 0;

    /* Both a store and a url: refused. */
    o.init = "tcp://127.0.0.1:1";
    CHECK(plx_comm_init(&o, &c) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "both") != NULL);
    /* Required callbacks missing. */
    o.init = NULL;
    cb.wait = NULL;
    CHECK(plx_comm_init(&o, &c) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "wait") != NULL);

    for (struct entry *e = kv.head, *next; e; e = next) {
        next = e->next;
        free(e->key);
        free(e->val);
        free(e);
    }
    printf("external store on %s with %d ranks: %s\n", backend, P, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
