/* pipeline_run.c - run one stage's action list over nonblocking
 * point-to-point on the pipeline communicator. Receives are posted ahead so
 * transfers overlap the callbacks; sends never hold the list up. A control
 * message per pair of stages ends every run: "done" normally, "failed" (who,
 * where, why) the moment a stage fails, so the others stop at once instead
 * of waiting out their timeouts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deadline.h"
#include "pipeline.h"

#define SLICE_MS 5        /* how often a wait looks at the control messages */
#define NOTIFY_MAX_MS 2000 /* bound on delivering "failed" to the others */
#define LOST_GRACE_MS 100  /* after a lost peer, before closing ours */

enum { CTRL_DONE = 1, CTRL_FAILED = 2 };

/* One per ordered pair of stages and run; fixed size, sent as bytes. */
struct ctrl {
    int32_t kind, reporter, stage, chunk, mb, op, status, pad;
    char why[448];
};

struct send {
    struct plx_work *work;
    void *buf;
    int peer;
};

struct run {
    struct plx_comm *pp;
    const struct plx_pipe_callbacks *cb;
    struct plx_pipe_options o;
    int S, me, M, V, last, n;
    const struct plx_pipe_action *acts;
    size_t bytes;
    void **in_act, **in_grad, **out_act, **out_grad; /* per (chunk, mb) */
    struct plx_work **rwork;                          /* per action: its posted receive */
    void **rbuf;
    int next_post, posted;
    struct send *sends;
    int nsends, cap_sends;
    struct plx_work **cwork; /* per peer: its control message to us */
    struct ctrl *cin;
    unsigned char *cgot, *csent;
    struct ctrl failure; /* the first failure this stage learned of */
    struct ctrl cout;    /* what we tell the others at the end */
    int failed, live, peak;
    double t0, busy;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t cell(const struct run *r, int chunk, int mb)
{
    return (size_t)chunk * (size_t)r->M + (size_t)mb;
}

/* Tags: control at tag_base; the activation and the gradient that virtual
 * stage vs sends for micro-batch mb at two distinct tags above it. */
static int data_tag(const struct run *r, int is_grad, int sender_vs, int mb)
{
    return r->o.tag_base + 1 + 2 * (sender_vs * r->M + mb) + is_grad;
}

static const char *what(int op)
{
    return op == PLX_PIPE_RECV_ACT || op == PLX_PIPE_FORWARD || op == PLX_PIPE_SEND_ACT ? "forward" : "backward";
}

/* Record this stage's failure (the first only) as a control message. */
static int fail(struct run *r, int status, int stage, const struct plx_pipe_action *a, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(struct run *r, int status, int stage, const struct plx_pipe_action *a, const char *fmt, ...)
{
    if (r->failed)
        return r->failure.status;
    r->failed = 1;
    struct ctrl *f = &r->failure;
    *f = (struct ctrl){.kind = CTRL_FAILED, .reporter = r->me, .stage = stage, .chunk = a ? a->chunk : -1,
                       .mb = a ? a->mb : -1, .op = a ? a->op : -1, .status = status};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
    return status;
}

/* A failure another stage reported becomes ours, so we pass it on as is. */
static int adopt(struct run *r, const struct ctrl *c)
{
    if (!r->failed) {
        r->failure = *c;
        r->failure.why[sizeof r->failure.why - 1] = '\0';
        r->failed = 1;
    }
    return r->failure.status;
}

/* Which stage a lost-peer error is about. A transport that loses one rank
 * fails every pending transfer of the communicator, so the peer of the
 * transfer that failed may well be alive; the transports name the rank they
 * lost ("connection to rank N", tcp), and in pp ranks are stages. Falls back
 * to the peer when the message names none. */
static int lost_stage_of(const struct run *r, int status, const char *msg, int peer)
{
    const char *key = "connection to rank ", *at = status == PLX_ERR_PEER_LOST ? strstr(msg, key) : NULL;
    if (!at)
        return peer;
    char *end;
    long n = strtol(at + strlen(key), &end, 10);
    return end != at + strlen(key) && n >= 0 && n < r->S && n != r->me ? (int)n : peer;
}

/* Look at the control messages that arrived. A failure a peer reported
 * wins over a broken channel: the stage that failed told everyone before it
 * aborted, and that abort is what breaks the channels of a transport that
 * closes connections (tcp). Returns nonzero once this stage knows of a
 * failure. */
static int poll_ctrl(struct run *r)
{
    int err = 0, err_peer = -1;
    char err_msg[384] = "";
    for (int p = 0; p < r->S && !r->failed; p++) {
        if (p == r->me || r->cgot[p])
            continue;
        int done = 0, rc = plx_work_test(r->cwork[p], &done);
        if (!done)
            continue;
        r->cgot[p] = 1;
        if (rc && !err) {
            err = rc;
            err_peer = p;
            snprintf(err_msg, sizeof err_msg, "%s", plx_last_error());
        } else if (!rc && r->cin[p].kind == CTRL_FAILED) {
            adopt(r, &r->cin[p]);
        } else if (!rc && r->cin[p].kind != CTRL_DONE) {
            fail(r, PLX_ERR_PROTOCOL, p, NULL, "a control message of unknown kind %d from stage %d",
                 (int)r->cin[p].kind, p);
        }
    }
    if (err && !r->failed) {
        int lost = lost_stage_of(r, err, err_msg, err_peer);
        fail(r, err, lost, NULL, "stage %d lost stage %d: %s", r->me, lost, err_msg);
    }
    return r->failed;
}

/* A transfer with peer failed (plx_last_error() says how): a failure some
 * stage reported explains it best; else blame the stage the transport lost. */
static int transfer_error(struct run *r, int rc, int peer, const struct plx_pipe_action *a, const char *doing)
{
    char msg[384];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    if (poll_ctrl(r))
        return r->failure.status;
    int lost = lost_stage_of(r, rc, msg, peer);
    return fail(r, rc, lost, a, "stage %d lost stage %d while %s stage %d: %s", r->me, lost, doing, peer, msg);
}

/* Wait for w (a transfer with stage peer) in slices, watching the control
 * messages between them. 0, or nonzero once the run has failed. */
static int wait_for(struct run *r, struct plx_work *w, int peer, const struct plx_pipe_action *a, const char *thing)
{
    uint64_t deadline = plx__s_deadline(r->o.timeout_ms, 0);
    for (;;) {
        int rc = plx_work_wait(w, SLICE_MS), done = 1;
        if (rc == PLX_ERR_TIMEOUT)
            rc = plx_work_test(w, &done);
        if (done && rc == 0)
            return 0;
        if (done) {
            char doing[160];
            snprintf(doing, sizeof doing, "waiting for %s from", thing);
            return transfer_error(r, rc, peer, a, doing);
        }
        if (poll_ctrl(r))
            return r->failure.status;
        if (plx__s_now_ns() > deadline)
            return fail(r, PLX_ERR_TIMEOUT, peer, a, "stage %d waited %lld ms for %s from stage %d", r->me,
                        (long long)r->o.timeout_ms, thing, peer);
    }
}

static void *alloc_buf(struct run *r)
{
    return malloc(r->bytes ? r->bytes : 1);
}

/* Post receives ahead of their turn, up to lookahead outstanding. */
static int post_ahead(struct run *r)
{
    struct plx_op_options oo = {.struct_size = sizeof oo, .mem_kind = PLX_MEM_HOST, .timeout_ms = PLX_TIMEOUT_DEFAULT};
    for (; r->next_post < r->n && (r->o.lookahead < 0 || r->posted < r->o.lookahead); r->next_post++) {
        const struct plx_pipe_action *a = &r->acts[r->next_post];
        if ((a->op != PLX_PIPE_RECV_ACT && a->op != PLX_PIPE_RECV_GRAD) || a->peer == r->me)
            continue;
        int is_grad = a->op == PLX_PIPE_RECV_GRAD, vs = plx__pipe_vstage(r->S, r->me, a->chunk);
        void *buf = alloc_buf(r);
        if (!buf)
            return fail(r, PLX_ERR_NOMEM, r->me, a, "stage %d: out of memory for a receive buffer", r->me);
        int rc = plx_irecv(r->pp, buf, r->o.act_count, r->o.dtype, a->peer,
                           data_tag(r, is_grad, is_grad ? vs + 1 : vs - 1, a->mb), &oo, &r->rwork[r->next_post]);
        if (rc) {
            free(buf);
            return transfer_error(r, rc, a->peer, a, "posting a receive from");
        }
        r->rbuf[r->next_post] = buf;
        r->posted++;
    }
    return 0;
}

/* Free the sends that completed; a failed one fails the run. */
static int reap_sends(struct run *r)
{
    int k = 0, rc = 0;
    for (int i = 0; i < r->nsends; i++) {
        int done = 0, st = plx_work_test(r->sends[i].work, &done);
        if (done && st && !rc)
            rc = transfer_error(r, st, r->sends[i].peer, NULL, "sending to");
        if (done) {
            plx_work_free(r->sends[i].work);
            free(r->sends[i].buf);
        } else {
            r->sends[k++] = r->sends[i];
        }
    }
    r->nsends = k;
    return rc;
}

static int push_send(struct run *r, struct plx_work *w, void *buf, int peer)
{
    if (r->nsends == r->cap_sends) {
        int cap = 2 * r->cap_sends;
        struct send *n = realloc(r->sends, (size_t)cap * sizeof *n);
        if (!n) {
            plx_work_wait(w, r->o.timeout_ms); /* the buffer is borrowed until it completes */
            plx_work_free(w);
            free(buf);
            return fail(r, PLX_ERR_NOMEM, r->me, NULL, "stage %d: out of memory", r->me);
        }
        r->sends = n;
        r->cap_sends = cap;
    }
    r->sends[r->nsends++] = (struct send){w, buf, peer};
    return 0;
}

static int start_send(struct run *r, const struct plx_pipe_action *a, void **slot, void **local_dest)
{
    void *buf = *slot;
    *slot = NULL;
    if (!buf)
        return fail(r, PLX_ERR_INTERNAL, r->me, a, "stage %d: nothing computed to send", r->me);
    if (a->peer == r->me) { /* one stage holding both virtual stages: hand over */
        if (!local_dest) {
            free(buf);
            return fail(r, PLX_ERR_INVALID_ARG, r->me, a, "stage %d: sends to itself past its last chunk", r->me);
        }
        free(*local_dest);
        *local_dest = buf;
        return 0;
    }
    int is_grad = a->op == PLX_PIPE_SEND_GRAD, vs = plx__pipe_vstage(r->S, r->me, a->chunk);
    struct plx_op_options oo = {.struct_size = sizeof oo, .mem_kind = PLX_MEM_HOST, .timeout_ms = PLX_TIMEOUT_DEFAULT};
    struct plx_work *w;
    int rc = plx_isend(r->pp, buf, r->o.act_count, r->o.dtype, a->peer, data_tag(r, is_grad, vs, a->mb), &oo, &w);
    if (rc) {
        free(buf);
        return transfer_error(r, rc, a->peer, a, "sending to");
    }
    return push_send(r, w, buf, a->peer);
}

static int receive(struct run *r, int i, const struct plx_pipe_action *a, void **dest)
{
    if (a->peer == r->me) /* handed over by our own send */
        return *dest ? 0 : fail(r, PLX_ERR_INTERNAL, r->me, a, "stage %d: a receive from itself before the send", r->me);
    int rc = post_ahead(r);
    if (rc)
        return rc;
    char thing[96];
    snprintf(thing, sizeof thing, "the %s of micro-batch %d (chunk %d)",
             a->op == PLX_PIPE_RECV_ACT ? "activation" : "gradient", a->mb, a->chunk);
    if ((rc = wait_for(r, r->rwork[i], a->peer, a, thing)) != 0)
        return rc;
    plx_work_free(r->rwork[i]);
    r->rwork[i] = NULL;
    *dest = r->rbuf[i];
    r->rbuf[i] = NULL;
    r->posted--;
    return 0;
}

static int compute(struct run *r, const struct plx_pipe_action *a)
{
    size_t k = cell(r, a->chunk, a->mb);
    int vs = plx__pipe_vstage(r->S, r->me, a->chunk), fwd = a->op == PLX_PIPE_FORWARD, rc;
    void **in = fwd ? &r->in_act[k] : &r->in_grad[k], **out = fwd ? &r->out_act[k] : &r->out_grad[k];
    int has_out = fwd ? vs < r->last : vs > 0;
    if (has_out && !(*out = alloc_buf(r)))
        return fail(r, PLX_ERR_NOMEM, r->me, a, "stage %d: out of memory for an output buffer", r->me);
    double t = now_s();
    rc = fwd ? r->cb->forward(r->cb->user, a->chunk, a->mb, *in, has_out ? *out : NULL)
             : r->cb->backward(r->cb->user, a->chunk, a->mb, *in, has_out ? *out : NULL);
    r->busy += now_s() - t;
    free(*in);
    *in = NULL;
    if (rc)
        return fail(r, rc < 0 ? rc : PLX_ERR_INTERNAL, r->me, a, "stage %d failed in %s of micro-batch %d (chunk %d): "
                    "the callback returned %d", r->me, what(a->op), a->mb, a->chunk, rc);
    r->live += fwd ? 1 : -1;
    if (r->live > r->peak)
        r->peak = r->live;
    return 0;
}

static int step(struct run *r, int i)
{
    const struct plx_pipe_action *a = &r->acts[i];
    size_t k = cell(r, a->chunk, a->mb);
    if (a->chunk < 0 || a->chunk >= r->V || a->mb < 0 || a->mb >= r->M)
        return fail(r, PLX_ERR_INVALID_ARG, r->me, a, "stage %d: action %d is out of range", r->me, i);
    switch (a->op) {
    case PLX_PIPE_FORWARD:
    case PLX_PIPE_BACKWARD:
        return compute(r, a);
    case PLX_PIPE_SEND_ACT:
        return start_send(r, a, &r->out_act[k], a->chunk + 1 < r->V ? &r->in_act[cell(r, a->chunk + 1, a->mb)] : NULL);
    case PLX_PIPE_SEND_GRAD:
        return start_send(r, a, &r->out_grad[k], a->chunk > 0 ? &r->in_grad[cell(r, a->chunk - 1, a->mb)] : NULL);
    case PLX_PIPE_RECV_ACT:
        return receive(r, i, a, &r->in_act[k]);
    case PLX_PIPE_RECV_GRAD:
        return receive(r, i, a, &r->in_grad[k]);
    }
    return fail(r, PLX_ERR_INVALID_ARG, r->me, a, "stage %d: action %d has unknown operation %d", r->me, i, a->op);
}

/* Tell every stage how we ended: "done", or the failure (ours or the one
 * we heard of, which then doubles as "I know"). Every pair of stages swaps
 * exactly one control message per run. After a failure the wait is bounded
 * by NOTIFY_MAX_MS (a peer may be gone), and nobody aborts before it heard
 * from every peer: on a transport whose abort closes connections (tcp) an
 * early abort would reach a peer before the report it sent, and that peer
 * would only see a lost connection. */
static void notify(struct run *r, int lost_stage)
{
    if (!r->csent || !r->cgot || !r->cwork || !r->sends)
        return; /* setup ran out of memory: nothing was posted */
    /* The message lives in r: its sends may outlast this call. */
    r->cout = r->failed ? r->failure : (struct ctrl){.kind = CTRL_DONE, .reporter = r->me};
    const struct ctrl *msg = &r->cout;
    struct plx_op_options oo = {.struct_size = sizeof oo, .mem_kind = PLX_MEM_HOST, .timeout_ms = PLX_TIMEOUT_DEFAULT};
    int64_t ms = r->failed && (r->o.timeout_ms > NOTIFY_MAX_MS || r->o.timeout_ms < 0) ? NOTIFY_MAX_MS : r->o.timeout_ms;
    uint64_t deadline = plx__s_deadline(ms, 0);
    int first = r->nsends;
    for (int p = 0; p < r->S; p++) {
        struct plx_work *w;
        if (p == r->me || r->csent[p] || p == lost_stage)
            continue;
        r->csent[p] = 1;
        if (plx_isend(r->pp, msg, sizeof *msg, PLX_U8, p, r->o.tag_base, &oo, &w) == 0)
            push_send(r, w, NULL, p);
    }
    /* Normal end: every peer has its control receive posted, so these
     * complete; await_peers() then waits for theirs. */
    for (int i = first; i < r->nsends; i++) {
        plx_work_wait(r->sends[i].work, plx__s_ms_left(deadline));
    }
    if (!r->failed)
        return;
    for (int p = 0; p < r->S; p++) {
        if (p == r->me || p == lost_stage || r->cgot[p])
            continue;
        int rc = plx_work_wait(r->cwork[p], plx__s_ms_left(deadline)), done = 1;
        if (rc == PLX_ERR_TIMEOUT)
            plx_work_test(r->cwork[p], &done);
        r->cgot[p] = (unsigned char)done;
    }
}

/* Normal end: wait for every peer's control message (everyone finished). */
static int await_peers(struct run *r)
{
    uint64_t deadline = plx__s_deadline(r->o.timeout_ms, 0);
    for (int p = 0; p < r->S; p++) {
        while (p != r->me && !r->cgot[p] && !r->failed) {
            if (poll_ctrl(r))
                break;
            if (r->cgot[p])
                break;
            int rc = plx_work_wait(r->cwork[p], SLICE_MS);
            if (rc != PLX_ERR_TIMEOUT)
                continue; /* finished (well or not): poll_ctrl takes it */
            if (plx__s_now_ns() > deadline)
                fail(r, PLX_ERR_TIMEOUT, p, NULL, "stage %d finished but waited %lld ms for stage %d to finish",
                     r->me, (long long)r->o.timeout_ms, p);
        }
    }
    for (int i = 0; i < r->nsends && !r->failed; i++)
        if (wait_for(r, r->sends[i].work, r->sends[i].peer, NULL, "a send to complete"))
            break;
    return r->failed;
}

static int setup(struct run *r)
{
    size_t cells = (size_t)r->V * (size_t)r->M, S = (size_t)r->S;
    r->in_act = calloc(cells, sizeof(void *));
    r->in_grad = calloc(cells, sizeof(void *));
    r->out_act = calloc(cells, sizeof(void *));
    r->out_grad = calloc(cells, sizeof(void *));
    r->rwork = calloc((size_t)r->n + 1, sizeof *r->rwork);
    r->rbuf = calloc((size_t)r->n + 1, sizeof *r->rbuf);
    r->cwork = calloc(S, sizeof *r->cwork);
    r->cin = calloc(S, sizeof *r->cin);
    r->cgot = calloc(S, 1);
    r->csent = calloc(S, 1);
    r->cap_sends = 16 + r->S;
    r->sends = calloc((size_t)r->cap_sends, sizeof *r->sends);
    if (!r->in_act || !r->in_grad || !r->out_act || !r->out_grad || !r->rwork || !r->rbuf || !r->cwork || !r->cin ||
        !r->cgot || !r->csent || !r->sends)
        return fail(r, PLX_ERR_NOMEM, r->me, NULL, "stage %d: out of memory", r->me);
    struct plx_op_options oo = {.struct_size = sizeof oo, .mem_kind = PLX_MEM_HOST, .timeout_ms = PLX_TIMEOUT_DEFAULT};
    for (int p = 0; p < r->S; p++) {
        if (p == r->me)
            continue;
        int rc = plx_irecv(r->pp, &r->cin[p], sizeof r->cin[p], PLX_U8, p, r->o.tag_base, &oo, &r->cwork[p]);
        if (rc)
            return fail(r, rc, p, NULL, "stage %d could not post the control receive from stage %d: %s", r->me, p,
                        plx_last_error());
    }
    return 0;
}

/* After a failure nothing may stay pending: abort pp, then free. */
static void teardown(struct run *r)
{
    if (r->failed && r->failure.status == PLX_ERR_PEER_LOST) {
        /* A rank died: give the others' transports a moment to see that
         * loss before ours closes its connections (they would name us). */
        struct timespec ts = {0, LOST_GRACE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r->failed)
        plx_comm_abort(r->pp);
    for (int p = 0; r->cwork && p < r->S; p++)
        plx_work_free(r->cwork[p]);
    for (int i = 0; r->rwork && r->rbuf && i < r->n; i++) {
        plx_work_free(r->rwork[i]);
        free(r->rbuf[i]);
    }
    for (int i = 0; i < r->nsends; i++) {
        plx_work_free(r->sends[i].work);
        free(r->sends[i].buf);
    }
    for (size_t k = 0; r->in_act && r->in_grad && r->out_act && r->out_grad && k < (size_t)r->V * (size_t)r->M; k++) {
        free(r->in_act[k]);
        free(r->in_grad[k]);
        free(r->out_act[k]);
        free(r->out_grad[k]);
    }
    free(r->in_act);
    free(r->in_grad);
    free(r->out_act);
    free(r->out_grad);
    free(r->rwork);
    free(r->rbuf);
    free(r->cwork);
    free(r->cin);
    free(r->cgot);
    free(r->csent);
    free(r->sends);
}

PLX_API void plx_pipe_options_init(struct plx_pipe_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->dtype = PLX_F32;
    o->timeout_ms = 60000;
    o->tag_base = 1 << 24;
    o->lookahead = 8;
}

static int take_options(struct run *r, const struct plx_pipe_options *o)
{
    plx_pipe_options_init(&r->o);
    if (!o)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_run: options are required (act_count)");
    if (PLX_HAS_FIELD(o, struct plx_pipe_options, act_count))
        r->o.act_count = o->act_count;
    if (PLX_HAS_FIELD(o, struct plx_pipe_options, dtype))
        r->o.dtype = o->dtype;
    if (PLX_HAS_FIELD(o, struct plx_pipe_options, timeout_ms) && o->timeout_ms != 0 &&
        o->timeout_ms != PLX_TIMEOUT_DEFAULT)
        r->o.timeout_ms = o->timeout_ms;
    if (r->o.timeout_ms < 0 && r->o.timeout_ms != PLX_TIMEOUT_INFINITE)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_run: timeout_ms %lld is neither milliseconds, "
                             "PLX_TIMEOUT_DEFAULT nor PLX_TIMEOUT_INFINITE", (long long)r->o.timeout_ms);
    if (PLX_HAS_FIELD(o, struct plx_pipe_options, tag_base))
        r->o.tag_base = o->tag_base;
    if (PLX_HAS_FIELD(o, struct plx_pipe_options, lookahead))
        r->o.lookahead = o->lookahead;
    if (plx_dtype_size(r->o.dtype) == 0)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_run: unknown dtype %d", r->o.dtype);
    long long top = (long long)r->o.tag_base + 2LL * r->S * r->V * r->M + 1;
    if (r->o.tag_base < 0 || top > 0x7fffffffLL)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_run: tags %d .. %lld do not fit in 0 .. 2^31-1",
                        r->o.tag_base, top);
    if (r->o.lookahead == 0)
        r->o.lookahead = 1;
    r->bytes = r->o.act_count * plx_dtype_size(r->o.dtype);
    return 0;
}

PLX_API int plx_pipe_run(struct plx_comm *pp, const struct plx_pipe_schedule *s, const struct plx_pipe_callbacks *cb,
                         const struct plx_pipe_options *o, struct plx_pipe_stats *stats)
{
    if (!pp || !s || !cb || !cb->forward || !cb->backward)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_run: pp, schedule or a callback is NULL");
    struct run r = {.pp = pp, .cb = cb, .S = s->stages, .M = s->micro_batches, .V = s->chunks,
                    .me = plx_comm_rank(pp), .t0 = now_s()};
    r.last = r.S * r.V - 1;
    if (plx_comm_size(pp) != r.S)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_run: the schedule has %d stages, the communicator %d ranks",
                        r.S, plx_comm_size(pp));
    int rc = take_options(&r, o);
    if (rc)
        return rc;
    r.acts = s->lists[r.me];
    r.n = s->counts[r.me];
    int lost = -1;
    if (!setup(&r) && !post_ahead(&r))
        for (int i = 0; i < r.n; i++) {
            if (step(&r, i) || reap_sends(&r) || poll_ctrl(&r) || post_ahead(&r))
                break;
        }
    if (r.failed && r.failure.stage != r.me && r.failure.status == PLX_ERR_PEER_LOST)
        lost = r.failure.stage;
    notify(&r, lost);
    if (!r.failed && await_peers(&r))
        notify(&r, -1); /* a peer failed after we said "done": wait for the others to know too */
    if (stats) {
        double total = now_s() - r.t0;
        struct plx_pipe_stats st = {.struct_size = sizeof st, .peak_live = r.peak, .busy_s = r.busy, .total_s = total,
                                    .bubble = total > 0 ? 1 - r.busy / total : 0, .failed_stage = -1,
                                    .failed_chunk = -1, .failed_mb = -1};
        if (r.failed) {
            st.failed_stage = r.failure.stage;
            st.failed_chunk = r.failure.op >= 0 ? r.failure.chunk : -1;
            st.failed_mb = r.failure.op >= 0 ? r.failure.mb : -1;
        }
        for (int i = 0; i < r.n; i++) {
            st.forwards += r.acts[i].op == PLX_PIPE_FORWARD;
            st.backwards += r.acts[i].op == PLX_PIPE_BACKWARD;
        }
        plx__pipe_stats_put(stats, 0, &st);
    }
    int failed = r.failed;
    struct ctrl f = r.failure;
    teardown(&r);
    if (!failed)
        return 0;
    /* Our own failure keeps its code; one we heard of is REMOTE. */
    int code = f.reporter == r.me ? f.status : PLX_ERR_REMOTE;
    const char *where = f.op >= 0 ? what(f.op) : NULL;
    if (where && f.mb >= 0)
        return plx_set_error(code, "pipeline stage %d: stage %d failed (%s of micro-batch %d, chunk %d), reported by stage "
                        "%d: %s", r.me, f.stage, where, f.mb, f.chunk, f.reporter, f.why);
    return plx_set_error(code, "pipeline stage %d: stage %d failed, reported by stage %d: %s", r.me, f.stage, f.reporter,
                    f.why);
}
