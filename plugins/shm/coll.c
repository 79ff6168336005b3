/* coll.c - native collectives through the segment (see shm.h for the
 * phase protocol). Every reduction runs through the core's kernels
 * (host->reduce, host->scale_div), straight from the peers' slots.
 *
 * allreduce: up to SHM_FAST_BYTES, one phase through the cache line that
 * carries each rank's epoch; up to small_bytes, one phase: every rank
 * copies its input in and reduces all slots in rank order into its own
 * output (every rank gets the same bits). Larger: rounds of one slot; in each, rank r reduces slice
 * r of the round in place in its own slot (each slice reduced once), then
 * after a second barrier every rank copies all slices out: a reduce-scatter
 * and an all-gather through the slots, in cache-sized pieces. The other
 * collectives are one phase per round: copy in, barrier, copy out. */
#include <stdio.h>
#include <string.h>

#include "callname.h"
#include "shm.h"
#include "slice.h"


static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Start a round: pick the slot half and say what this rank's slot holds. */
uint32_t shm__publish(struct shm_op *o, size_t off, size_t len)
{
    struct shm_comm *c = o->c;
    uint32_t half = c->round++ & 1;
    struct shm_slot_hdr h = {.seq = o->a->seq, .coll = o->a->coll, .dtype = o->a->dtype, .op = o->a->op,
                             .root = o->a->root, .count = o->a->count, .off = off, .len = len,
                             .send_addr = (uint64_t)(uintptr_t)o->a->send, .recv_addr = (uint64_t)(uintptr_t)o->a->recv};
    if (c->cfg.corrupt_rank == c->rank && o->a->seq == c->cfg.corrupt_at) {
        /* Fault injection ([shm] corrupt_rank/corrupt_at): what a broken or
         * hostile peer could leave in its header. */
        if (c->cfg.corrupt_addr) { /* a header that agrees, pointing at nothing */
            h.send_addr = UINT64_C(0xdead0000);
            h.recv_addr = UINT64_MAX - 4095;
        } else {
            h.count = UINT64_MAX / 3;
            h.off = UINT64_MAX - 7;
            h.len = (uint64_t)1 << 62;
            h.dtype = -5;
        }
    }
    struct shm_ctl *me = shm__ctl(c, c->rank);
    me->hdr[half] = h;
    __atomic_store_n(&me->pos_half, half, __ATOMIC_RELAXED);
    __atomic_store_n(&me->pos_ns, shm__coarse_ns(), __ATOMIC_RELEASE);
    return half;
}

static const char *coll_label(int coll)
{
    return coll >= 0 && coll < PLX_COLL_COUNT ? shm__coll_name(coll) : "?";
}

/* Rank r's header in this half and this rank's name real calls of the same
 * sequence number that differ in what was called: the program called
 * different collectives. Writes both calls, lower rank first, into msg. */
int shm__mismatch(struct shm_comm *c, int r, uint32_t half, char *msg, size_t len)
{
    struct shm_slot_hdr got, want = shm__ctl(c, c->rank)->hdr[half];
    memcpy(&got, (const void *)&shm__ctl(c, r)->hdr[half], sizeof got);
    if (got.seq != want.seq || !plx__call_valid(got.coll, got.dtype, got.op) ||
        !plx__call_valid(want.coll, want.dtype, want.op) ||
        (got.coll == want.coll && got.dtype == want.dtype && got.op == want.op && got.root == want.root &&
         got.count == want.count))
        return 0;
    char a[128], b[128];
    int lo = r < c->rank ? r : c->rank;
    const struct shm_slot_hdr *x = lo == r ? &got : &want, *y = lo == r ? &want : &got;
    plx__call_describe(x->coll, x->seq, x->dtype, x->op, x->count, x->root, a, sizeof a);
    plx__call_describe(y->coll, y->seq, y->dtype, y->op, y->count, y->root, b, sizeof b);
    snprintf(msg, len, "%s on rank %d does not match %s on rank %d", a, lo, b, lo == r ? c->rank : r);
    if (!c->mismatch_msg[0])
        snprintf(c->mismatch_msg, sizeof c->mismatch_msg, "%s", msg);
    return 1;
}

/* A peer's header must say exactly what this rank's would. A different
 * call is the program's mismatch (every rank sees the same headers, so
 * every rank fails alike); anything else is a broken segment. */
static int expect(struct shm_op *o, int r, uint32_t half)
{
    struct shm_comm *c = o->c;
    struct shm_slot_hdr got, want = shm__ctl(c, c->rank)->hdr[half];
    memcpy(&got, (const void *)&shm__ctl(c, r)->hdr[half], sizeof got);
    if (got.seq == want.seq && got.coll == want.coll && got.dtype == want.dtype && got.op == want.op &&
        got.root == want.root && got.count == want.count && got.off == want.off && got.len == want.len)
        return 0;
    char msg[300];
    if (shm__mismatch(c, r, half, msg, sizeof msg)) {
        shm__fail(c, PLX_ERR_MISMATCH, -1);
        return shm__op_error(o, PLX_ERR_MISMATCH, "%s", msg);
    }
    shm__fail(c, PLX_ERR_PROTOCOL, -1);
    return shm__op_error(o, PLX_ERR_PROTOCOL,
                         "%s(seq %llu): rank %d's slot header says %s seq %llu count %llu dtype %d op %d root %d "
                         "round %llu+%llu, rank %d expects %s seq %llu count %llu dtype %d op %d root %d round "
                         "%llu+%llu: the segment is corrupt",
                         o->what, (unsigned long long)o->a->seq, r, coll_label(got.coll), (unsigned long long)got.seq,
                         (unsigned long long)got.count, got.dtype, got.op, got.root, (unsigned long long)got.off,
                         (unsigned long long)got.len, c->rank, coll_label(want.coll), (unsigned long long)want.seq,
                         (unsigned long long)want.count, want.dtype, want.op, want.root, (unsigned long long)want.off,
                         (unsigned long long)want.len);
}

int shm__expect_all(struct shm_op *o, uint32_t half)
{
    for (int r = 0; r < o->c->size; r++) {
        int rc = r == o->c->rank ? 0 : expect(o, r, half);
        if (rc)
            return rc;
    }
    return 0;
}

/* d[0, k) = first_in op slot[first+1] op ... op slot[first+P-1], the slots
 * read at byte offset boff; AVG divided here. first_in is rank first's
 * input (its slot, or its own buffer) and may be d itself. */
int shm__reduce_piece(struct shm_op *o, char *d, const char *first_in, int first, uint32_t half, size_t boff, size_t k)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    if (d != first_in)
        plx_plugin_move(d, first_in, k * o->es);
    for (int s = 1; s < c->size; s++) {
        int q = (first + s) % c->size;
        int rc = c->host->reduce(d, shm__slot(c, q, half) + boff, k, a->dtype, a->op);
        if (rc)
            return shm__op_error(o, rc, "%s(seq %llu): the core's reduction kernel refused dtype %d op %d", o->what,
                                 (unsigned long long)a->seq, a->dtype, a->op);
    }
    return a->op == PLX_AVG ? c->host->scale_div(d, k, a->dtype, (uint64_t)c->size) : 0;
}

/* out[0, n) = in_first op in_(first+1) op ... over every rank's slot at
 * byte offset boff, in cache-sized pieces; out may be in_first itself. */
static int reduce_slots(struct shm_op *o, char *out, uint32_t half, size_t boff, size_t n, int first)
{
    size_t es = o->es, piece = SHM_REDUCE_PIECE_BYTES / es;
    for (size_t base = 0; base < n; base += piece) {
        size_t k = min_sz(piece, n - base), at = boff + base * es;
        int rc = shm__reduce_piece(o, out + base * es, shm__slot(o->c, first, half) + at, first, half, at, k);
        if (rc)
            return rc;
    }
    return 0;
}

/* Slice q of a round of len elements: [*s0, *s1). Slices are multiples of
 * 64 bytes so every rank's kernel runs on aligned, whole vectors. */
void shm__slice(const struct shm_op *o, size_t len, int q, size_t *s0, size_t *s1)
{
    size_t P = (size_t)o->c->size, unit = 64 / o->es;
    size_t per = (len + P - 1) / P;
    per = (per + unit - 1) / unit * unit;
    *s0 = min_sz((size_t)q * per, len);
    *s1 = min_sz(*s0 + per, len);
}

/* This rank's slice [s0, s1) of a round at element off: its own input
 * reduced with every peer's copy of the slice (from the next rank on, as
 * every slice is), in cache-sized pieces, into its slot, from where the
 * peers copy it out; a receiving rank copies each piece to its output while
 * it is still in cache. Its own input is read from the caller's buffer:
 * only the slices the peers reduce were copied into the slot. */
static int reduce_own_slice(struct shm_op *o, char *mine, uint32_t half, size_t off, size_t s0, size_t s1, int receives)
{
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, piece = SHM_REDUCE_PIECE_BYTES / es;
    for (size_t base = s0; base < s1; base += piece) {
        size_t k = min_sz(piece, s1 - base);
        char *d = mine + base * es;
        int rc = shm__reduce_piece(o, d, (const char *)a->send + (off + base) * es, o->c->rank, half, base * es, k);
        if (rc)
            return rc;
        if (receives)
            plx_plugin_move((char *)a->recv + (off + base) * es, d, k * es);
    }
    return 0;
}

/* A call as one word for the fast path, from the slot header this rank
 * wrote (so a corrupt header disagrees here too); UINT32_MAX where a field
 * does not fit its byte, which no fast call has. */
static uint32_t fast_word(const struct shm_slot_hdr *h)
{
    if ((uint32_t)h->coll > 255 || (uint32_t)h->dtype > 255 || (uint32_t)h->op > 255 || h->count > 255)
        return UINT32_MAX;
    return (uint32_t)h->coll | (uint32_t)h->dtype << 8 | (uint32_t)h->op << 16 | (uint32_t)h->count << 24;
}

/* allreduce of at most SHM_FAST_BYTES: one phase through line 0 of every
 * rank's control block (shm.h), where the call and the input ride with the
 * epoch, so a rank takes one line from each peer. A peer whose line names
 * another call (or none: it took another path) is judged by the slot
 * headers, as every other phase is. Reduced in rank order, as
 * reduce_slots does: every rank gets the same bits. */
static int fast_allreduce(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t bytes = a->count * o->es;
    uint32_t half = shm__publish(o, 0, a->count);
    struct shm_ctl *me = shm__ctl(c, c->rank);
    uint32_t word = fast_word(&me->hdr[half]);
    uint64_t seq = me->hdr[half].seq;
    memcpy(me->fast_data[half], a->send, bytes);
    me->fast_desc[half] = word;
    me->fast_seq[half] = seq;
    int rc = shm__barrier(o);
    if (rc)
        return rc;
    for (int r = 0; r < c->size; r++) {
        const struct shm_ctl *q = shm__ctl(c, r);
        if (r == c->rank || (word != UINT32_MAX && q->fast_desc[half] == word && q->fast_seq[half] == seq))
            continue;
        if ((rc = expect(o, r, half)) != 0)
            return rc;
        shm__fail(c, PLX_ERR_PROTOCOL, -1);
        return shm__op_error(o, PLX_ERR_PROTOCOL, "%s(seq %llu): rank %d's small-allreduce line disagrees "
                             "with its slot header: the segment is corrupt", o->what, (unsigned long long)seq, r);
    }
    memcpy(a->recv, shm__ctl(c, 0)->fast_data[half], bytes);
    for (int r = 1; r < c->size; r++)
        if ((rc = c->host->reduce(a->recv, shm__ctl(c, r)->fast_data[half], a->count, a->dtype, a->op)) != 0)
            return shm__op_error(o, rc, "%s(seq %llu): the core's reduction kernel refused dtype %d op %d",
                                 o->what, (unsigned long long)seq, a->dtype, a->op);
    return a->op == PLX_AVG ? c->host->scale_div(a->recv, a->count, a->dtype, (uint64_t)c->size) : 0;
}

/* allreduce (all = 1) and reduce (all = 0: only the root receives). */
static int reduction(struct shm_op *o, int all)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, bytes = a->count * es;
    int rc, receives = all || a->root == c->rank;
    if (bytes <= c->seg->small_bytes && bytes <= c->seg->slot_bytes) {
        if (all && bytes <= SHM_FAST_BYTES)
            return fast_allreduce(o);
        uint32_t half = c->round & 1;
        plx_plugin_move(shm__slot(c, c->rank, half), a->send, bytes);
        shm__publish(o, 0, a->count);
        if ((rc = shm__barrier(o)) != 0)
            return rc;
        if (!receives)
            return 0;
        if ((rc = shm__expect_all(o, half)) != 0)
            return rc;
        return reduce_slots(o, a->recv, half, 0, a->count, 0);
    }
    /* Rounds of one slot: a reduce-scatter (slice q of the round is reduced
     * by rank q alone) then an all-gather, both through the slots. */
    size_t per = c->seg->slot_bytes / es;
    if (all && c->seg->steal) {
        for (size_t off = 0; off < a->count; off += per)
            if ((rc = shm__steal_round(o, off, min_sz(per, a->count - off))) != 0)
                return rc;
        return 0;
    }
    for (size_t off = 0; off < a->count; off += per) {
        size_t len = min_sz(per, a->count - off), s0, s1;
        uint32_t half = c->round & 1;
        char *mine = shm__slot(c, c->rank, half);
        for (int q = 0; q < c->size; q++) {
            shm__slice(o, len, q, &s0, &s1);
            if (q != c->rank)
                plx_plugin_move(mine + s0 * es, (const char *)a->send + (off + s0) * es, (s1 - s0) * es);
        }
        shm__publish(o, off, len);
        if ((rc = shm__barrier(o)) != 0 || (rc = shm__expect_all(o, half)) != 0)
            return rc;
        shm__slice(o, len, c->rank, &s0, &s1);
        if ((rc = reduce_own_slice(o, mine, half, off, s0, s1, receives)) != 0)
            return rc;
        if ((rc = shm__barrier(o)) != 0)
            return rc;
        if (!receives)
            continue;
        for (int q = 0; q < c->size; q++) {
            shm__slice(o, len, q, &s0, &s1);
            if (q != c->rank)
                plx_plugin_move((char *)a->recv + (off + s0) * es, shm__slot(c, q, half) + s0 * es, (s1 - s0) * es);
        }
    }
    return 0;
}

/* allgather (all = 1) and gather (all = 0). */
static int gathering(struct shm_op *o, int all)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, n = a->count, per = c->seg->slot_bytes / es;
    int rc, receives = all || a->root == c->rank;
    for (size_t off = 0; off < n; off += per) {
        size_t len = min_sz(per, n - off);
        uint32_t half = c->round & 1;
        plx_plugin_move(shm__slot(c, c->rank, half), (const char *)a->send + off * es, len * es);
        shm__publish(o, off, len);
        if ((rc = shm__barrier(o)) != 0)
            return rc;
        if (!receives)
            continue;
        if ((rc = shm__expect_all(o, half)) != 0)
            return rc;
        for (int q = 0; q < c->size; q++)
            plx_plugin_move((char *)a->recv + ((size_t)q * n + off) * es, shm__slot(c, q, half), len * es);
    }
    return 0;
}

/* The P-block layouts: reduce_scatter, alltoall (every rank sends P blocks)
 * and scatter (the root does). A round covers [off, off + len) of every
 * block; block q of a round sits at q * len in the slot. */
static int blocks(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, n = a->count, P = (size_t)c->size, me = (size_t)c->rank;
    size_t per = c->seg->slot_bytes / (es * P);
    int rc, sends = a->coll != PLX_COLL_SCATTER || a->root == c->rank;
    for (size_t off = 0; off < n; off += per) {
        size_t len = min_sz(per, n - off);
        uint32_t half = c->round & 1;
        char *mine = shm__slot(c, c->rank, half);
        if (sends)
            for (size_t q = 0; q < P; q++)
                plx_plugin_move(mine + q * len * es, (const char *)a->send + (q * n + off) * es, len * es);
        shm__publish(o, off, len);
        if ((rc = shm__barrier(o)) != 0)
            return rc;
        char *out = (char *)a->recv + off * es;
        switch (a->coll) {
        case PLX_COLL_REDUCE_SCATTER:
            if ((rc = shm__expect_all(o, half)) != 0 || (rc = reduce_slots(o, out, half, me * len * es, len, 0)) != 0)
                return rc;
            break;
        case PLX_COLL_ALLTOALL:
            if ((rc = shm__expect_all(o, half)) != 0)
                return rc;
            for (size_t q = 0; q < P; q++)
                plx_plugin_move((char *)a->recv + (q * n + off) * es, shm__slot(c, (int)q, half) + me * len * es, len * es);
            break;
        default: /* scatter */
            if (a->root != c->rank && (rc = expect(o, a->root, half)) != 0)
                return rc;
            plx_plugin_move(out, shm__slot(c, a->root, half) + me * len * es, len * es);
            break;
        }
    }
    return 0;
}

static int broadcast(struct shm_op *o)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es, per = c->seg->slot_bytes / es;
    int rc, root = a->root;
    for (size_t off = 0; off < a->count; off += per) {
        size_t len = min_sz(per, a->count - off);
        uint32_t half = c->round & 1;
        if (c->rank == root)
            plx_plugin_move(shm__slot(c, root, half), (const char *)a->recv + off * es, len * es);
        shm__publish(o, off, len);
        if ((rc = shm__barrier(o)) != 0)
            return rc;
        if (c->rank != root) {
            if ((rc = expect(o, root, half)) != 0)
                return rc;
            plx_plugin_move((char *)a->recv + off * es, shm__slot(c, root, half), len * es);
        }
    }
    return 0;
}

static int collective(struct shm_comm *c, const struct plx_coll_args *a, char *err)
{
    int64_t ms = a->timeout_ms >= 0 ? a->timeout_ms : c->timeout_ms;
    struct shm_op o = {
        .c = c,
        .a = a,
        .what = shm__coll_name(a->coll),
        .timeout_ms = ms,
        .es = a->coll == PLX_COLL_BARRIER ? 1 : plx_plugin_dtype_size(a->dtype),
        .err = err,
    };
    if (!o.es)
        return shm__op_error(&o, PLX_ERR_INVALID_ARG, "shm: %s: invalid dtype %d", o.what, a->dtype);
    if (a->coll != PLX_COLL_BARRIER && a->count == 0)
        return 0;
    if (shm__sym_wants(&o))
        return shm__sym_run(&o);
    if (shm__cma_wants(&o))
        return shm__cma_run(&o);
    switch (a->coll) {
    case PLX_COLL_BARRIER: {
        uint32_t half = shm__publish(&o, 0, 0);
        int rc = shm__barrier(&o);
        return rc ? rc : shm__expect_all(&o, half);
    }
    case PLX_COLL_ALLREDUCE: return reduction(&o, 1);
    case PLX_COLL_REDUCE: return reduction(&o, 0);
    case PLX_COLL_ALLGATHER: return gathering(&o, 1);
    case PLX_COLL_GATHER: return gathering(&o, 0);
    case PLX_COLL_BROADCAST: return broadcast(&o);
    case PLX_COLL_REDUCE_SCATTER:
    case PLX_COLL_ALLTOALL:
    case PLX_COLL_SCATTER: return blocks(&o);
    default: return shm__op_error(&o, PLX_ERR_UNSUPPORTED, "shm: collective %d is not native here", a->coll);
    }
}

int shm__collective(struct shm_comm *c, const struct plx_coll_args *a, char *err)
{
    int rc = collective(c, a, err);
    if (c->cfg.wait_slice_ns) /* a wait may have shortened it (0: none did) */
        plx__slice_restore();
    return rc;
}
