/* algo.h - generic collectives over a backend's point-to-point.
 * Ring reduce-scatter + allgather allreduce (chunked, pipelined),
 * Rabenseifner's halving-doubling allreduce, recursive doubling for small
 * messages, binomial-tree broadcast and reduce, ring
 * allgather, pairwise alltoall, dissemination barrier, direct gather and
 * scatter. Used by the core for every collective a plugin does not run
 * natively. Scratch memory lives as long as the communicator.
 * Stability: internal. */
#ifndef PLX_CORE_ALGO_H
#define PLX_CORE_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/backend.h"
#include "tuner.h"

/* What the algorithms drive. comm.c wraps the plugin in one of these. */
struct plx__p2p {
    void *ctx;
    int rank, size;
    /* Start a transfer; *req is handed to wait(). */
    int (*isend)(void *ctx, int peer, const void *buf, size_t bytes, uint64_t tag, void **req);
    int (*irecv)(void *ctx, int peer, void *buf, size_t bytes, uint64_t tag, void **req);
    /* Wait until deadline_ns (plx clock); always releases req, also on error.
     * Error messages name the peer. */
    int (*wait)(void *ctx, void *req, uint64_t deadline_ns);
    /* Release a request that will not be waited for (after an error). */
    void (*discard)(void *ctx, void *req);
    int timing_only; /* PLX_CAP_TIMING_ONLY: no reductions or copies */
    /* A simulator's hooks (the backend's "plexus.sim" extension), NULL for
     * every other backend: bytes reduced on this rank, and an operation's
     * buffers on this rank as it begins (0 as it ends). */
    void (*charge_reduce)(void *ctx, size_t bytes);
    void (*op_footprint)(void *ctx, size_t bytes);
};

/* Tuning, from [core] keys (comm.c fills it). */
enum plx__allreduce_algo { PLX__AR_AUTO = 0, PLX__AR_RING, PLX__AR_RECDBL, PLX__AR_TREE, PLX__AR_RABENSEIFNER };
struct plx__algo_tuning {
    int allreduce_algo;       /* enum plx__allreduce_algo */
    size_t small_bytes;       /* below: latency algorithm (auto mode) */
    size_t segment_bytes;     /* pipeline segment of ring steps; 0: by world size */
    struct plx__tuner tuner;  /* [core] tuner: auto's choice by size from a table (n 0: built in) */
};

/* Per-communicator scratch, grown on demand and kept (fresh pages are slow). */
struct plx__scratch {
    void *buf;
    size_t bytes;
};
void *plx__scratch_get(struct plx__scratch *s, size_t bytes);
void plx__scratch_free(struct plx__scratch *s);

/* Run collective a (a->seq names its tags) over p; every wait ends by
 * deadline_ns. a->op AVG is handled (sum + scale). Returns 0 or an error
 * whose message names the peer involved. */
int plx__algo_run(const struct plx__p2p *p, const struct plx__algo_tuning *t, struct plx__scratch *scratch,
                  const struct plx_coll_args *a, uint64_t deadline_ns);

/* Tag of step `step` of collective seq (core tag space). */
static inline uint64_t plx__algo_tag(uint64_t seq, uint32_t step)
{
    return PLX_TAG_CORE_BIT | ((seq & UINT64_C(0x3fffffffff)) << 24) | (step & 0xffffffu);
}

#endif
