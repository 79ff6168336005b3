/* steal.c - a round of a large allreduce in which running ranks do the
 * work of ranks that are not running.
 *
 * Why: when other work shares the cores, every wait for a peer lasts until
 * the scheduler runs that peer again, which can be a whole time slice of
 * the foreign task. The two-barrier round (coll.c: reduce your own slice,
 * barrier, copy out) needs every rank to run twice per round; here a round
 * needs each rank's input once, and whoever runs finishes the rest.
 *
 * A round: every rank copies all of its input for the round into its slot
 * (its own slice too, so others can reduce it), sets up its slice's pieces
 * (cache-sized) in its control block, publishes, and meets the others at
 * one barrier. Then it takes its own slice's pieces from the front and,
 * when none are left, the other slices' from their back ends (a compare-
 * and-swap on one word per slice, so each piece is reduced exactly once).
 * A reduced piece stays in its owner's slot; the rank that reduced its own
 * piece copies it out at once, while it is in cache. Last, a rank waits for
 * each slice's pieces to be counted done and copies the slice out.
 *
 * Bits: a piece of slice q is always reduced from rank q's input on, in
 * rank order, as in coll.c, so the result does not depend on who reduced it.
 *
 * Reuse: slot half h is written again two rounds later, after the next
 * round's barrier, which every rank reaches only once it has copied this
 * round out; the owner sets its pieces up again before that barrier too.
 * What a peer wrote to a claim word is checked against this rank's own
 * count of pieces before it is used. */
#include "shm.h"


static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Slice q of the round, as elements [s0, s1), in pieces of pe elements. */
struct slice {
    size_t s0, s1, pe;
    uint32_t pieces;
};

static struct slice slice_of(const struct shm_op *o, size_t len, int q)
{
    struct slice s;
    shm__slice(o, len, q, &s.s0, &s.s1);
    s.pe = SHM_REDUCE_PIECE_BYTES / o->es;
    s.pieces = (uint32_t)((s.s1 - s.s0 + s.pe - 1) / s.pe);
    return s;
}

static uint64_t pack(uint32_t front, uint32_t back)
{
    return (uint64_t)back << 32 | front;
}

/* The next piece of q's slice: from the front for its owner, from the back
 * for the others; -1 when none is left. */
static int64_t take(struct shm_ctl *q, uint32_t half, int own)
{
    uint64_t w = __atomic_load_n(&q->claim[half], __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t f = (uint32_t)w, b = (uint32_t)(w >> 32);
        if (f >= b)
            return -1;
        uint64_t next = own ? pack(f + 1, b) : pack(f, b - 1);
        if (__atomic_compare_exchange_n(&q->claim[half], &w, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return own ? f : b - 1;
    }
}

static int corrupt(struct shm_op *o, int q, int64_t piece, uint32_t pieces)
{
    shm__fail(o->c, PLX_ERR_PROTOCOL, q);
    return shm__op_error(o, PLX_ERR_PROTOCOL, "%s(seq %llu): rank %d's claim word gives piece %lld of %u: the "
                         "segment is corrupt", o->what, (unsigned long long)o->a->seq, q, (long long)piece, pieces);
}

/* Reduce every piece of q's slice this rank can take, counting each done. */
static int reduce_taken(struct shm_op *o, size_t off, size_t len, int q, uint32_t half, uint32_t *taken)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    struct shm_ctl *ctl = shm__ctl(c, q);
    struct slice s = slice_of(o, len, q);
    size_t es = o->es;
    int own = q == c->rank;
    char *slot = shm__slot(c, q, half);
    for (int64_t i; (i = take(ctl, half, own)) >= 0;) {
        if ((uint64_t)i >= s.pieces)
            return corrupt(o, q, i, s.pieces);
        size_t base = s.s0 + (size_t)i * s.pe, k = min_sz(s.pe, s.s1 - base);
        char *d = slot + base * es;
        const char *first_in = own ? (const char *)a->send + (off + base) * es : d;
        int rc = shm__reduce_piece(o, d, first_in, q, half, base * es, k);
        if (rc) {
            shm__fail(c, rc, -1);
            return rc;
        }
        if (own)
            plx_plugin_move((char *)a->recv + (off + base) * es, d, k * es);
        if (__atomic_add_fetch(&ctl->done[half], 1, __ATOMIC_SEQ_CST) == s.pieces)
            shm__wake_pieces(ctl, half);
        (*taken)++;
    }
    return 0;
}

int shm__steal_round(struct shm_op *o, size_t off, size_t len)
{
    struct shm_comm *c = o->c;
    const struct plx_coll_args *a = o->a;
    size_t es = o->es;
    int P = c->size, me = c->rank, rc;
    uint32_t half = c->round & 1, mine_taken = 0, stolen = 0;
    struct shm_ctl *my = shm__ctl(c, me);
    struct slice own = slice_of(o, len, me);

    plx_plugin_move(shm__slot(c, me, half), (const char *)a->send + off * es, len * es);
    __atomic_store_n(&my->done[half], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&my->claim[half], pack(0, own.pieces), __ATOMIC_RELAXED);
    shm__publish(o, off, len); /* the barrier's store orders the three above */
    if ((rc = shm__barrier(o)) != 0 || (rc = shm__expect_all(o, half)) != 0)
        return rc;

    if ((rc = reduce_taken(o, off, len, me, half, &mine_taken)) != 0)
        return rc;
    for (int s = 1; s < P; s++)
        if ((rc = reduce_taken(o, off, len, (me + s) % P, half, &stolen)) != 0)
            return rc;

    for (int s = 1; s < P; s++) {
        int q = (me + s) % P;
        struct slice qs = slice_of(o, len, q);
        if ((rc = shm__wait_pieces(o, q, half, qs.pieces)) != 0)
            return rc;
        plx_plugin_move((char *)a->recv + (off + qs.s0) * es, shm__slot(c, q, half) + qs.s0 * es, (qs.s1 - qs.s0) * es);
    }
    /* The owner took its pieces from the front: those after them were
     * reduced by others and are still only in this rank's slot. */
    if ((rc = shm__wait_pieces(o, me, half, own.pieces)) != 0)
        return rc;
    size_t rest = min_sz(own.s0 + (size_t)mine_taken * own.pe, own.s1);
    plx_plugin_move((char *)a->recv + (off + rest) * es, shm__slot(c, me, half) + rest * es, (own.s1 - rest) * es);
    return 0;
}
