/* pipeline_check.c - prove that a set of per-stage action lists completes:
 * run all stages together in a simulation where sends never block and a
 * receive waits for its message, refusing any action whose inputs are not
 * there. The same pass times an ideal run (fixed compute costs, free
 * communication) and counts stashed activations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

/* Per (virtual stage, micro-batch). */
struct cell {
    unsigned char fwd, bwd, act_in, grad_in, act_sent, grad_sent;
    double act_t, grad_t; /* when the outgoing activation / gradient was sent */
};

struct sim {
    int S, M, V, last;
    struct cell *cells;
    const struct plx_pipe_action *const *lists;
    const int *counts;
    int *pc;
    double *clock, *busy;
    int *live, *peak, *nf, *nb;
};

static struct cell *at(struct sim *x, int vs, int mb)
{
    return &x->cells[(size_t)vs * (size_t)x->M + (size_t)mb];
}

static int refuse(int stage, int pos, const struct plx_pipe_action *a, const char *why)
{
    return plx_set_error(PLX_ERR_INVALID_ARG, "pipeline schedule: stage %d, action %d (%s chunk %d micro-batch %d): %s",
                    stage, pos, plx__pipe_op_name(a->op), a->chunk, a->mb, why);
}

/* Ranges and peers, which do not depend on the other stages. */
static int check_static(struct sim *x, int s, int pos, const struct plx_pipe_action *a)
{
    char why[160];
    if (a->op < PLX_PIPE_FORWARD || a->op > PLX_PIPE_RECV_GRAD)
        return refuse(s, pos, a, "unknown operation");
    if (a->chunk < 0 || a->chunk >= x->V || a->mb < 0 || a->mb >= x->M)
        return refuse(s, pos, a, "chunk or micro-batch out of range");
    int vs = plx__pipe_vstage(x->S, s, a->chunk), want = -1;
    switch (a->op) {
    case PLX_PIPE_SEND_ACT:
    case PLX_PIPE_RECV_GRAD:
        if (vs == x->last)
            return refuse(s, pos, a, "the last virtual stage has no next stage");
        want = (vs + 1) % x->S;
        break;
    case PLX_PIPE_RECV_ACT:
    case PLX_PIPE_SEND_GRAD:
        if (vs == 0)
            return refuse(s, pos, a, "the first virtual stage has no previous stage");
        want = (vs - 1) % x->S;
        break;
    default:
        return 0;
    }
    if (a->peer != want) {
        snprintf(why, sizeof why, "peer %d, but the neighbouring virtual stage lives on stage %d", a->peer, want);
        return refuse(s, pos, a, why);
    }
    return 0;
}

/* A forward or a backward of cell c, on stage s: costs cost and changes how
 * many activations the stage keeps. 1, or negative when refused. */
static int run_compute(struct sim *x, int s, int pos, const struct plx_pipe_action *a, int vs, struct cell *c,
                       double cost)
{
    if (a->op == PLX_PIPE_FORWARD) {
        if (c->fwd)
            return refuse(s, pos, a, "forward runs twice");
        if (vs > 0 && !c->act_in)
            return refuse(s, pos, a, "its input activation has not been received");
        c->fwd = 1;
        x->nf[s]++;
        if (++x->live[s] > x->peak[s])
            x->peak[s] = x->live[s];
    } else {
        if (c->bwd)
            return refuse(s, pos, a, "backward runs twice");
        if (!c->fwd)
            return refuse(s, pos, a, "backward before its forward");
        if (vs < x->last && !c->grad_in)
            return refuse(s, pos, a, "its output gradient has not been received");
        c->bwd = 1;
        x->nb[s]++;
        x->live[s]--;
    }
    x->clock[s] += cost;
    x->busy[s] += cost;
    return 1;
}

/* A send never blocks: it stamps the cell with the sender's clock, which
 * the receive waits for. 1, or negative when refused. */
static int run_send(struct sim *x, int s, int pos, const struct plx_pipe_action *a, struct cell *c)
{
    if (a->op == PLX_PIPE_SEND_ACT) {
        if (!c->fwd)
            return refuse(s, pos, a, "sends an activation its forward has not computed");
        if (c->act_sent)
            return refuse(s, pos, a, "the activation is sent twice");
        c->act_sent = 1;
        c->act_t = x->clock[s];
    } else {
        if (!c->bwd)
            return refuse(s, pos, a, "sends a gradient its backward has not computed");
        if (c->grad_sent)
            return refuse(s, pos, a, "the gradient is sent twice");
        c->grad_sent = 1;
        c->grad_t = x->clock[s];
    }
    return 1;
}

/* A receive waits for the neighbouring virtual stage's send. 1 when it
 * took the message, 0 while it is blocked, negative when refused. */
static int run_recv(struct sim *x, int s, int pos, const struct plx_pipe_action *a, int vs, struct cell *c)
{
    double sent_t;
    if (a->op == PLX_PIPE_RECV_ACT) {
        struct cell *from = at(x, vs - 1, a->mb);
        if (c->act_in)
            return refuse(s, pos, a, "the activation is received twice");
        if (!from->act_sent)
            return 0; /* blocked until the previous virtual stage sends */
        c->act_in = 1;
        sent_t = from->act_t;
    } else {
        struct cell *from = at(x, vs + 1, a->mb);
        if (c->grad_in)
            return refuse(s, pos, a, "the gradient is received twice");
        if (!from->grad_sent)
            return 0;
        c->grad_in = 1;
        sent_t = from->grad_t;
    }
    if (sent_t > x->clock[s])
        x->clock[s] = sent_t;
    return 1;
}

/* Run stage s as far as it goes. Returns 1 if it moved, 0 if it is blocked
 * or done, negative on a refused action. */
static int advance(struct sim *x, int s, double fc, double bc)
{
    int moved = 0;
    while (x->pc[s] < x->counts[s]) {
        int pos = x->pc[s];
        const struct plx_pipe_action *a = &x->lists[s][pos];
        int rc = check_static(x, s, pos, a);
        if (rc)
            return rc;
        int vs = plx__pipe_vstage(x->S, s, a->chunk);
        struct cell *c = at(x, vs, a->mb);
        /* check_static let only the six operations through */
        if (a->op == PLX_PIPE_FORWARD || a->op == PLX_PIPE_BACKWARD)
            rc = run_compute(x, s, pos, a, vs, c, a->op == PLX_PIPE_FORWARD ? fc : bc);
        else if (a->op == PLX_PIPE_SEND_ACT || a->op == PLX_PIPE_SEND_GRAD)
            rc = run_send(x, s, pos, a, c);
        else
            rc = run_recv(x, s, pos, a, vs, c);
        if (rc <= 0)
            return rc < 0 ? rc : moved;
        x->pc[s]++;
        moved = 1;
    }
    return moved;
}

static int deadlock(struct sim *x)
{
    char msg[768];
    size_t n = 0;
    for (int s = 0; s < x->S && n < sizeof msg - 64; s++)
        if (x->pc[s] < x->counts[s]) {
            const struct plx_pipe_action *a = &x->lists[s][x->pc[s]];
            n += (size_t)snprintf(msg + n, sizeof msg - n, "%sstage %d at action %d (%s chunk %d micro-batch %d)",
                                  n ? ", " : "", s, x->pc[s], plx__pipe_op_name(a->op), a->chunk, a->mb);
        }
    return plx_set_error(PLX_ERR_INVALID_ARG, "pipeline schedule: deadlock: no stage can move: %s", msg);
}

/* Everything ran: every forward and backward, every message received. */
static int complete(struct sim *x)
{
    for (int vs = 0; vs <= x->last; vs++)
        for (int m = 0; m < x->M; m++) {
            struct cell *c = at(x, vs, m);
            const char *why = !c->fwd ? "its forward never runs"
                              : !c->bwd ? "its backward never runs"
                              : vs < x->last && !c->act_sent ? "its activation is never sent"
                              : vs > 0 && !c->grad_sent ? "its input gradient is never sent"
                              : vs < x->last && !at(x, vs + 1, m)->act_in ? "its activation is never received"
                              : vs > 0 && !at(x, vs - 1, m)->grad_in ? "its input gradient is never received"
                                                                      : NULL;
            if (why)
                return plx_set_error(PLX_ERR_INVALID_ARG,
                                "pipeline schedule: virtual stage %d (stage %d chunk %d) micro-batch %d: %s", vs,
                                vs % x->S, vs / x->S, m, why);
        }
    return 0;
}

PLX_API int plx_pipe_check_lists(int S, int M, int V, const struct plx_pipe_action *const *lists, const int *counts,
                                 double fc, double bc, struct plx_pipe_stats *stats)
{
    if (!lists || !counts || S < 1 || M < 1 || V < 1)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_check_lists: %d stages, %d micro-batches, %d chunks%s", S, M,
                        V, !lists || !counts ? ", lists or counts NULL" : "");
    for (int s = 0; s < S; s++)
        if (counts[s] < 0 || (counts[s] && !lists[s]))
            return plx_set_error(PLX_ERR_INVALID_ARG, "plx_pipe_check_lists: stage %d has no list", s);
    struct sim x = {.S = S, .M = M, .V = V, .last = S * V - 1, .lists = lists, .counts = counts};
    x.cells = calloc((size_t)S * (size_t)V * (size_t)M, sizeof *x.cells);
    x.pc = calloc((size_t)S, sizeof *x.pc);
    x.live = calloc((size_t)S, sizeof *x.live);
    x.peak = calloc((size_t)S, sizeof *x.peak);
    x.nf = calloc((size_t)S, sizeof *x.nf);
    x.nb = calloc((size_t)S, sizeof *x.nb);
    x.clock = calloc((size_t)S, sizeof *x.clock);
    x.busy = calloc((size_t)S, sizeof *x.busy);
    int rc = 0;
    if (!x.cells || !x.pc || !x.live || !x.peak || !x.nf || !x.nb || !x.clock || !x.busy)
        rc = plx_set_error(PLX_ERR_NOMEM, "plx_pipe_check_lists: out of memory");
    /* Sweep the stages until none moves: each sweep either runs an action
     * or proves every unfinished stage waits on a message nobody will send. */
    for (int moved = 1; !rc && moved;) {
        moved = 0;
        for (int s = 0; s < S && rc >= 0; s++) {
            int r = advance(&x, s, fc, bc);
            if (r < 0)
                rc = r;
            moved |= r > 0;
        }
    }
    for (int s = 0; !rc && s < S; s++)
        if (x.pc[s] < counts[s])
            rc = deadlock(&x);
    if (!rc)
        rc = complete(&x);
    if (!rc && stats) {
        double makespan = 0;
        for (int s = 0; s < S; s++)
            makespan = x.clock[s] > makespan ? x.clock[s] : makespan;
        for (int s = 0; s < S; s++) {
            struct plx_pipe_stats st = {.struct_size = sizeof st, .peak_live = x.peak[s], .busy_s = x.busy[s],
                                        .total_s = makespan, .bubble = makespan > 0 ? 1 - x.busy[s] / makespan : 0,
                                        .forwards = x.nf[s], .backwards = x.nb[s], .failed_stage = -1,
                                        .failed_chunk = -1, .failed_mb = -1};
            plx__pipe_stats_put(stats, s, &st);
        }
    }
    free(x.cells);
    free(x.pc);
    free(x.live);
    free(x.peak);
    free(x.nf);
    free(x.nb);
    free(x.clock);
    free(x.busy);
    return rc;
}
