/* fsdp_internal.h - the state the FSDP files share: units (master shard,
 * gradient shard, kept full copy, the reduction in flight) and the strategy
 * (communicators, dtypes, scratch, byte counts). Stability: internal. */
#ifndef PLX_STRATEGY_FSDP_INTERNAL_H
#define PLX_STRATEGY_FSDP_INTERNAL_H

#include <stddef.h>

#include "plexus/strategy.h"

/* One reduction of a unit's gradient in flight (ireduce_grad). HYBRID_SHARD
 * runs two stages: the reduce-scatter inside the node, then the allreduce
 * across nodes, launched in issue order (f->rq). */
struct fsdp_reduce {
    struct plx_work *work; /* the stage in flight; NULL: none */
    int stage;             /* 1: reduce-scatter, the inter-node stage still to launch; 2: last stage */
    int err;               /* a failed stage 1 (reported by the wait) */
    void *send;            /* owned copy of the gradient (padded / converted), or NULL */
    void *recv;            /* the reduced shard, len elements of the reduce dtype */
    size_t bytes;          /* send + recv held */
};

struct fsdp_unit {
    size_t count, padded, len, off, valid;
    int dtype;                 /* master dtype: shard and grad */
    int pdtype, rdtype;        /* gathered (param) dtype, reduce dtype */
    void *shard, *grad;
    void *full;                /* kept copy in pdtype (SHARD_GRAD_OP; NO_SHARD: == shard unless
                                  pdtype differs); NULL otherwise */
    struct fsdp_reduce rs;
};

struct plx_fsdp {
    struct plx_comm *world, *shard_comm, *repl_comm;
    int strategy, shards, shard_rank;
    int param_dtype, reduce_dtype, offload; /* options; -1: per unit */
    double optim_factor;
    struct fsdp_unit *units;
    int nunits;
    /* Gather scratch, used by one gather (blocking or prefetch) at a time. */
    void *gbuf;  /* padded gathered unit */
    size_t gbuf_bytes;
    void *gsend; /* the shard converted to the param dtype */
    size_t gsend_bytes;
    int *rq, rq_n, rq_cap;    /* HYBRID_SHARD: units in stage 1, in issue order */
    struct plx_work *pf_work; /* one prefetch in flight */
    int pf_unit;
    void *pf_full;
    size_t shard_bytes, full_bytes, grad_bytes, reduce_bytes, padding_bytes, peak;
};

struct fsdp_unit *plx__fsdp_unit(const struct plx_fsdp *f, int unit);
void plx__fsdp_note_peak(struct plx_fsdp *f);
/* The communicator a unit's gradient is reduced over first. */
struct plx_comm *plx__fsdp_reduce_comm(const struct plx_fsdp *f);

/* fsdp_precision.c: conversions between f16, bf16, f32, f64. */
int plx__fsdp_dtype_ok(int dtype);
void plx__fsdp_convert(void *dst, int ddt, const void *src, int sdt, size_t n);
/* dst[i] += src[i], src converted to dst's dtype (rounded once for 16-bit dst). */
void plx__fsdp_accumulate(void *dst, int ddt, const void *src, int sdt, size_t n);
double plx__fsdp_get(const void *p, int dtype, size_t i);
/* p[i] *= scale for i < n. */
void plx__fsdp_scale(void *p, int dtype, size_t n, double scale);

/* fsdp_grad.c */
int plx__fsdp_finish_reduce(struct plx_fsdp *f, struct fsdp_unit *u);
/* Launch the inter-node stage of every HYBRID_SHARD reduction whose
 * reduce-scatter has completed, in issue order (never blocks). */
void plx__fsdp_progress(struct plx_fsdp *f);

#endif
