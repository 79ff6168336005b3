/* plugin.h - small helpers for plugin authors, inline over backend.h.
 *
 * Stability: source-level helpers for ABI major 1; nothing here crosses the
 * ABI (every function is static inline, so a plugin carries its own copy
 * and works with any core that speaks the minor it negotiates).
 *
 * A plugin's plugin.c usually needs only:
 *
 *     static const struct plx_host *entry_host;
 *     static const struct plx_backend backend = {...};
 *     PLX_PLUGIN_ENTRY(backend, entry_host, 5)
 *
 * The entry point's host serves what runs before any communicator (probe);
 * comm_create keeps its args->host (plx_plugin_comm_host) in the
 * communicator, and everything on that communicator reaches the core
 * through it, so the plugin holds no process-wide host for its work.
 * Failures are reported with `return plx_plugin_error(host, PLX_ERR_X,
 * "...")`: the core keeps the message for the calling thread (a worker
 * thread reads it back with plx_plugin_last_error to hand it to the
 * request's waiter), so a plugin needs no last-error state of its own. */
#ifndef PLEXUS_PLUGIN_H
#define PLEXUS_PLUGIN_H

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defines the entry point of ABI major 1: keeps the host in host_var,
 * answers min(core minor, PLX_ABI_MINOR) and hands out backend_var. A core
 * older than min_minor is refused with a message (the plugin relies on what
 * that minor added, e.g. 3 for typed config reads). */
#define PLX_PLUGIN_ENTRY(backend_var, host_var, min_minor)                                              \
    PLX_BACKEND_EXPORT int plx_backend_entry_v1(const struct plx_host *h, uint32_t *minor,              \
                                                const struct plx_backend **out)                         \
    {                                                                                                   \
        host_var = h;                                                                                   \
        if (*minor < (uint32_t)(min_minor))                                                             \
            return h->error(h->ctx, PLX_ERR_UNSUPPORTED, "%s needs plugin ABI 1.%d; this plexus has 1.%u", \
                            (backend_var).name, (int)(min_minor), (unsigned)*minor);                    \
        if (*minor > PLX_ABI_MINOR)                                                                     \
            *minor = PLX_ABI_MINOR;                                                                     \
        *out = &(backend_var);                                                                          \
        return 0;                                                                                       \
    }

/* Record the message for the calling thread's last error and return status:
 * `return plx_plugin_error(host, PLX_ERR_TIMEOUT, "tcp: ...")`. */
static inline int plx_plugin_error(const struct plx_host *host, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int plx_plugin_error(const struct plx_host *host, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return host->error(host->ctx, status, "%s", msg);
}

/* The message of the calling thread's last error (ABI 1.11's
 * host->last_error): "" from an older host, or none. */
static inline const char *plx_plugin_last_error(const struct plx_host *host)
{
    const char *m = PLX_HAS_FIELD(host, struct plx_host, last_error) && host->last_error
                        ? host->last_error(host->ctx)
                        : NULL;
    return m ? m : "";
}

/* The communicator's instance of the host services (ABI 1.5), else
 * otherwise (the entry point's, for a core older than 1.5). */
static inline const struct plx_host *plx_plugin_comm_host(const struct plx_comm_args *a,
                                                          const struct plx_host *otherwise)
{
    return PLX_HAS_FIELD(a, struct plx_comm_args, host) && a->host ? a->host : otherwise;
}

/* Bytes per element of dtype (enum plx_dtype), 0 for an unknown one. */
static inline size_t plx_plugin_dtype_size(int dtype)
{
    static const unsigned char sizes[PLX_DTYPE_COUNT] = {
        [PLX_I8] = 1, [PLX_U8] = 1, [PLX_I32] = 4, [PLX_U32] = 4, [PLX_I64] = 8,
        [PLX_U64] = 8, [PLX_F16] = 2, [PLX_BF16] = 2, [PLX_F32] = 4, [PLX_F64] = 8,
    };
    return dtype >= 0 && dtype < PLX_DTYPE_COUNT ? sizes[dtype] : 0;
}

/* memcpy for bulk data (non-overlapping). glibc copies large blocks with
 * `rep movsb`, which some x86 cores run far slower when the destination's
 * offset from the source is not a multiple of 32 bytes, as between a
 * page-aligned shared-memory slot and a malloc'd buffer (page + 16); others
 * run it at full speed, and there splitting the copy only slows it. No
 * fixed choice is right on both, so which copy such offsets get is measured
 * at first use in each translation unit that calls plx_plugin_copy (the
 * function is static inline, so every .c file that calls it has its own
 * copy and its own remembered choice: a plugin whose ring.c and coll.c
 * both copy measures twice): 64 KiB at page + 16, one call against 2 KiB
 * calls (under glibc's rep-movsb threshold, where it uses vector moves),
 * best of 3 each, a one-off cost far below a communicator's setup; pieces
 * win only when clearly faster. Offsets that are multiples of 32 always go
 * in one call. plexus-info prints the choice and figures of its own
 * measurement; bench/copy_alias shows all three copies at every offset on
 * the machine at hand. */
#define PLX_PLUGIN_COPY_PIECE 2048u
enum { PLX_COPY_UNKNOWN, PLX_COPY_WHOLE, PLX_COPY_CHUNKED };

static inline void plx_plugin_copy_chunked(void *dst, const void *src, size_t n)
{
    /* Through a pointer the compiler cannot see into: a memcpy of a size it
     * knows to be small is otherwise inlined as `rep movs` itself. */
    static void *(*volatile const libc_memcpy)(void *, const void *, size_t) = memcpy;
    char *d = (char *)dst;
    const char *s = (const char *)src;
    for (size_t k; n; d += k, s += k, n -= k) {
        k = n < PLX_PLUGIN_COPY_PIECE ? n : PLX_PLUGIN_COPY_PIECE;
        libc_memcpy(d, s, k);
    }
}

/* Measure which copy mutually misaligned buffers should get: PLX_COPY_WHOLE
 * or PLX_COPY_CHUNKED, with the figures in why (when not NULL). */
static inline int plx_plugin_copy_measure(char *why, size_t len)
{
    enum { N = 64 << 10 };
    static void *(*volatile const libc_memcpy)(void *, const void *, size_t) = memcpy;
    char *buf = (char *)malloc(2 * N + 8192);
    if (!buf) {
        if (why)
            snprintf(why, len, "whole (no memory to measure)");
        return PLX_COPY_WHOLE;
    }
    char *s = (char *)(((uintptr_t)buf + 4095) & ~(uintptr_t)4095), *d = s + N + 4096 + 16;
    memset(s, 1, N);
    memset(d, 0, N);
    uint64_t best[2] = {UINT64_MAX, UINT64_MAX};
    for (int round = 0; round < 4; round++)
        for (int way = 0; way < 2; way++) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            if (way)
                plx_plugin_copy_chunked(d, s, N);
            else
                libc_memcpy(d, s, N);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
            if (round && ns < best[way]) /* round 0 warms the caches */
                best[way] = ns;
        }
    free(buf);
    /* Chunked only when clearly faster: the two are alike where memcpy has no slow case. */
    int pick = best[1] * 5 < best[0] * 4 ? PLX_COPY_CHUNKED : PLX_COPY_WHOLE;
    if (why)
        snprintf(why, len, "%s (64 KiB at dst-src = 16 mod 32: memcpy %.1f GB/s, 2 KiB pieces %.1f GB/s)",
                 pick == PLX_COPY_CHUNKED ? "2 KiB pieces" : "memcpy", best[0] ? (double)N / (double)best[0] : 0.0,
                 best[1] ? (double)N / (double)best[1] : 0.0);
    return pick;
}

static inline void plx_plugin_copy(void *dst, const void *src, size_t n)
{
    /* Per translation unit: measured on its first use there, then read
     * only (a race measures twice, alike). */
    static int way;
    char *d = (char *)dst;
    const char *s = (const char *)src;
    if (((uintptr_t)d - (uintptr_t)s) % 32 == 0 || n <= PLX_PLUGIN_COPY_PIECE) {
        memcpy(d, s, n);
        return;
    }
    int w = __atomic_load_n(&way, __ATOMIC_RELAXED);
    if (w == PLX_COPY_UNKNOWN) {
        w = plx_plugin_copy_measure(NULL, 0);
        __atomic_store_n(&way, w, __ATOMIC_RELAXED);
    }
    if (w == PLX_COPY_CHUNKED)
        plx_plugin_copy_chunked(d, s, n);
    else
        memcpy(d, s, n);
}

/* memmove for bulk data: overlapping regions move with memmove, the others
 * go through plx_plugin_copy. */
static inline void plx_plugin_move(void *dst, const void *src, size_t n)
{
    const char *d = (const char *)dst, *s = (const char *)src;
    if (!n || d == s)
        return;
    if (d + n <= s || s + n <= d)
        plx_plugin_copy(dst, src, n);
    else
        memmove(dst, src, n);
}

/* Typed configuration (ABI 1.3): key of the plugin's section through cfg
 * (the view comm_create got, or NULL for the process layers), already
 * validated by the core against the plugin's keys; def when unset and
 * without a declared default, or when the host has no typed reads (a test
 * harness that fills only the ABI 1.0 services). Durations are
 * nanoseconds, sizes bytes; a choice word such as "auto" reads as -1. */
#define PLX_PLUGIN_HOST_HAS(host, f) (PLX_HAS_FIELD(host, struct plx_host, f) && (host)->f)

static inline int64_t plx_plugin_config_int(const struct plx_host *host, const struct plx_config *cfg,
                                            const char *key, int64_t def)
{
    int64_t v;
    return PLX_PLUGIN_HOST_HAS(host, config_int) && host->config_int(host->ctx, cfg, key, &v) == 0 ? v : def;
}

static inline int plx_plugin_config_bool(const struct plx_host *host, const struct plx_config *cfg,
                                         const char *key, int def)
{
    int v;
    return PLX_PLUGIN_HOST_HAS(host, config_bool) && host->config_bool(host->ctx, cfg, key, &v) == 0 ? v : def;
}

/* NULL when unset; the string lives as long as cfg. */
static inline const char *plx_plugin_config_str(const struct plx_host *host, const struct plx_config *cfg,
                                                const char *key)
{
    const char *v = NULL;
    return PLX_PLUGIN_HOST_HAS(host, config_str) && host->config_str(host->ctx, cfg, key, &v) == 0 ? v : NULL;
}

/* ---- time: one deadline type, absolute CLOCK_MONOTONIC nanoseconds ---- */

#define PLX_DEADLINE_NEVER UINT64_MAX

static inline uint64_t plx_plugin_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The deadline timeout_ms from now, by the core's rule (plexus.h):
 * PLX_TIMEOUT_INFINITE never expires; any other negative timeout has
 * expired already (as 0). Too far to count in ns: never. */
static inline uint64_t plx_plugin_deadline(int64_t timeout_ms)
{
    if (timeout_ms == PLX_TIMEOUT_INFINITE)
        return PLX_DEADLINE_NEVER;
    uint64_t now = plx_plugin_now_ns(), ms = timeout_ms < 0 ? 0 : (uint64_t)timeout_ms;
    return ms >= (PLX_DEADLINE_NEVER - now) / 1000000u ? PLX_DEADLINE_NEVER : now + ms * 1000000u;
}

/* Between two looks of a plugin's own polling wait (spins: looks so far):
 * hard polling first, for latency, then yielding the core, then sleeps
 * that grow to 100 us, so a long wait leaves the core to the ranks it is
 * waiting for. */
static inline void plx_plugin_poll_pause(unsigned spins)
{
    if (spins <= 100) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, spins > 10000 ? 100000 : 5000};
    nanosleep(&ts, NULL);
}

/* A duration key (PLX_KEY_DURATION, read in ns) in milliseconds, rounded
 * down. Unset, the key's declared default applies; def_ms only where the
 * key is not declared (a host older than ABI 1.3). */
static inline int64_t plx_plugin_config_ms(const struct plx_host *host, const struct plx_config *cfg,
                                           const char *key, int64_t def_ms)
{
    int64_t ns;
    return PLX_PLUGIN_HOST_HAS(host, config_int) && host->config_int(host->ctx, cfg, key, &ns) == 0 ? ns / 1000000
                                                                                                    : def_ms;
}

/* How long comm_create (split, shrink) may wait for the others (ABI 1.10),
 * from a core of any minor; 0 there means not given. */
static inline int64_t plx_plugin_create_ms(const struct plx_comm_args *a)
{
    return PLX_HAS_FIELD(a, struct plx_comm_args, create_timeout_ms) && a->create_timeout_ms ? a->create_timeout_ms
                                                                                             : a->timeout_ms;
}

/* A condition variable on CLOCK_MONOTONIC, so plx_plugin_cond_wait_until
 * does not jump with the wall clock. */
static inline int plx_plugin_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

/* Wait on cv (mu held) until signalled or deadline; ETIMEDOUT once it has
 * passed. A cv made by plx_plugin_cond_init. */
static inline int plx_plugin_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline)
{
    if (deadline == PLX_DEADLINE_NEVER)
        return pthread_cond_wait(cv, mu);
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    return pthread_cond_timedwait(cv, mu, &ts);
}

#ifdef __cplusplus
}
#endif
#endif
