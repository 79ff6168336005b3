/* tensor_parallel.c - Megatron-LM's conjugate operators (each one's
 * backward is the other's forward) over the tensor-parallel communicator,
 * and the sharding math of column- and row-parallel linear layers. The
 * matrix products are the caller's. */
#include <string.h>

#include "plexus/parallel.h"

static const char *op_name(int op)
{
    static const char *const names[] = {"copy", "reduce", "gather-seq", "scatter-seq"};
    return op >= 0 && op <= PLX_TP_SCATTER_SEQ ? names[op] : "unknown";
}

static int identity(const void *in, void *out, size_t count, int dtype)
{
    if (in != out)
        memmove(out, in, count * plx_dtype_size(dtype));
    return 0;
}

/* The four collectives the operators are made of. For all-gather and
 * reduce-scatter, count is one rank's shard. */
static int run(struct plx_comm *tp, int coll, const void *in, void *out, size_t count, int dtype)
{
    switch (coll) {
    case PLX_COLL_ALLREDUCE:
        return plx_allreduce(tp, in, out, count, dtype, PLX_SUM);
    case PLX_COLL_ALLGATHER:
        return plx_allgather(tp, in, out, count, dtype);
    case PLX_COLL_REDUCE_SCATTER:
        return plx_reduce_scatter(tp, in, out, count, dtype, PLX_SUM);
    default:
        return identity(in, out, count, dtype);
    }
}

/* What each operator runs forward ([op][0]) and backward ([op][1]); -1 is
 * the identity. */
static const int pairs[4][2] = {
    [PLX_TP_COPY] = {-1, PLX_COLL_ALLREDUCE},
    [PLX_TP_REDUCE] = {PLX_COLL_ALLREDUCE, -1},
    [PLX_TP_GATHER_SEQ] = {PLX_COLL_ALLGATHER, PLX_COLL_REDUCE_SCATTER},
    [PLX_TP_SCATTER_SEQ] = {PLX_COLL_REDUCE_SCATTER, PLX_COLL_ALLGATHER},
};

static int apply(struct plx_comm *tp, int op, int backward, const void *in, void *out, size_t count, int dtype)
{
    const char *dir = backward ? "plx_tp_backward" : "plx_tp_forward";
    if (!tp || (count && (!in || !out)))
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s(%s): communicator or buffer is NULL", dir, op_name(op));
    if (op < PLX_TP_COPY || op > PLX_TP_SCATTER_SEQ)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: unknown operator %d", dir, op);
    if (plx_dtype_size(dtype) == 0)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s(%s): unknown dtype %d", dir, op_name(op), dtype);
    int rc = run(tp, pairs[op][backward], in, out, count, dtype);
    if (rc)
        plx_error_prefix("%s(%s): ", dir, op_name(op));
    return rc;
}

PLX_API int plx_tp_forward(struct plx_comm *tp, int op, const void *in, void *out, size_t count, int dtype)
{
    return apply(tp, op, 0, in, out, count, dtype);
}

PLX_API int plx_tp_backward(struct plx_comm *tp, int op, const void *grad_out, void *grad_in, size_t count, int dtype)
{
    return apply(tp, op, 1, grad_out, grad_in, count, dtype);
}

PLX_API int plx_tp_split(size_t n, int parts, int index, int mode, struct plx_tp_range *out)
{
    if (!out || parts < 1 || index < 0 || index >= parts || (mode != PLX_TP_EVEN && mode != PLX_TP_PAD))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_tp_split: part %d of %d, mode %d%s", index, parts, mode,
                        out ? "" : ", out is NULL");
    if (mode == PLX_TP_EVEN && n % (size_t)parts)
        return plx_set_error(PLX_ERR_INVALID_ARG,
                        "plx_tp_split: %zu does not split evenly over %d ranks (%zu left over); pad it (PLX_TP_PAD) "
                        "or choose a size divisible by %d", n, parts, n % (size_t)parts, parts);
    size_t per = (n + (size_t)parts - 1) / (size_t)parts, off = per * (size_t)index;
    out->offset = off < n ? off : n;
    out->count = off >= n ? 0 : (n - off < per ? n - off : per);
    out->padded = per;
    return 0;
}

PLX_API int plx_tp_linear_init(struct plx_tp_linear *l, int kind, size_t in_features, size_t out_features, int rank,
                               int P, int mode)
{
    if (!l || (kind != PLX_TP_COLUMN && kind != PLX_TP_ROW) || !in_features || !out_features)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_tp_linear_init: kind %d, %zu x %zu features%s", kind, in_features,
                        out_features, l ? "" : ", layout is NULL");
    memset(l, 0, sizeof *l);
    l->struct_size = sizeof *l;
    l->kind = kind;
    l->in_features = in_features;
    l->out_features = out_features;
    int rc = plx_tp_split(kind == PLX_TP_COLUMN ? out_features : in_features, P, rank, mode, &l->split);
    if (rc) {
        plx_error_prefix("plx_tp_linear_init(%s-parallel %zu -> %zu, rank %d of %d): ",
                        kind == PLX_TP_COLUMN ? "column" : "row", in_features, out_features, rank, P);
        return rc;
    }
    l->local_out = kind == PLX_TP_COLUMN ? l->split.padded : out_features;
    l->local_in = kind == PLX_TP_COLUMN ? in_features : l->split.padded;
    return 0;
}

/* Copy between the full W (out x in) and the shard (local_out x local_in):
 * rows [offset, offset + count) for COLUMN, those columns for ROW. */
static int copy_shard(const struct plx_tp_linear *l, const void *full_w, const void *full_b, void *w, void *b,
                      int dtype, int to_shard)
{
    size_t e = plx_dtype_size(dtype);
    if (!l || !e || (to_shard ? !full_w || !w : !full_w || !w))
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_tp_linear_%s: layout, weights or dtype invalid",
                        to_shard ? "shard" : "unshard");
    const struct plx_tp_range *s = &l->split;
    const char *src = to_shard ? full_w : w;
    char *dst = to_shard ? w : (void *)full_w;
    if (to_shard)
        memset(dst, 0, l->local_out * l->local_in * e);
    for (size_t row = 0; row < l->local_out; row++) {
        size_t full_row = l->kind == PLX_TP_COLUMN ? s->offset + row : row;
        size_t col0 = l->kind == PLX_TP_COLUMN ? 0 : s->offset;
        size_t ncol = l->kind == PLX_TP_COLUMN ? l->in_features : s->count;
        if (l->kind == PLX_TP_COLUMN && row >= s->count)
            break; /* padding rows stay zero */
        size_t f = (full_row * l->in_features + col0) * e, sh = row * l->local_in * e;
        if (to_shard)
            memcpy(dst + sh, src + f, ncol * e);
        else
            memcpy(dst + f, src + sh, ncol * e);
    }
    if (!full_b || !b)
        return 0;
    size_t boff = l->kind == PLX_TP_COLUMN ? s->offset : 0, bn = l->kind == PLX_TP_COLUMN ? s->count : l->out_features;
    if (to_shard) {
        memset(b, 0, l->local_out * e);
        memcpy(b, (const char *)full_b + boff * e, bn * e);
    } else {
        memcpy((char *)full_b + boff * e, b, bn * e);
    }
    return 0;
}

PLX_API int plx_tp_linear_shard(const struct plx_tp_linear *l, const void *W, const void *b, void *w_shard,
                                void *b_shard, int dtype)
{
    return copy_shard(l, W, b, w_shard, b_shard, dtype, 1);
}

PLX_API int plx_tp_linear_unshard(const struct plx_tp_linear *l, const void *w_shard, const void *b_shard, void *W,
                                  void *b, int dtype)
{
    return copy_shard(l, W, b, (void *)w_shard, (void *)b_shard, dtype, 0);
}
