/* diag_hooks.h - the one door from dispatch into diagnosis. Dispatch
 * (coll.c, executor.c, work.c) and the p2p adapter (p2p.c) call these
 * hooks and nothing else of fingerprint.c and ledger.c on an operation's
 * way; plx__diag_create picks the table once per communicator: full, or
 * none (every hook absent, so the call sites make no call at all) when
 * [core] fingerprint is off and ledger_entries is 0. A test puts a fake
 * table in c->dh, as core/algo's tests put a fake transport under algo/.
 *
 * The hooks of one operation come in this order: post (issued), state
 * RUNNING, for each message of a generic collective first_send or
 * first_recv (and wait or discard for each message a first_* took), state
 * DONE or FAILED. A native collective has no messages here; a user's
 * send or receive has no hooks. Stability: internal. */
#ifndef PLX_CORE_DIAG_HOOKS_H
#define PLX_CORE_DIAG_HOOKS_H

#include "comm.h"

/* The adapter's plain isend/irecv, wait and free, for a first_* hook that
 * takes the message (it posts it with the fingerprint in front). */
struct plx__p2p_raw {
    plx__post_fn post;
    plx__wait_fn wait;
    plx__free_fn release;
};

struct plx__diag_hooks {
    const char *name;
    /* Operation fp was issued; bytes: the user's payload. */
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

extern const struct plx__diag_hooks plx__diag_none;
extern const struct plx__diag_hooks plx__diag_full;

/* The table c's configuration asks for (c->diag made). */
const struct plx__diag_hooks *plx__diag_pick(const struct plx_comm *c);

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
