/* diag_hooks.h - the one door between comm and diagnosis (core/diag/).
 * diag sits above comm: it reads the communicator and drives its backend
 * through comm's headers, while comm (dispatch in coll.c, executor.c,
 * work.c and hier.c, the p2p adapter, comm.c's life cycle) calls nothing of
 * diag but the hooks of the table in c->dh, whose type is declared here and
 * whose tables diag fills. A communicator starts with plx__diag_none; its
 * open hook makes c's state and puts in c->dh the table c's configuration
 * asks for: full, or none (every per-operation hook absent, so the call
 * sites make no call at all) when [core] fingerprint is off and
 * ledger_entries is 0. A test puts a fake table in c->dh, as core/algo's
 * tests put a fake transport under algo/.
 *
 * The hooks of one operation come in this order: post (issued), state
 * RUNNING, for each message of a generic collective first_send or
 * first_recv (and wait or discard for each message a first_* took), state
 * DONE or FAILED. A native collective has no messages here; a user's
 * send or receive has no hooks. Stability: internal. */
#ifndef PLX_CORE_DIAG_HOOKS_H
#define PLX_CORE_DIAG_HOOKS_H

#include "comm.h"
#include "plexus/ledger.h"

/* The states of an operation, as the ledger file has them (plexus/ledger.h). */
enum plx__op_state {
    PLX__OP_EMPTY = PLX_LEDGER_EMPTY,
    PLX__OP_POSTED = PLX_LEDGER_POSTED,
    PLX__OP_RUNNING = PLX_LEDGER_RUNNING,
    PLX__OP_DONE = PLX_LEDGER_DONE,
    PLX__OP_FAILED = PLX_LEDGER_FAILED,
};

/* What comm reads of c's diagnosis itself (the rest is diag's): the p2p
 * adapter's waits call the slow_wait hook once they last slow_ns. */
struct plx__diag {
    uint64_t slow_ns;
};

/* What the checks hook reports. */
#define PLX__DIAG_INBAND 1u       /* [core] fingerprint: hier.c checks the call across hosts first */
#define PLX__DIAG_NATIVE_EVERY 2u /* native_check before each native collective */

struct plx__fp_io;
/* head: head_bytes in front of buf in the same message (a backend with
 * PLX_CAP_P2P_HEAD only); mem: req_size bytes for the backend's request
 * (ABI 1.5), or NULL. */
typedef int (*plx__post_fn)(struct plx_comm *c, int is_send, int peer, void *head, size_t head_bytes, void *buf,
                            size_t bytes, uint64_t tag, void *mem, void **req);
typedef int (*plx__wait_fn)(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer);
typedef void (*plx__free_fn)(struct plx_comm *c, void *req);

/* The adapter's plain isend/irecv, wait and free, for a first_* hook that
 * takes the message (it posts it with the fingerprint in front). */
struct plx__p2p_raw {
    plx__post_fn post;
    plx__wait_fn wait;
    plx__free_fn release;
};

struct plx__diag_hooks {
    const char *name;
    /* Per communicator (absent in a test's fake: the wrappers below
     * check). open: make c's state (from: a communicator whose job c
     * shares, or NULL) and put c's table in c->dh. */
    int (*open)(struct plx_comm *c, const struct plx_comm *from, const char *job);
    void (*close)(struct plx_comm *c); /* c->dh back to plx__diag_none */
    unsigned (*checks)(const struct plx_comm *c); /* PLX__DIAG_* */
    /* Every rank's native collective fp agrees (PLX__DIAG_NATIVE_EVERY). */
    int (*native_check)(struct plx_comm *c, const struct plx__fp *fp);
    /* From the waits of the p2p adapter every ~100 ms once a wait lasts
     * slow_ns: 0, or an error to end the wait with (a mismatch found). */
    int (*slow_wait)(struct plx_comm *c, uint64_t waited_ns, int peer);
    /* For a failure: add to msg where the other ranks are; returns the
     * status to report (status, or PLX_ERR_MISMATCH). */
    int (*explain)(struct plx_comm *c, int status, char *msg, size_t len);
    /* A mismatch c's ranks cannot see themselves (hier.c: between ranks
     * of one host, found before its cross step): their slow waits in c,
     * and their failures, end with msg. */
    void (*publish_mismatch)(struct plx_comm *c, const char *msg);
    /* Per operation. post: fp was issued; bytes: the user's payload. */
    void (*post)(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes);
    /* It changed state (enum plx__op_state). inband: the user's call when
     * the core's algorithm runs it (RUNNING starts the in-band check, DONE
     * or FAILED ends it); NULL for a native collective. */
    void (*state)(struct plx_comm *c, uint64_t seq, int state, const struct plx__fp *inband);
    /* A message of the running generic collective to / from peer: 0 with
     * *io NULL leaves it to the caller to post plainly; 0 with *io set: the
     * hook posted it (the peer's first of this collective, fingerprinted);
     * else an error. */
    int (*first_send)(struct plx_comm *c, int peer, const void *buf, size_t bytes, uint64_t tag,
                      const struct plx__p2p_raw *raw, struct plx__fp_io **io);
    int (*first_recv)(struct plx_comm *c, int peer, void *buf, size_t bytes, uint64_t tag,
                      const struct plx__p2p_raw *raw, struct plx__fp_io **io);
    /* Complete (a receive: check) or drop what a first_* took. */
    int (*wait)(struct plx_comm *c, struct plx__fp_io *io, uint64_t deadline_ns, const struct plx__p2p_raw *raw);
    void (*discard)(struct plx_comm *c, struct plx__fp_io *io, const struct plx__p2p_raw *raw);
    /* Optional: post, then state RUNNING (inband NULL), as one hook, for a
     * native collective that starts as it is issued; absent, the two. */
    void (*post_running)(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes);
};

/* The table a communicator starts and ends with (diag_hooks.c). */
extern const struct plx__diag_hooks plx__diag_none;

static inline int plx__diag_open(struct plx_comm *c, const struct plx_comm *from, const char *job)
{
    return c->dh->open ? c->dh->open(c, from, job) : 0;
}

static inline void plx__diag_close(struct plx_comm *c)
{
    if (c->dh->close)
        c->dh->close(c);
}

static inline unsigned plx__diag_checks(const struct plx_comm *c)
{
    return c->dh->checks ? c->dh->checks(c) : 0;
}

static inline void plx__diag_publish(struct plx_comm *c, const char *msg)
{
    if (c->dh->publish_mismatch)
        c->dh->publish_mismatch(c, msg);
}

static inline int plx__diag_native_check(struct plx_comm *c, const struct plx__fp *fp)
{
    return c->dh->native_check ? c->dh->native_check(c, fp) : 0;
}

static inline int plx__diag_slow_wait(struct plx_comm *c, uint64_t waited_ns, int peer)
{
    return c->dh->slow_wait ? c->dh->slow_wait(c, waited_ns, peer) : 0;
}

static inline int plx__diag_explain(struct plx_comm *c, int status, char *msg, size_t len)
{
    return c->dh->explain ? c->dh->explain(c, status, msg, len) : status;
}

static inline void plx__diag_post(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes)
{
    if (c->dh->post)
        c->dh->post(c, fp, bytes);
}

static inline void plx__diag_state(struct plx_comm *c, uint64_t seq, int state, const struct plx__fp *inband)
{
    if (c->dh->state)
        c->dh->state(c, seq, state, inband);
}

static inline void plx__diag_post_running(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes)
{
    if (c->dh->post_running) {
        c->dh->post_running(c, fp, bytes);
        return;
    }
    plx__diag_post(c, fp, bytes);
    plx__diag_state(c, fp->seq, PLX__OP_RUNNING, NULL);
}

#endif
