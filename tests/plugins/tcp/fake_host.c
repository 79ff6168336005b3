/* fake_host.c - see fake_host.h. */
#include "fake_host.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kv {
    char *key;
    void *val;
    size_t len;
    struct kv *next;
};

struct plx_store {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct kv *head;
};

static _Thread_local char last[512];

const char *fake_last_error(void)
{
    return last;
}

static void h_log(void *ctx, int level, const char *fmt, ...)
{
    (void)ctx;
    if (level > PLX_LOG_WARN && !getenv("FAKE_HOST_VERBOSE"))
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[plugin] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static int h_error(void *ctx, int status, const char *fmt, ...)
{
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last, sizeof last, fmt, ap);
    va_end(ap);
    return status;
}

static const char *h_config(void *ctx, const char *key)
{
    (void)ctx;
    char name[96] = "PLEXUS_TCP_";
    size_t n = strlen(name);
    for (const char *k = key; *k && n + 1 < sizeof name; k++)
        name[n++] = (char)toupper((unsigned char)*k);
    name[n] = 0;
    return getenv(name);
}

/* ABI 1.3's typed reads, from the same variables: bare numbers in the unit
 * the key's name ends with, as the core reads them (durations in ns). */
static int h_config_str(void *ctx, const struct plx_config *cfg, const char *key, const char **out)
{
    (void)cfg;
    const char *v = h_config(ctx, key);
    if (!v)
        return PLX_ERR_NOT_FOUND;
    *out = v;
    return 0;
}

static int h_config_int(void *ctx, const struct plx_config *cfg, const char *key, int64_t *out)
{
    const char *v;
    if (h_config_str(ctx, cfg, key, &v) != 0)
        return PLX_ERR_NOT_FOUND;
    size_t n = strlen(key);
    int64_t unit = n > 3 && !strcmp(key + n - 3, "_ms") ? 1000000 : n > 3 && !strcmp(key + n - 3, "_us") ? 1000 : 1;
    *out = !strcmp(v, "auto") ? -1 : strtoll(v, NULL, 10) * unit;
    return 0;
}

static int h_config_bool(void *ctx, const struct plx_config *cfg, const char *key, int *out)
{
    const char *v;
    if (h_config_str(ctx, cfg, key, &v) != 0)
        return PLX_ERR_NOT_FOUND;
    *out = !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes");
    return 0;
}

static uint64_t h_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct kv *find(struct plx_store *s, const char *key)
{
    for (struct kv *k = s->head; k; k = k->next)
        if (!strcmp(k->key, key))
            return k;
    return NULL;
}

static int h_set(struct plx_store *s, const char *key, const void *val, size_t len)
{
    pthread_mutex_lock(&s->mu);
    struct kv *k = find(s, key);
    if (!k) {
        k = calloc(1, sizeof *k);
        k->key = strdup(key);
        k->next = s->head;
        s->head = k;
    }
    free(k->val);
    k->val = malloc(len ? len : 1);
    memcpy(k->val, val, len);
    k->len = len;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int h_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&s->mu);
    struct kv *k;
    while (!(k = find(s, key)))
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
            pthread_mutex_unlock(&s->mu);
            return h_error(NULL, PLX_ERR_TIMEOUT, "store: key '%s' missing after %lld ms", key, (long long)timeout_ms);
        }
    *val = malloc(k->len ? k->len : 1);
    memcpy(*val, k->val, k->len);
    *len = k->len;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Counters as decimal text, as the core's stores keep them. */
static int h_add(struct plx_store *s, const char *key, int64_t d, int64_t *res)
{
    pthread_mutex_lock(&s->mu);
    struct kv *k = find(s, key);
    if (!k) {
        k = calloc(1, sizeof *k);
        k->key = strdup(key);
        k->next = s->head;
        s->head = k;
    }
    char buf[32] = "0";
    if (k->val)
        snprintf(buf, sizeof buf, "%.*s", (int)(k->len < 31 ? k->len : 31), (const char *)k->val);
    *res = strtoll(buf, NULL, 10) + d;
    free(k->val);
    k->len = (size_t)snprintf(buf, sizeof buf, "%lld", (long long)*res);
    k->val = strdup(buf);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int h_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    for (size_t i = 0; i < n; i++) {
        void *v;
        size_t l;
        int rc = h_get(s, keys[i], &v, &l, timeout_ms);
        if (rc)
            return rc;
        free(v);
    }
    return 0;
}

const struct plx_host fake_host = {
    .struct_size = sizeof(struct plx_host),
    .abi_minor = 4, /* a 1.4 core: the plugin keeps its own requests, as for every core before 1.5 */
    .log = h_log,
    .error = h_error,
    .config_get = h_config,
    .clock_ns = h_clock,
    .store_set = h_set,
    .store_get = h_get,
    .store_add = h_add,
    .store_wait = h_wait,
    .free = free,
    .config_str = h_config_str,
    .config_bool = h_config_bool,
    .config_int = h_config_int,
};

struct plx_store *fake_store_new(void)
{
    struct plx_store *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    return s;
}

void fake_store_free(struct plx_store *s)
{
    for (struct kv *k = s->head, *n; k; k = n) {
        n = k->next;
        free(k->key);
        free(k->val);
        free(k);
    }
    free(s);
}

const struct plx_backend *fake_load(const char *path)
{
    /* The fake store lives in this process: the rendezvous host is this
     * one, so tcp publishes loopback, as the raw-wire peers here expect. */
    setenv("MASTER_ADDR", "127.0.0.1", 0);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    plx_backend_entry_v1_fn entry = h ? (plx_backend_entry_v1_fn)dlsym(h, PLX_BACKEND_ENTRY_V1_NAME) : NULL;
    const struct plx_backend *b = NULL;
    uint32_t minor = PLX_ABI_MINOR;
    if (!entry || entry(&fake_host, &minor, &b) || !b) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        exit(1);
    }
    return b;
}
