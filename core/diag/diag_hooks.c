/* diag_hooks.c - the two hook tables (comm/diag_hooks.h): none, which
 * keeps only the per-communicator hooks, and full, which also records each
 * operation in the ledger (ledger.c) and checks the fingerprint of a
 * generic collective in-band (fingerprint.c). */
#include "diag.h"

static void full_state(struct plx_comm *c, uint64_t seq, int state, const struct plx__fp *inband)
{
    if (state == PLX__OP_RUNNING) {
        plx__ledger_state(c, seq, state);
        if (inband)
            plx__fp_begin(c, inband);
        return;
    }
    if (inband)
        plx__fp_begin(c, NULL);
    plx__ledger_state(c, seq, state);
}

static int full_first(struct plx_comm *c, int is_send, int peer, void *buf, size_t bytes, uint64_t tag,
                      const struct plx__p2p_raw *raw, struct plx__fp_io **io)
{
    *io = NULL;
    if (!plx__fp_wants(c, is_send, peer, tag))
        return 0;
    return plx__fp_start(c, is_send, peer, buf, bytes, tag, raw->post, raw->release, io);
}

static int full_first_send(struct plx_comm *c, int peer, const void *buf, size_t bytes, uint64_t tag,
                           const struct plx__p2p_raw *raw, struct plx__fp_io **io)
{
    return full_first(c, 1, peer, (void *)buf, bytes, tag, raw, io);
}

static int full_first_recv(struct plx_comm *c, int peer, void *buf, size_t bytes, uint64_t tag,
                           const struct plx__p2p_raw *raw, struct plx__fp_io **io)
{
    return full_first(c, 0, peer, buf, bytes, tag, raw, io);
}

static int full_wait(struct plx_comm *c, struct plx__fp_io *io, uint64_t deadline_ns, const struct plx__p2p_raw *raw)
{
    return plx__fp_wait(c, io, deadline_ns, raw->wait, raw->release);
}

static void full_discard(struct plx_comm *c, struct plx__fp_io *io, const struct plx__p2p_raw *raw)
{
    plx__fp_discard(c, io, raw->release);
}

static unsigned checks(const struct plx_comm *c)
{
    const struct plx__diag_state *d = plx__diag_of(c);
    unsigned on = d && d->inband ? PLX__DIAG_INBAND : 0u;
    return on | (plx__fp_native_mode(c) == PLX__FP_NATIVE_EVERY ? PLX__DIAG_NATIVE_EVERY : 0u);
}

#define PER_COMM                                                                                                     \
    .open = plx__diag_create, .close = plx__diag_destroy, .checks = checks, .native_check = plx__fp_native_check, \
    .slow_wait = plx__ledger_slow_wait, .explain = plx__ledger_explain,                                      \
    .publish_mismatch = plx__diag_publish_mismatch

const struct plx__diag_hooks plx__diag_none = {.name = "none", PER_COMM};

const struct plx__diag_hooks plx__diag_full = {
    .name = "full", PER_COMM, .post = plx__ledger_post, .state = full_state, .first_send = full_first_send,
    .first_recv = full_first_recv, .wait = full_wait, .discard = full_discard,
    .post_running = plx__ledger_post_running, /* full_state(RUNNING) of a native call is the ledger's alone */
};

const struct plx__diag_hooks *plx__diag_pick(const struct plx_comm *c)
{
    const struct plx__diag_state *d = plx__diag_of(c);
    return d && d->records ? &plx__diag_full : &plx__diag_none;
}
