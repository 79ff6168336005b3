/* rpc.h - remote procedure calls between the ranks of a communicator, and
 * remote references (RRefs) to values that stay on the rank that made them.
 *
 * Stability: stable API; option structs start with struct_size and are
 * append-only.
 *
 * An agent (struct plx_rpc) runs over its own communicators, split from the
 * caller's, and one progress thread per process that serves incoming calls:
 * handlers are registered by name and take bytes and give bytes. A call
 * waits at most its timeout; a handler's error comes back to the caller with
 * its message; a lost rank fails every pending call with PLX_ERR_PEER_LOST
 * and a message naming it. Handlers run on the progress thread: they may
 * start asynchronous calls and release RRefs, but never block on another
 * call (doing so is refused with PLX_ERR_INVALID_USAGE).
 *
 * RRefs are reference counted across ranks: the owner keeps a value while
 * any rank holds a reference, including references passed on to a third
 * rank (plx_rref_fork gives the bytes to pass; plx_rref_from_wire turns
 * them back into an RRef that owns that count). plx_rpc_shutdown() waits
 * until no rank has a call outstanding.
 *
 * Backends: needs PLX_CAP_THREAD_SAFE and PLX_CAP_ANY_SOURCE (tcp and sim
 * have both); others are refused with PLX_ERR_UNSUPPORTED.
 */
#ifndef PLEXUS_RPC_H
#define PLEXUS_RPC_H

#include "plexus/plexus.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLX_RPC_NAME_MAX 63   /* bytes of a handler name */
#define PLX_RREF_WIRE_BYTES 16 /* a forwarded RRef, as bytes */

struct plx_rpc;
struct plx_rpc_future;
struct plx_rref;

/* A handler: args (len bytes, borrowed during the call) from rank caller.
 * On success return 0 and set *result to memory from malloc() (the agent
 * frees it; NULL for none) and *result_len. On failure return a negative
 * PLX_ERR_* and write a message into err (err_cap bytes): the caller's
 * error carries it. */
typedef int (*plx_rpc_handler)(void *ctx, int caller, const void *args, size_t len, void **result,
                               size_t *result_len, char *err, size_t err_cap);

struct plx_rpc_options {
    uint32_t struct_size;
    int64_t timeout_ms; /* default per-call timeout; PLX_TIMEOUT_DEFAULT or 0: 30000;
                           PLX_TIMEOUT_INFINITE: none */
};
PLX_API void plx_rpc_options_init(struct plx_rpc_options *o);

/* Collective over comm: split private communicators, start the progress
 * thread. comm is borrowed during the call. Free with plx_rpc_destroy().
 * Errors: PLX_ERR_UNSUPPORTED (backend without thread safety or
 * any-source receives), the split's errors. */
PLX_API int plx_rpc_create(struct plx_comm *comm, const struct plx_rpc_options *o, struct plx_rpc **out);

/* Register a handler under name (copied); ctx is borrowed until destroy.
 * Register before other ranks may call it (e.g. before a barrier):
 * a call to a name not registered yet fails with PLX_ERR_NOT_FOUND. */
PLX_API int plx_rpc_register(struct plx_rpc *rpc, const char *name, plx_rpc_handler fn, void *ctx);

/* Call name on rank dst with args and wait for its result (*result from
 * malloc, caller frees with free(); may be NULL if result_len is 0).
 * timeout_ms: milliseconds, PLX_TIMEOUT_DEFAULT for the agent's default or
 * PLX_TIMEOUT_INFINITE (as everywhere in plexus, plexus.h). Errors:
 * PLX_ERR_TIMEOUT, PLX_ERR_PEER_LOST (naming the rank), the handler's
 * status with its message, PLX_ERR_NOT_FOUND (no such handler). */
PLX_API int plx_rpc_sync(struct plx_rpc *rpc, int dst, const char *name, const void *args, size_t len,
                         void **result, size_t *result_len, int64_t timeout_ms);

/* Start a call; *fut is completed by the progress thread. args is copied. */
PLX_API int plx_rpc_async(struct plx_rpc *rpc, int dst, const char *name, const void *args, size_t len,
                          int64_t timeout_ms, struct plx_rpc_future **fut);
/* *done = 1 once the call has ended (then plx_rpc_wait returns at once). */
PLX_API int plx_rpc_test(struct plx_rpc_future *fut, int *done);
/* Wait for the call (within its timeout), hand over its result as
 * plx_rpc_sync does, and free fut. result may be NULL to drop it. */
PLX_API int plx_rpc_wait(struct plx_rpc_future *fut, void **result, size_t *result_len);

/* ---- remote references ----------------------------------------------- */

/* Run name on rank owner; the owner keeps the result and *out refers to
 * it (free with plx_rref_release). owner may be this rank. */
PLX_API int plx_rpc_remote(struct plx_rpc *rpc, int owner, const char *name, const void *args, size_t len,
                           int64_t timeout_ms, struct plx_rref **out);
PLX_API int plx_rref_owner(const struct plx_rref *r);
PLX_API uint64_t plx_rref_id(const struct plx_rref *r);
/* A copy of the value (from malloc, caller frees with free()). */
PLX_API int plx_rref_to_here(struct plx_rpc *rpc, const struct plx_rref *r, void **value, size_t *len,
                             int64_t timeout_ms);
/* Take one more reference for another rank: the owner counts it (this
 * waits for the owner's acknowledgement) and wire receives
 * PLX_RREF_WIRE_BYTES bytes to send. Exactly one plx_rref_from_wire (on
 * any rank) must consume them. Not from inside a handler. */
PLX_API int plx_rref_fork(struct plx_rpc *rpc, const struct plx_rref *r, void *wire, int64_t timeout_ms);
/* An RRef owning the count that wire (from plx_rref_fork) carries. No
 * message is sent; allowed inside handlers. */
PLX_API int plx_rref_from_wire(struct plx_rpc *rpc, const void *wire, size_t len, struct plx_rref **out);
/* Drop this reference and free r; the owner frees the value when the last
 * holder releases it. Does not wait (plx_rpc_shutdown waits for the
 * owner's acknowledgement). release(NULL) is a no-op. */
PLX_API int plx_rref_release(struct plx_rpc *rpc, struct plx_rref *r);

/* Values this rank owns now (for tests and leak checks). */
PLX_API size_t plx_rpc_owned_count(struct plx_rpc *rpc);

/* Collective: wait until no rank has a call outstanding (requests,
 * releases and forks included; the ranks agree by repeated allreduce
 * until two rounds see the same work and none pending), then stop the
 * progress thread. New calls are refused afterwards; owned values stay
 * (plx_rpc_owned_count) until destroy. Errors: PLX_ERR_TIMEOUT, a lost
 * rank. */
PLX_API int plx_rpc_shutdown(struct plx_rpc *rpc, int64_t timeout_ms);
/* Free the agent (stopping its thread first if shutdown was not reached).
 * destroy(NULL) is a no-op. */
PLX_API void plx_rpc_destroy(struct plx_rpc *rpc);

#ifdef __cplusplus
}
#endif
#endif
