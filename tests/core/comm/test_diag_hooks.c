/* test_diag_hooks.c - comm reaches diagnosis only through its hook table
 * (core/comm/diag_hooks.h), in the documented order, with the user's call.
 *
 * Ranks are threads on sim with native collectives off (the core's
 * algorithms over the p2p adapter). Each rank puts a fake table in its
 * communicator that logs every call; its first_send / first_recv take the
 * first message to / from each peer of an operation (as the real one does)
 * and post it plainly through the adapter's raw ops, so the collective still
 * has to deliver right. Checked, per rank:
 *  - an allreduce (3 ranks, 3 f32) and a broadcast from rank 1: post with
 *    the user's call (seq, kind, dtype, op, count, root normalised) and its
 *    bytes, then state RUNNING with that call as inband, then only messages
 *    of this operation (first_send / first_recv to another rank, a tag of
 *    this seq), each message the fake took waited for exactly once after it
 *    was taken, every peer talked to taken once per direction, and last
 *    state DONE with the call; the results are right;
 *  - a user's send / receive: no call at all;
 *  - the table chosen: full by default and with only the ledger or only the
 *    fingerprint on; none, every hook absent, with both off, and then a
 *    collective leaves the ledger's and the in-band check's state untouched
 *    (the full table moves it, so the check can fail). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "comm.h"
#include "diag.h"
#include "ranks.h"

enum { P = 3, MAXEV = 512, MAXIO = 64 };

static int failures;

enum ev_kind { EV_POST, EV_STATE, EV_SEND, EV_RECV, EV_WAIT, EV_DISCARD };

struct ev {
    enum ev_kind kind;
    struct plx__fp fp; /* post: the call; state: inband (if has_inband) */
    int has_inband, state, peer;
    uint64_t seq, bytes, tag;
    struct plx__fp_io *io; /* send/recv: what the fake took (NULL: left to the adapter); wait/discard: which */
};

/* The fake's own record of a message it took. */
struct plx__fp_io {
    void *req;
    int peer, is_send;
    void *mem; /* the backend's request (req_size), when it has one */
};

struct rank_log {
    struct ev ev[MAXEV];
    int n, overflow;
    struct plx__fp_io io[MAXIO];
    int nio;
    int took_send[P], took_recv[P]; /* this operation: first message taken */
};

static struct rank_log logs[P];

static struct ev *add(struct plx_comm *c, enum ev_kind k)
{
    struct rank_log *l = &logs[c->rank];
    if (l->n == MAXEV) {
        l->overflow = 1;
        return &l->ev[MAXEV - 1];
    }
    struct ev *e = &l->ev[l->n++];
    memset(e, 0, sizeof *e);
    e->kind = k;
    return e;
}

static void fake_post(struct plx_comm *c, const struct plx__fp *fp, uint64_t bytes)
{
    struct ev *e = add(c, EV_POST);
    e->fp = *fp;
    e->seq = fp->seq;
    e->bytes = bytes;
}

static void fake_state(struct plx_comm *c, uint64_t seq, int state, const struct plx__fp *inband)
{
    struct ev *e = add(c, EV_STATE);
    e->seq = seq;
    e->state = state;
    e->has_inband = inband != NULL;
    if (inband)
        e->fp = *inband;
    if (state == PLX__OP_RUNNING) {
        memset(logs[c->rank].took_send, 0, sizeof logs[c->rank].took_send);
        memset(logs[c->rank].took_recv, 0, sizeof logs[c->rank].took_recv);
    }
}

static int fake_first(struct plx_comm *c, int is_send, int peer, void *buf, size_t bytes, uint64_t tag,
                      const struct plx__p2p_raw *raw, struct plx__fp_io **io)
{
    struct rank_log *l = &logs[c->rank];
    struct ev *e = add(c, is_send ? EV_SEND : EV_RECV);
    e->peer = peer;
    e->bytes = bytes;
    e->tag = tag;
    *io = NULL;
    int *took = is_send ? l->took_send : l->took_recv;
    if (peer < 0 || peer >= P || took[peer] || l->nio == MAXIO)
        return 0;
    struct plx__fp_io *x = &l->io[l->nio++];
    x->peer = peer;
    x->is_send = is_send;
    x->req = NULL;
    if (c->be->ops.req_size && !x->mem && !(x->mem = malloc(c->be->ops.req_size)))
        return PLX_ERR_NOMEM;
    int rc = raw->post(c, is_send, peer, NULL, 0, buf, bytes, tag, c->be->ops.req_size ? x->mem : NULL, &x->req);
    if (rc != 0)
        return rc;
    took[peer] = 1;
    *io = e->io = x;
    return 0;
}

static int fake_first_send(struct plx_comm *c, int peer, const void *buf, size_t bytes, uint64_t tag,
                           const struct plx__p2p_raw *raw, struct plx__fp_io **io)
{
    return fake_first(c, 1, peer, (void *)buf, bytes, tag, raw, io);
}

static int fake_first_recv(struct plx_comm *c, int peer, void *buf, size_t bytes, uint64_t tag,
                           const struct plx__p2p_raw *raw, struct plx__fp_io **io)
{
    return fake_first(c, 0, peer, buf, bytes, tag, raw, io);
}

static int fake_wait(struct plx_comm *c, struct plx__fp_io *io, uint64_t deadline_ns, const struct plx__p2p_raw *raw)
{
    add(c, EV_WAIT)->io = io;
    return raw->wait(c, io->req, deadline_ns, io->peer);
}

static void fake_discard(struct plx_comm *c, struct plx__fp_io *io, const struct plx__p2p_raw *raw)
{
    add(c, EV_DISCARD)->io = io;
    raw->release(c, io->req);
}

static const struct plx__diag_hooks fake = {
    .name = "fake", .post = fake_post, .state = fake_state, .first_send = fake_first_send,
    .first_recv = fake_first_recv, .wait = fake_wait, .discard = fake_discard,
};

/* The log of one operation against the call it should carry; *seq gets
 * its sequence number. */
static void check_op(int rank, const struct plx__fp *want, uint64_t bytes, uint64_t *seq)
{
    const struct rank_log *l = &logs[rank];
    CHECK(!l->overflow);
    CHECK(l->n >= 3);
    if (l->n < 3)
        return;
    const struct ev *first = &l->ev[0], *run = &l->ev[1], *last = &l->ev[l->n - 1];
    *seq = first->seq;
    struct plx__fp w = *want;
    w.seq = first->seq;
    CHECK(first->kind == EV_POST && plx__fp_equal(&first->fp, &w) && first->bytes == bytes);
    CHECK(run->kind == EV_STATE && run->state == PLX__OP_RUNNING && run->seq == w.seq && run->has_inband &&
          plx__fp_equal(&run->fp, &w));
    CHECK(last->kind == EV_STATE && last->state == PLX__OP_DONE && last->seq == w.seq && last->has_inband &&
          plx__fp_equal(&last->fp, &w));
    int sends[P] = {0}, recvs[P] = {0}, took_s[P] = {0}, took_r[P] = {0};
    for (int i = 2; i < l->n - 1; i++) {
        const struct ev *e = &l->ev[i];
        if (e->kind == EV_SEND || e->kind == EV_RECV) {
            CHECK(e->peer >= 0 && e->peer < P && e->peer != rank);
            CHECK((e->tag & PLX_TAG_CORE_BIT) && e->tag >> 24 == plx__algo_tag(w.seq, 0) >> 24);
            if (e->peer < 0 || e->peer >= P)
                continue;
            (e->kind == EV_SEND ? sends : recvs)[e->peer]++;
            if (e->io)
                (e->kind == EV_SEND ? took_s : took_r)[e->peer]++;
            int waited = 0; /* a message taken is waited for (or dropped) once, after it was taken */
            for (int j = i + 1; e->io && j < l->n - 1; j++)
                waited += (l->ev[j].kind == EV_WAIT || l->ev[j].kind == EV_DISCARD) && l->ev[j].io == e->io;
            CHECK(!e->io || waited == 1);
            int before = 0;
            for (int j = 2; e->io && j < i; j++)
                before += (l->ev[j].kind == EV_WAIT || l->ev[j].kind == EV_DISCARD) && l->ev[j].io == e->io;
            CHECK(before == 0);
        } else {
            CHECK(e->kind == EV_WAIT); /* no post or state inside the operation; no discard on success */
        }
    }
    int talked = 0;
    for (int p = 0; p < P; p++) {
        CHECK(took_s[p] == (sends[p] > 0) && took_r[p] == (recvs[p] > 0));
        talked += sends[p] + recvs[p];
    }
    CHECK(talked > 0);
}

static void reset_log(int rank)
{
    logs[rank].n = logs[rank].overflow = 0;
    logs[rank].nio = 0;
}

static int fake_rank(struct rank_ctx *x, int init_rc)
{
    CHECK(init_rc == 0);
    if (init_rc)
        return 1;
    struct plx_comm *c = x->comm;
    int r = x->rank;
    CHECK(c->dh == &plx__diag_full);
    c->dh = &fake;
    reset_log(r);
    float v[3] = {1.0f * r, 2.0f * r, 3.0f + r};
    CHECK(plx_allreduce(c, v, v, 3, PLX_F32, PLX_SUM) == 0);
    CHECK(v[0] == 3.0f && v[1] == 6.0f && v[2] == 12.0f);
    uint64_t s0 = 0, s1 = 0;
    check_op(r, &(struct plx__fp){.count = 3, .coll = PLX_COLL_ALLREDUCE, .dtype = PLX_F32, .op = PLX_SUM, .root = -1},
             12, &s0);

    reset_log(r);
    int b[2] = {r == 1 ? 7 : 0, r == 1 ? 9 : 0};
    CHECK(plx_broadcast(c, b, 2, PLX_I32, 1) == 0);
    CHECK(b[0] == 7 && b[1] == 9);
    check_op(r, &(struct plx__fp){.count = 2, .coll = PLX_COLL_BROADCAST, .dtype = PLX_I32, .op = -1, .root = 1},
             8, &s1);
    CHECK(s1 == s0 + 1);

    reset_log(r);
    int m = 42;
    if (r == 0)
        CHECK(plx_send(c, &m, 1, PLX_I32, 1, 5) == 0);
    else if (r == 1) {
        m = 0;
        CHECK(plx_recv(c, &m, 1, PLX_I32, 0, 5) == 0);
        CHECK(m == 42);
    }
    CHECK(logs[r].n == 0); /* a user's p2p is not diagnosed */
    c->dh = plx__diag_pick(c);
    for (int i = 0; i < MAXIO; i++)
        free(logs[r].io[i].mem);
    return 0;
}

/* Which table the configuration picks, and what none leaves alone. */
static int pick_rank(struct rank_ctx *x, int init_rc)
{
    const char *want = x->arg;
    CHECK(init_rc == 0);
    if (init_rc)
        return 1;
    struct plx_comm *c = x->comm;
    CHECK(c->dh == plx__diag_pick(c) && !strcmp(c->dh->name, want));
    if (c->dh == &plx__diag_none)
        CHECK(!c->dh->post && !c->dh->state && !c->dh->first_send && !c->dh->first_recv && !c->dh->wait &&
              !c->dh->discard);
    float v = 1.0f;
    for (int i = 0; i < 3; i++)
        CHECK(plx_allreduce(c, &v, &v, 1, PLX_F32, PLX_SUM) == 0);
    CHECK(v == 27.0f);
    struct plx__diag_state *d = plx__diag_of(c);
    uint64_t posted = __atomic_load_n(d->posted1, __ATOMIC_RELAXED), done = __atomic_load_n(d->done1, __ATOMIC_RELAXED);
    uint64_t talked = 0;
    /* The per-peer arrays exist with the in-band fingerprint only. */
    CHECK(!d->sent == !d->inband && !d->rcvd == !d->inband);
    for (int p = 0; d->sent && d->rcvd && p < P; p++)
        talked += d->sent[p] + d->rcvd[p];
    if (c->dh == &plx__diag_none) {
        CHECK(posted == 0 && done == 0 && talked == 0);
    } else {
        CHECK(posted == 3 && done == 3);
        CHECK(!d->inband || talked > 0);
    }
    return 0;
}

int main(void)
{
    const char *const generic[] = {"sim.native_collectives=false", NULL};
    run_ranks(P, "sim", generic, 30000, fake_rank, NULL);
    const char *const both[] = {"sim.native_collectives=false", NULL};
    const char *const ledger_only[] = {"sim.native_collectives=false", "core.fingerprint=false", NULL};
    const char *const fp_only[] = {"sim.native_collectives=false", "core.ledger_entries=0", NULL};
    const char *const off[] = {"sim.native_collectives=false", "core.fingerprint=false", "core.ledger_entries=0", NULL};
    run_ranks(P, "sim", both, 30000, pick_rank, "full");
    run_ranks(P, "sim", ledger_only, 30000, pick_rank, "full");
    run_ranks(P, "sim", fp_only, 30000, pick_rank, "full");
    run_ranks(P, "sim", off, 30000, pick_rank, "none");
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("diag hooks: order and arguments through a fake; full and none picked as configured\n");
    return failures ? 1 : 0;
}
