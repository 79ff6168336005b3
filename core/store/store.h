/* store.h - the bootstrap key-value store every plugin rendezvous through.
 * Implementations: mem:// (threads of one process), tcp:// (PyTorch
 * TCPStore protocol), file:// (Gloo FileStore layout). A store handle may be
 * a prefixed view of another so keys are namespaced per communicator.
 * Stability: internal. */
#ifndef PLX_CORE_STORE_H
#define PLX_CORE_STORE_H

#include <stddef.h>
#include <stdint.h>

struct plx_config; /* config.h: a communicator's view of the configuration */

struct plx_store;

struct plx__store_ops {
    int (*set)(struct plx_store *s, const char *key, const void *val, size_t len);
    /* Waits up to timeout_ms (-2 infinite) for key; *val malloc'ed. */
    int (*get)(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms);
    int (*add)(struct plx_store *s, const char *key, int64_t delta, int64_t *result);
    int (*wait)(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms);
    /* 1 if key exists now, 0 if not. */
    int (*check)(struct plx_store *s, const char *key);
    int (*del)(struct plx_store *s, const char *key);
    void (*destroy)(struct plx_store *s);
    /* Optional: 1 and why in out (n bytes) if the store's connection broke,
     * else 0. */
    int (*lost)(const struct plx_store *s, char *out, size_t n);
};

/* Base of every store; implementations embed it first. */
struct plx_store {
    const struct plx__store_ops *ops;
    int64_t timeout_ms; /* used when a call passes -1 */
    int refs;
    uint64_t cap_ns;    /* no call waits past this (0: no cap): plx__store_cap */
};

/* While a communicator is made, no call on s (and the stores under a view)
 * waits past deadline_ns, whatever timeout it names; 0 lifts the cap. */
void plx__store_cap(struct plx_store *s, uint64_t deadline_ns);
/* The timeout of calls that pass -1 (and of those that take none), on s
 * and the stores under a view. */
void plx__store_set_timeout(struct plx_store *s, int64_t timeout_ms);
/* timeout_ms shortened to what is left before s's cap, if it has one. */
int64_t plx__store_capped_ms(const struct plx_store *s, int64_t timeout_ms);

/* Open the store named by url for a job of `size` ranks where this is `rank`:
 *   mem://NAME        process-local, shared by threads opening the same NAME
 *   tcp://HOST:PORT   rank 0 hosts the server (unless PLEXUS_STORE_HOSTED=1);
 *                     rank -1 joins as a client only (a launcher hosts it)
 *   file:///DIR       shared directory
 * Errors name the url. A tcp:// store takes its limits and secret from the
 * process layers; plx__store_open_in from the view v. */
int plx__store_open(const char *url, int rank, int size, int64_t timeout_ms, struct plx_store **out);
int plx__store_open_in(const struct plx_config *v, const char *url, int rank, int size, int64_t timeout_ms,
                       struct plx_store **out);
/* A view of base where every key is "prefix/key". Takes a reference on base. */
int plx__store_prefixed(struct plx_store *base, const char *prefix, struct plx_store **out);
void plx__store_release(struct plx_store *s);
/* A communicator's rank leaves its view (from plx__store_prefixed) for
 * good: it publishes the keys it created through the view and counts
 * itself out; the last of size ranks to leave deletes every rank's keys,
 * so a job that makes communicators without end keeps a store of bounded
 * size. Each rank calls it once, after its last use of the view's keys
 * (its keys are read by the others until all have left). Not a view, or
 * a lost store: nothing to do. */
int plx__store_view_leave(struct plx_store *view, int rank, int size, int64_t timeout_ms);
/* While probe is set (NULL: no more), a wait or get through view longer
 * than a second waits in slices and asks probe(arg, why, n) between them;
 * a probe that returns 1 ends the wait with PLX_ERR_PEER_LOST and its why
 * (a rank whose process is gone). Set it only while no other thread uses
 * the view. */
typedef int (*plx__store_probe_fn)(void *arg, char *why, size_t n);
void plx__store_view_watch(struct plx_store *view, plx__store_probe_fn probe, void *arg);
void plx__store_retain(struct plx_store *s);
/* 1 and the reason if s (or the store a view is of) lost its connection. */
int plx__store_lost(const struct plx_store *s, char *out, size_t n);

/* Convenience wrappers that apply the default timeout. */
int plx__store_set(struct plx_store *s, const char *key, const void *val, size_t len);
int plx__store_get(struct plx_store *s, const char *key, void **val, size_t *len, int64_t timeout_ms);
int plx__store_add(struct plx_store *s, const char *key, int64_t delta, int64_t *result);
int plx__store_wait(struct plx_store *s, const char *const *keys, size_t n, int64_t timeout_ms);

/* Registry of url schemes, so tcp/file stores live in their own files. */
typedef int (*plx__store_open_fn)(const struct plx_config *v, const char *rest, int rank, int size,
                                  int64_t timeout_ms, struct plx_store **out);
int plx__store_mem_open(const struct plx_config *v, const char *rest, int rank, int size, int64_t timeout_ms,
                        struct plx_store **out);
int plx__store_tcp_open(const struct plx_config *v, const char *rest, int rank, int size, int64_t timeout_ms,
                        struct plx_store **out);
int plx__store_file_open(const struct plx_config *v, const char *rest, int rank, int size, int64_t timeout_ms,
                         struct plx_store **out);
/* store_external.c: the caller's callbacks as a store (copied; the user
 * pointer is borrowed). */
struct plx_store_callbacks;
int plx__store_external_open(const struct plx_store_callbacks *cb, int64_t timeout_ms, struct plx_store **out);
/* 1 if s is the caller's own store (plx__store_external_open). */
int plx__store_is_callers(const struct plx_store *s);

#endif
