/* internal.h - helpers shared by the generic algorithms. Stability: internal. */
#ifndef PLX_CORE_ALGO_INTERNAL_H
#define PLX_CORE_ALGO_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "algo.h"
#include "reduce.h"
#include "plexus/backend.h"
#include "plexus/plexus.h"

/* Everything one running collective needs. */
struct algo_ctx {
    const struct plx__p2p *p;
    const struct plx__algo_tuning *t;
    struct plx__scratch *scratch;
    const struct plx_coll_args *a;
    uint64_t deadline;
    size_t esize; /* bytes per element */
    int rank, size;
    uint32_t tag_base; /* offsets the steps of a sub-algorithm (tree allreduce) */
};

/* Tag of segment seg of step step: 4096 segments per step at most. */
static inline uint64_t step_tag(const struct algo_ctx *x, uint32_t step, uint32_t seg)
{
    return plx__algo_tag(x->a->seq, ((x->tag_base + step) << 12) | (seg & 0xfffu));
}



/* Block i of count elements split over n parts: sizes differ by at most one. */
static inline size_t block_off(size_t count, int n, int i)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return base * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
}

static inline size_t block_len(size_t count, int n, int i)
{
    return count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
}

static inline int mod(int x, int n)
{
    return ((x % n) + n) % n;
}

/* Blocks of a buffer: `uniform` blocks of count elements each (reduce-scatter,
 * allgather), or count elements split over P (allreduce). */
struct layout {
    size_t count;
    int uniform;
};

static inline size_t lo_off(struct layout l, int n, int i)
{
    return l.uniform ? l.count * (size_t)i : block_off(l.count, n, i);
}

static inline size_t lo_len(struct layout l, int n, int i)
{
    return l.uniform ? l.count : block_len(l.count, n, i);
}

/* Length of segment i when total is cut into segments of seg. */
static inline size_t seg_len(size_t total, size_t i, size_t seg)
{
    return total - i * seg < seg ? total - i * seg : seg;
}

/* Over a timing-only backend (PLX_CAP_TIMING_ONLY) a collective larger
 * than PLX_TIMING_EXACT_BYTES per rank holds no data, so its arithmetic is
 * skipped: the modelled time is the messages', and thousands of ranks cost
 * no CPU per byte. */
static inline int plx__algo_timing_only(const struct algo_ctx *x)
{
    return x->p->timing_only && x->a->count * x->esize > PLX_TIMING_EXACT_BYTES;
}

/* Timing only: a message's buffer as the backend gets it, none (backend.h),
 * so no page of the user's buffers or of scratch is touched and memory
 * does not grow with the message size. */
static inline void *plx__algo_buf(const struct algo_ctx *x, const void *p)
{
    return plx__algo_timing_only(x) ? NULL : (void *)p;
}

static inline int plx__isend(const struct algo_ctx *x, int to, const void *buf, size_t bytes, uint64_t tag,
                             void **req)
{
    return x->p->isend(x->p->ctx, to, plx__algo_buf(x, buf), bytes, tag, req);
}

static inline int plx__irecv(const struct algo_ctx *x, int from, void *buf, size_t bytes, uint64_t tag, void **req)
{
    return x->p->irecv(x->p->ctx, from, plx__algo_buf(x, buf), bytes, tag, req);
}

/* Scratch of bytes: the communicator's, or, timing only, addresses that are
 * never touched (one reservation the process shares, no memory behind it). */
void *plx__algo_scratch(const struct algo_ctx *x, size_t bytes);

/* Reductions and local copies of the algorithms. */
static inline int plx__algo_reduce3(const struct algo_ctx *x, void *out, const void *a, const void *b, size_t count,
                                    int dtype, int op)
{
    if (x->p->charge_reduce)
        x->p->charge_reduce(x->p->ctx, count * x->esize);
    return plx__algo_timing_only(x) ? 0 : plx__reduce3(out, a, b, count, dtype, op);
}

static inline void plx__algo_copy(const struct algo_ctx *x, void *dst, const void *src, size_t bytes)
{
    if (!plx__algo_timing_only(x))
        plx__copy(dst, src, bytes);
}

enum { RING_WINDOW = 4 };
/* Elements per pipeline segment for blocks of up to max_elems. */
size_t plx__seg_elems(const struct algo_ctx *x, size_t max_elems);

/* Post a receive and a send, wait for both (either may be 0 bytes). */
int plx__sendrecv(struct algo_ctx *x, int to, const void *sbuf, size_t sbytes, int from, void *rbuf, size_t rbytes,
                  uint64_t tag);
int plx__send(struct algo_ctx *x, int to, const void *buf, size_t bytes, uint64_t tag);
int plx__recv(struct algo_ctx *x, int from, void *buf, size_t bytes, uint64_t tag);

/* One ring step moving one block out and one block in, segmented so that
 * receiving segment k+1 overlaps reducing segment k. If dst is NULL the
 * incoming block lands in rbuf as is; else dst = src op incoming. */
struct ring_io {
    int to, from;
    const char *sbuf; size_t selems;   /* outgoing block */
    char *rbuf; size_t relems;         /* incoming block (plain mode) */
    char *dst; const char *src;        /* reduce mode: dst = src op incoming */
    char *tmp;                         /* reduce mode: RING_WINDOW segments */
    size_t seg;                        /* reduce mode: elements per segment */
    uint32_t tag_step;
};
int plx__ring_step(struct algo_ctx *x, const struct ring_io *io);

int plx__allreduce(struct algo_ctx *x);
int plx__reduce_scatter(struct algo_ctx *x);
int plx__allgather(struct algo_ctx *x);
int plx__broadcast(struct algo_ctx *x);
int plx__reduce_tree(struct algo_ctx *x);
int plx__gather(struct algo_ctx *x);
int plx__scatter(struct algo_ctx *x);
int plx__alltoall(struct algo_ctx *x);
int plx__barrier(struct algo_ctx *x);
int plx__alltoallv(struct algo_ctx *x);
int plx__allgatherv(struct algo_ctx *x);

/* Ring reduce-scatter leaving block i (of P blocks of count elements) fully
 * reduced on rank i. full_out: allreduce's output (blocks reduced in place
 * there); else partial blocks go to scratch and block rank to out. */
int plx__ring_reduce_scatter(struct algo_ctx *x, const char *src, struct layout l, char *full_out, char *out);
/* Ring allgather of P blocks of buf (block i already correct on rank i). */
int plx__ring_allgather(struct algo_ctx *x, char *buf, struct layout l, uint32_t step0);
/* Binomial-tree reduce to root of x->a (acc: where a non-root may
 * accumulate, NULL for scratch) and broadcast from root. */
int plx__tree_reduce(struct algo_ctx *x, const char *send, char *recv, char *acc, int root);
int plx__tree_bcast(struct algo_ctx *x, char *buf, int root);

#endif
