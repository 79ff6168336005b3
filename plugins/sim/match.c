/* match.c - sim checks what the core checks: ranks that meet in one
 * native collective with different calls (kind, dtype, op, count, root) get
 * PLX_ERR_MISMATCH naming both calls, never wrong data. Every rank sees every
 * rank's arguments at the rendezvous, so each finds the same first pair and
 * fails with the same message. */
#include <stdio.h>

#include "sim.h"

static const char *const dtypes[PLX_DTYPE_COUNT] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "bf16", "f32",
                                                    "f64"};
static const char *const redops[PLX_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};

static int has_op(int coll)
{
    return coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_REDUCE || coll == PLX_COLL_REDUCE_SCATTER;
}

static int has_root(int coll)
{
    return coll == PLX_COLL_BROADCAST || coll == PLX_COLL_REDUCE || coll == PLX_COLL_GATHER ||
           coll == PLX_COLL_SCATTER;
}

static int same(const struct plx_coll_args *x, const struct plx_coll_args *y)
{
    if (x->coll != y->coll)
        return 0;
    if (x->coll == PLX_COLL_BARRIER)
        return 1;
    return x->dtype == y->dtype && x->count == y->count && (!has_op(x->coll) || x->op == y->op) &&
           (!has_root(x->coll) || x->root == y->root);
}

/* The core's wording: "allreduce(seq 12, f32, sum, count 8)". */
static void describe(const struct plx_coll_args *a, char *out, size_t len)
{
    if (a->coll == PLX_COLL_BARRIER) {
        snprintf(out, len, "barrier(seq %llu)", (unsigned long long)a->seq);
        return;
    }
    char op[24] = "", root[24] = "";
    if (has_op(a->coll))
        snprintf(op, sizeof op, ", %s", a->op >= 0 && a->op < PLX_REDOP_COUNT ? redops[a->op] : "?");
    if (has_root(a->coll))
        snprintf(root, sizeof root, ", root %d", a->root);
    snprintf(out, len, "%s(seq %llu, %s%s, count %zu%s)", sim_coll_name(a->coll), (unsigned long long)a->seq,
             a->dtype >= 0 && a->dtype < PLX_DTYPE_COUNT ? dtypes[a->dtype] : "?", op, a->count, root);
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
