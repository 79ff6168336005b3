/* p2p.c - the point-to-point adapter the generic algorithms drive: the
 * backend's isend/irecv/wait behind struct plx__p2p, with one absolute
 * deadline per wait and records reused from a per-communicator pool. The
 * first message to / from each peer of a collective carries its
 * fingerprint (the diagnosis hooks, diag_hooks.h), and a slow wait calls
 * the diagnosis (ledger.c). */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "diag_hooks.h"
#include "error.h"
#include "host.h"
#include "log.h"

/* One transfer of a generic collective. Kept for reuse in c->preq_pool: the
 * algorithms of a communicator run one at a time (the executor's busy flag),
 * so the pool needs no lock and a message in steady state allocates nothing. */
struct plx__preq {
    void *req;
    struct plx__fp_io *fp; /* taken by a first_send / first_recv hook (diag_hooks.h) */
    int peer;
    int is_send;
    struct plx__preq *next;
    /* The backend's request itself when it asks for req_size (ABI 1.5):
     * one record per transfer. */
    _Alignas(max_align_t) unsigned char mem[];
};

static void preq_release(struct plx_comm *c, struct plx__preq *p)
{
    p->next = c->preq_pool;
    c->preq_pool = p;
}

void plx__preq_pool_free(struct plx_comm *c)
{
    for (struct plx__preq *p = c->preq_pool, *n; p; p = n) {
        n = p->next;
        free(p);
    }
    c->preq_pool = NULL;
}

static int post_raw(struct plx_comm *c, int is_send, int peer, void *head, size_t head_bytes, void *buf,
                    size_t bytes, uint64_t tag, void *mem, void **req)
{
    struct plx_p2p_args a = {
        .struct_size = sizeof a, .peer = peer, .buf = buf, .bytes = bytes, .tag = tag,
        .mem_kind = PLX_MEM_HOST, .timeout_ms = c->timeout_ms, .head = head, .head_bytes = head_bytes,
    };
    *req = mem;
    return is_send ? c->be->ops.isend(c->bc, &a, req) : c->be->ops.irecv(c->bc, &a, req);
}

static void free_raw(struct plx_comm *c, void *req)
{
    c->be->ops.req_free(c->bc, req);
}

static int wait_raw(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer);
static const struct plx__p2p_raw raw_ops = {.post = post_raw, .wait = wait_raw, .release = free_raw};

static int start(struct plx_comm *c, int is_send, int peer, const void *buf, size_t bytes, uint64_t tag, void **out)
{
    struct plx__preq *p = c->preq_pool;
    if (p)
        c->preq_pool = p->next;
    else if (!(p = malloc(sizeof *p + c->be->ops.req_size)))
        return plx__err(PLX_ERR_NOMEM, "out of memory");
    p->req = NULL;
    p->fp = NULL;
    /* The first message to / from each peer of a collective carries its
     * fingerprint: the hook posts that one itself. */
    const struct plx__diag_hooks *dh = c->dh;
    int rc = 0;
    if (is_send ? dh->first_send != NULL : dh->first_recv != NULL)
        rc = is_send ? dh->first_send(c, peer, buf, bytes, tag, &raw_ops, &p->fp)
                     : dh->first_recv(c, peer, (void *)buf, bytes, tag, &raw_ops, &p->fp);
    if (rc == 0 && !p->fp)
        rc = post_raw(c, is_send, peer, NULL, 0, (void *)buf, bytes, tag, c->be->ops.req_size ? p->mem : NULL,
                      &p->req);
    if (rc != 0) {
        preq_release(c, p);
        return rc;
    }
    p->peer = peer;
    p->is_send = is_send;
    *out = p;
    return 0;
}

static int a_isend(void *ctx, int peer, const void *buf, size_t bytes, uint64_t tag, void **req)
{
    return start(ctx, 1, peer, buf, bytes, tag, req);
}

static int a_irecv(void *ctx, int peer, void *buf, size_t bytes, uint64_t tag, void **req)
{
    return start(ctx, 0, peer, buf, bytes, tag, req);
}

#define SLICE_NS (100 * UINT64_C(1000000))
#define YIELD_LOST_NS 200000u /* well above a peer rank's hand-back, well below a time slice */
/* One call to the deadline (ABI 1.3): the backend's comm_abort ends it.
 * With diagnosis on, the first call ends where the wait turns slow, and
 * from there it waits in slices to the same deadline. now0: the coarse
 * clock as the wait began, where the caller read it (0: not read). */
static int wait_req_until(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer, uint64_t now0)
{
    const struct plx__diag *d = c->diag;
    uint64_t end = deadline_ns, t0 = 0, until = end;
    if (d) {
        t0 = now0 ? now0 : plx__clock_coarse_ns(); /* never ahead of the exact clock: slow_ns ends no earlier */
        if (t0 + d->slow_ns < until)
            until = t0 + d->slow_ns;
    }
    for (;;) {
        int rc = c->be->ops.wait_until(c->bc, req, until);
        if (rc != PLX_ERR_TIMEOUT)
            return rc;
        int done = 0; /* a request that completed with a timeout of its own is done */
        rc = c->be->ops.test(c->bc, req, &done);
        if (done)
            return rc;
        if (until >= end)
            return PLX__STILL_PENDING;
        if (__atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE))
            return plx__err(PLX_ERR_REVOKED, "communicator '%s' was revoked", c->name);
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
            return plx__err(PLX_ERR_ABORTED, "communicator '%s' was aborted", c->name);
        uint64_t now = plx__clock_ns();
        if ((rc = plx__diag_slow_wait(c, now - t0, peer)) != 0)
            return rc;
        until = now + SLICE_NS < end ? now + SLICE_NS : end;
    }
}

/* Slices of the backend's wait, or test with a back-off where it has none;
 * revoke, abort and the diagnosis looked at between them. now0 as above:
 * the first look's time too. */
static int wait_req_polling(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer, uint64_t now0)
{
    const struct plx__diag *d = c->diag;
    const int64_t slice_ms = SLICE_NS / 1000000;
    unsigned spins = 0;
    uint64_t t0 = d ? (now0 ? now0 : plx__clock_coarse_ns()) : 0;
    /* The first look is within a tick of t0, far from slow: diag's
     * state, another line per wait, is read from the second on. */
    int first = 1;
    for (;;) {
        if (__atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE))
            return plx__err(PLX_ERR_REVOKED, "communicator '%s' was revoked", c->name);
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
            return plx__err(PLX_ERR_ABORTED, "communicator '%s' was aborted", c->name);
        /* Every wait reads the clock: the coarse one (never ahead, a tick
         * behind at most) while the deadline is slices away, the exact one
         * near it, so a slice never overshoots it and a passed deadline is
         * seen at once. */
        uint64_t now = now0 ? now0 : plx__clock_coarse_ns();
        now0 = 0; /* each later look reads it afresh */
        if (now >= deadline_ns || deadline_ns - now <= 2 * SLICE_NS)
            now = plx__clock_ns();
        int slow = d && !first ? plx__diag_slow_wait(c, now - t0, peer) : 0; /* cheap until slow (ledger.c) */
        first = 0;
        if (slow)
            return slow;
        if (now >= deadline_ns) {
            int done = 0;
            int rc = c->be->ops.test(c->bc, req, &done);
            return done ? rc : PLX__STILL_PENDING;
        }
        if (c->be->ops.wait) {
            int64_t ms = deadline_ns - now < SLICE_NS ? (int64_t)((deadline_ns - now) / 1000000) + 1 : slice_ms;
            if (ms > slice_ms)
                ms = slice_ms;
            int rc = c->be->ops.wait(c->bc, req, ms);
            if (rc != PLX_ERR_TIMEOUT)
                return rc;
            /* A request that completed with a timeout of its own is done. */
            int done = 0;
            rc = c->be->ops.test(c->bc, req, &done);
            if (done)
                return rc;
        } else {
            int done = 0;
            int rc = c->be->ops.test(c->bc, req, &done);
            if (done)
                return rc;
            /* Back off: spin briefly for latency, then yield, then sleep.
             * A yield that lost the core for longer than a peer rank's
             * hand-back went to foreign work that keeps it for a time
             * slice: sleep from then on, as shm's pace.c does. */
            if (++spins > 64) {
                if (spins < 256) {
                    uint64_t before = plx__clock_ns();
                    sched_yield();
                    if (plx__clock_ns() - before > YIELD_LOST_NS)
                        spins = 256;
                } else {
                    struct timespec ts = {0, spins < 2048 ? 20000 : 200000};
                    nanosleep(&ts, NULL);
                }
            }
        }
    }
}

/* plx__wait_req, where the caller read the coarse clock as the wait
 * began (now0; 0: not read). */
static int wait_req_at(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer, uint64_t now0)
{
    if (c->be->ops.wait_until && (c->caps.flags & PLX_CAP_ABORT))
        return wait_req_until(c, req, deadline_ns, peer, now0);
    return wait_req_polling(c, req, deadline_ns, peer, now0);
}

/* Wait for a backend request until deadline_ns (PLX__NEVER: none). Checks the
 * abort flag between slices so plx_comm_abort unblocks even a backend
 * without comm_abort. Once the wait is slow (diag's slow_ns, 500 ms) it
 * calls plx__diag_slow_wait at least every SLICE_NS, which publishes this
 * rank's position and ends the wait with a mismatch another rank found or
 * the awaited peer's position shows (peer: that rank, -1: unknown). Does
 * not free the request. Returns the request's status, or
 * PLX__STILL_PENDING when the deadline passed first (distinct from a
 * request that itself ended in PLX_ERR_TIMEOUT). */
int plx__wait_req(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer)
{
    return wait_req_at(c, req, deadline_ns, peer, 0);
}

static int wait_raw(struct plx_comm *c, void *req, uint64_t deadline_ns, int peer)
{
    /* Every message's wait reads the clock once, for its message and as
     * the wait's start: three reads a wait were a few percent of a
     * simulated rank's step. */
    uint64_t t0 = plx__clock_coarse_ns();
    int rc = wait_req_at(c, req, deadline_ns, peer, t0);
    /* On a coroutine the wait may have let thousands of other ranks run:
     * fetch the lines of c that the next message reads all at once, not
     * one miss after another. */
    for (size_t at = 0; at < offsetof(struct plx_comm, caps); at += 64)
        __builtin_prefetch((const char *)c + at);
    /* The deadline is the operation's: an earlier step (or, on a coroutine,
     * other ranks' turns) may have spent most of it, so this wait's share
     * alone would read as a wrong limit. */
    if (rc == PLX__STILL_PENDING)
        rc = plx__err(PLX_ERR_TIMEOUT, "rank %d waited for rank %d on %s until the operation's deadline passed "
                      "(timeout; %llu ms in this wait)", c->rank, peer, c->be->name,
                      (unsigned long long)((plx__clock_coarse_ns() - t0) / 1000000));
    c->be->ops.req_free(c->bc, req);
    return rc;
}

static int a_wait(void *ctx, void *req, uint64_t deadline_ns)
{
    struct plx_comm *c = ctx;
    struct plx__preq *p = req;
    int rc = p->fp ? c->dh->wait(c, p->fp, deadline_ns, &raw_ops) : wait_raw(c, p->req, deadline_ns, p->peer);
    preq_release(c, p);
    return rc;
}

static void a_discard(void *ctx, void *req)
{
    struct plx_comm *c = ctx;
    struct plx__preq *p = req;
    if (p->fp)
        c->dh->discard(c, p->fp, &raw_ops);
    else
        free_raw(c, p->req);
    preq_release(c, p);
}

static void a_charge_reduce(void *ctx, size_t bytes)
{
    struct plx_comm *c = ctx;
    c->be->sim.charge_reduce(c->bc, bytes);
}

static void a_op_footprint(void *ctx, size_t bytes)
{
    struct plx_comm *c = ctx;
    c->be->sim.op_footprint(c->bc, bytes);
}

void plx__p2p_init(struct plx_comm *c)
{
    c->p2p = (struct plx__p2p){
        .ctx = c, .rank = c->rank, .size = c->size, .timing_only = !!(c->caps.flags & PLX_CAP_TIMING_ONLY),
        .isend = a_isend, .irecv = a_irecv, .wait = a_wait, .discard = a_discard,
        .charge_reduce = c->be->sim.charge_reduce ? a_charge_reduce : NULL,
        .op_footprint = c->be->sim.op_footprint ? a_op_footprint : NULL,
    };
}
