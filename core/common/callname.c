/* callname.c - see callname.h. */
#include "callname.h"

#include <stdio.h>

#include "plexus/plexus.h"

static const struct {
    const char *name;
    unsigned char op, root, v;
} colls[PLX_COLL_COUNT] = {
#define COLL(kind, val, name, op, root, v) [PLX_COLL_##kind] = {name, op, root, v},
    PLX_COLL_MAP(COLL)
#undef COLL
};
static const char *const dtypes[PLX_DTYPE_COUNT] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "bf16", "f32",
                                                    "f64"};
static const char *const redops[PLX_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};

const char *plx__coll_str(int coll)
{
    return coll >= 0 && coll < PLX_COLL_COUNT ? colls[coll].name : "?";
}

const char *plx__dtype_str(int dtype)
{
    return dtype >= 0 && dtype < PLX_DTYPE_COUNT ? dtypes[dtype] : "?";
}

const char *plx__redop_str(int op)
{
    return op >= 0 && op < PLX_REDOP_COUNT ? redops[op] : "?";
}

int plx__call_has_op(int coll)
{
    return coll >= 0 && coll < PLX_COLL_COUNT && colls[coll].op;
}

int plx__call_has_root(int coll)
{
    return coll >= 0 && coll < PLX_COLL_COUNT && colls[coll].root;
}

int plx__call_is_v(int coll)
{
    return coll >= 0 && coll < PLX_COLL_COUNT && colls[coll].v;
}

int plx__call_valid(int coll, int dtype, int op)
{
    return coll >= 0 && coll < PLX_COLL_COUNT && dtype >= 0 && dtype < PLX_DTYPE_COUNT &&
           (!plx__call_has_op(coll) || (op >= 0 && op < PLX_REDOP_COUNT));
}

void plx__call_describe(int coll, uint64_t seq, int dtype, int op, uint64_t count, int root, char *out, size_t len)
{
    const char *kind = plx__coll_str(coll);
    if (coll == PLX_COLL_BARRIER) {
        snprintf(out, len, "barrier(seq %llu)", (unsigned long long)seq);
        return;
    }
    char o[24] = "", r[24] = "";
    if (plx__call_has_op(coll))
        snprintf(o, sizeof o, ", %s", plx__redop_str(op));
    if (plx__call_has_root(coll))
        snprintf(r, sizeof r, ", root %d", root);
    snprintf(out, len, "%s(seq %llu, %s%s, count %llu%s)", kind, (unsigned long long)seq,
             plx__dtype_str(dtype), o, (unsigned long long)count, r);
}

struct plx__fp plx__fp_of(const struct plx_coll_args *a)
{
    struct plx__fp f = {.seq = a->seq, .count = a->count, .coll = a->coll, .dtype = a->dtype, .op = -1, .root = -1};
    if (a->coll == PLX_COLL_BARRIER) {
        f.count = 0;
        f.dtype = -1;
    }
    if (plx__call_has_op(a->coll))
        f.op = a->op;
    if (plx__call_has_root(a->coll))
        f.root = a->root;
    return f;
}

int plx__fp_equal(const struct plx__fp *x, const struct plx__fp *y)
{
    return x->seq == y->seq && x->count == y->count && x->coll == y->coll && x->dtype == y->dtype &&
           x->op == y->op && x->root == y->root;
}

/* A multiply-xorshift mix of the fields, word by word (a byte-wise FNV
 * cost 430 instructions per message, a third of the check). */
uint32_t plx__fp_hash(const struct plx__fp *f)
{
    uint64_t v[4] = {f->seq, f->count, (uint64_t)(uint32_t)f->coll << 32 | (uint32_t)f->dtype,
                     (uint64_t)(uint32_t)f->op << 32 | (uint32_t)f->root};
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15);
    for (int i = 0; i < 4; i++) {
        h = (h ^ v[i]) * UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 33;
    }
    return (uint32_t)(h ^ (h >> 32));
}

char *plx__fp_format(const struct plx__fp *f, char *buf, size_t len)
{
    plx__call_describe(f->coll, f->seq, f->dtype, f->op, f->count, f->root, buf, len);
    return buf;
}

void plx__fp_mismatch_msg(const struct plx__fp *f1, int r1, const struct plx__fp *f2, int r2, char *msg, size_t len)
{
    if (r2 < r1) {
        const struct plx__fp *tf = f1;
        f1 = f2;
        f2 = tf;
        int tr = r1;
        r1 = r2;
        r2 = tr;
    }
    char a[128], b[128];
    snprintf(msg, len, "%s on rank %d does not match %s on rank %d", plx__fp_format(f1, a, sizeof a), r1,
             plx__fp_format(f2, b, sizeof b), r2);
}
