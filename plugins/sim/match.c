/* match.c - sim checks what the core checks: ranks that meet in one
 * native collective with different calls (kind, dtype, op, count, root) get
 * PLX_ERR_MISMATCH naming both calls, never wrong data. Every rank sees every
 * rank's arguments at the rendezvous, so each finds the same first pair and
 * fails with the same message. */
#include <stdio.h>

#include "callname.h"
#include "sim.h"

static int same(const struct plx_coll_args *x, const struct plx_coll_args *y)
{
    if (x->coll != y->coll)
        return 0;
    if (x->coll == PLX_COLL_BARRIER)
        return 1;
    return x->dtype == y->dtype && x->count == y->count && (!plx__call_has_op(x->coll) || x->op == y->op) &&
           (!plx__call_has_root(x->coll) || x->root == y->root);
}

/* The core's wording: "allreduce(seq 12, f32, sum, count 8)". */
static void describe(const struct plx_coll_args *a, char *out, size_t len)
{
    plx__call_describe(a->coll, a->seq, a->dtype, a->op, a->count, a->root, out, len);
}

int sim_check_match(struct impl *c, int parity, char *msg, size_t len)
{
    const struct plx_coll_args *calls = c->w->calls[parity];
    for (int r = 1; r < c->size; r++)
        if (!same(&calls[0], &calls[r])) {
            char x[128], y[128];
            describe(&calls[0], x, sizeof x);
            describe(&calls[r], y, sizeof y);
            snprintf(msg, len, "%s on rank 0 does not match %s on rank %d", x, y, r);
            return PLX_ERR_MISMATCH;
        }
    return 0;
}
