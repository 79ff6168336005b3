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
static const char *const redops[PLX_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};

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
    const char *kind = coll >= 0 && coll < PLX_COLL_COUNT ? colls[coll].name : "?";
    if (coll == PLX_COLL_BARRIER) {
        snprintf(out, len, "barrier(seq %llu)", (unsigned long long)seq);
        return;
    }
    char o[24] = "", r[24] = "";
    if (plx__call_has_op(coll))
        snprintf(o, sizeof o, ", %s", op >= 0 && op < PLX_REDOP_COUNT ? redops[op] : "?");
    if (plx__call_has_root(coll))
        snprintf(r, sizeof r, ", root %d", root);
    snprintf(out, len, "%s(seq %llu, %s%s, count %llu%s)", kind, (unsigned long long)seq,
             dtype >= 0 && dtype < PLX_DTYPE_COUNT ? dtypes[dtype] : "?", o, (unsigned long long)count, r);
}
