/* monitored.c - plx_monitored_barrier: a barrier that says which ranks did
 * not come. Every rank reports to rank 0 and waits for its release; rank 0
 * waits for the reports in rank order within the timeout (torch's
 * monitored_barrier, as gloo runs it). The messages travel in the core's tag
 * space under a collective sequence number of their own, so they meet
 * neither the user's point-to-point nor another collective's steps. A
 * report that never comes is cancelled (req_free), so no buffer of this
 * call outlives it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "clock.h"
#include "comm.h"
#include "error.h"

enum { STEP_REPORT = 0, STEP_RELEASE = 1 };

/* One transfer of the barrier: the backend's request in memory of ours. */
struct xfer {
    void *req;
    int posted;
    int post_rc; /* why it could not be posted (a peer already gone) */
    int32_t word;
    _Alignas(max_align_t) unsigned char mem[];
};

static struct xfer *xfer_new(const struct plx_comm *c)
{
    return calloc(1, sizeof(struct xfer) + c->be->ops.req_size);
}

static int post(struct plx_comm *c, struct xfer *x, int is_send, int peer, uint64_t tag, int64_t timeout_ms)
{
    struct plx_p2p_args a = {
        .struct_size = sizeof a, .peer = peer, .buf = &x->word, .bytes = sizeof x->word, .tag = tag,
        .mem_kind = PLX_MEM_HOST, .timeout_ms = timeout_ms,
    };
    x->req = c->be->ops.req_size ? x->mem : NULL;
    int rc = is_send ? c->be->ops.isend(c->bc, &a, &x->req) : c->be->ops.irecv(c->bc, &a, &x->req);
    x->posted = rc == 0;
    x->post_rc = rc;
    return rc;
}

/* Wait for x until deadline_ns and release it: 0, the transfer's error, or
 * PLX_ERR_TIMEOUT when the deadline came first (the transfer is cancelled). */
static int finish(struct plx_comm *c, struct xfer *x, uint64_t deadline_ns, int peer)
{
    if (!x->posted)
        return x->post_rc ? x->post_rc : PLX_ERR_INTERNAL;
    int rc = plx__wait_req(c, x->req, deadline_ns, peer);
    c->be->ops.req_free(c->bc, x->req); /* done, or cancelled while pending */
    x->posted = 0;
    return rc == PLX__STILL_PENDING ? PLX_ERR_TIMEOUT : rc;
}

static void cancel(struct plx_comm *c, struct xfer *x)
{
    if (x && x->posted)
        c->be->ops.req_free(c->bc, x->req);
    free(x);
}

static int not_root(struct plx_comm *c, uint64_t seq, int64_t timeout_ms)
{
    struct xfer *x = xfer_new(c);
    if (!x)
        return plx__err(PLX_ERR_NOMEM, "monitored barrier on '%s': out of memory", c->name);
    x->word = c->rank;
    const char *step = "sending its report to rank 0";
    int rc = post(c, x, 1, 0, plx__algo_tag(seq, STEP_REPORT), timeout_ms);
    if (rc == 0)
        rc = finish(c, x, plx__deadline_ms(timeout_ms), 0);
    if (rc == 0) {
        step = "waiting for rank 0's release";
        if ((rc = post(c, x, 0, 0, plx__algo_tag(seq, STEP_RELEASE), timeout_ms)) == 0)
            rc = finish(c, x, plx__deadline_ms(timeout_ms), 0);
    }
    cancel(c, x);
    if (rc != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", rc == PLX_ERR_TIMEOUT ? "no answer in time" : plx_last_error());
        return plx__err(rc, "monitored barrier on '%s': rank %d reached it, but failed %s within %lld ms (%s: %s)",
                        c->name, c->rank, step, (long long)timeout_ms, plx_err_name(rc), why);
    }
    return 0;
}

/* Rank 0: the reports in rank order, each until the common deadline. */
static int gather_reports(struct plx_comm *c, struct xfer **x, int64_t timeout_ms, int wait_all, int *late,
                          int late_cap, int *nlate, int *first_rc, char *first_msg, size_t cap)
{
    uint64_t deadline = plx__deadline_ms(timeout_ms);
    for (int r = 1; r < c->size; r++) {
        /* Out of time at this rank's turn: stop without naming it, as gloo
         * does, unless every late rank is wanted (then each is still
         * checked once). */
        if (!wait_all && plx__clock_ns() >= deadline)
            return PLX_ERR_TIMEOUT;
        int rc = finish(c, x[r], deadline, r);
        if (rc == 0)
            continue;
        if (*nlate < late_cap)
            late[*nlate] = r;
        if (++*nlate == 1) {
            *first_rc = rc;
            snprintf(first_msg, cap, "%s", rc == PLX_ERR_TIMEOUT ? "not reported" : plx_last_error());
        }
        if (!wait_all)
            return rc;
    }
    return *nlate ? *first_rc : 0;
}

/* A transport that fails every request once one peer is gone (tcp) fails
 * a live rank's report too: then the late ranks are those the backend saw
 * die, when it can say. */
static void name_the_dead(struct plx_comm *c, int wait_all, int *late, int late_cap, int *nlate)
{
    if (c->be->abi_minor < 7 || !c->be->ops.comm_lost_ranks)
        return;
    unsigned char *dead = calloc((size_t)c->size, 1);
    if (dead && c->be->ops.comm_lost_ranks(c->bc, dead, c->size) > 0) {
        *nlate = 0;
        for (int r = 1; r < c->size && (wait_all || *nlate == 0); r++)
            if (dead[r] && (*nlate)++ < late_cap)
                late[*nlate - 1] = r;
    }
    free(dead);
}

static int root(struct plx_comm *c, uint64_t seq, int64_t timeout_ms, int wait_all, int *late, int late_cap,
                int *nlate)
{
    int n = c->size, rc = 0, first_rc = 0;
    char first_msg[256] = "";
    struct xfer **x = calloc((size_t)n, sizeof *x);
    if (!x)
        return plx__err(PLX_ERR_NOMEM, "monitored barrier on '%s': out of memory", c->name);
    for (int r = 1; r < n && rc == 0; r++)
        if (!(x[r] = xfer_new(c)))
            rc = plx__err(PLX_ERR_NOMEM, "monitored barrier on '%s': out of memory", c->name);
        else /* one that cannot be posted fails in its turn: that rank is late */
            post(c, x[r], 0, r, plx__algo_tag(seq, STEP_REPORT), timeout_ms);
    if (rc == 0 && (rc = gather_reports(c, x, timeout_ms, wait_all, late, late_cap, nlate, &first_rc, first_msg,
                                          sizeof first_msg)) != 0) {
        if (rc != PLX_ERR_TIMEOUT)
            name_the_dead(c, wait_all, late, late_cap, nlate);
        char ranks[256] = "";
        for (int i = 0, k = *nlate < late_cap ? *nlate : late_cap; i < k; i++)
            snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s%d", i ? ", " : "", late[i]);
        if (*nlate == 0)
            plx__err(rc, "monitored barrier on '%s': rank 0 timed out after %lld ms before it had checked every "
                     "rank", c->name, (long long)timeout_ms);
        else
            plx__err(rc, "monitored barrier on '%s': rank%s %s did not reach it within %lld ms (%s: %s)", c->name,
                     *nlate > 1 ? "s" : "", ranks, (long long)timeout_ms, plx_err_name(first_rc), first_msg);
    }
    for (int r = 1; r < n && rc == 0; r++) { /* everyone came: release them */
        x[r]->word = 1;
        if ((rc = post(c, x[r], 1, r, plx__algo_tag(seq, STEP_RELEASE), timeout_ms)) == 0)
            rc = finish(c, x[r], plx__deadline_ms(timeout_ms), r);
        if (rc != 0)
            plx__err(rc, "monitored barrier on '%s': releasing rank %d failed within %lld ms (%s)", c->name, r,
                     (long long)timeout_ms, plx_err_name(rc));
    }
    for (int r = 1; r < n; r++)
        cancel(c, x[r]);
    free(x);
    return rc;
}

PLX_API int plx_monitored_barrier(struct plx_comm *c, int64_t timeout_ms, int wait_all, int *late, int late_cap,
                                  int *nlate)
{
    plx__err_clear();
    if (nlate)
        *nlate = 0;
    if (!c || !nlate || late_cap < 0 || (late_cap > 0 && !late))
        return plx__err(PLX_ERR_INVALID_ARG, "monitored barrier: comm or nlate is NULL, or late[] is missing");
    if (timeout_ms < 0)
        timeout_ms = c->timeout_ms;
    int rc = plx__check_usable(c, "monitored barrier");
    if (rc)
        return rc;
    if (!c->be->ops.isend || !c->be->ops.irecv)
        return plx__err(PLX_ERR_UNSUPPORTED, "monitored barrier on '%s': backend '%s' has no point-to-point "
                        "(choose one that has, e.g. PLEXUS_BACKEND=tcp)", c->name, c->be->name);
    uint64_t seq = __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_RELAXED);
    if (c->size == 1)
        return 0;
    return c->rank == 0 ? root(c, seq, timeout_ms, wait_all, late, late_cap, nlate)
                        : not_root(c, seq, timeout_ms);
}
