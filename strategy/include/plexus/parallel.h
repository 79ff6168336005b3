/* parallel.h - model parallelism over flat buffers: an N-D device mesh,
 * pipeline schedules generated as data (GPipe, 1F1B, interleaved 1F1B), a
 * checker that proves a schedule completes, a runner that executes one
 * stage's actions over point-to-point with the caller's callbacks, and the
 * Megatron-style tensor-parallel operators with the sharding math of
 * column- and row-parallel linear layers.
 *
 * Stability: stable API; option and result structs start with struct_size
 * and are append-only. Everything is built on the public communicator API
 * (plx_comm_split, collectives, plx_isend/plx_irecv): no algorithm is
 * re-implemented here. Every function returns 0 or a negative PLX_ERR_*
 * code with the detail in plx_last_error().
 */
#ifndef PLEXUS_PARALLEL_H
#define PLEXUS_PARALLEL_H

#include "plexus/plexus.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- N-D device mesh --------------------------------------------------- *
 * Named dimensions (e.g. "dp", "pp", "tp") whose sizes multiply to the world
 * size; ranks are laid out row-major (the last dimension varies fastest), so
 * with dims (dp, pp, tp) = (2, 2, 2) world rank 5 is at (1, 0, 1). Each rank
 * gets one communicator per dimension: the ranks that differ from it only in
 * that coordinate, ordered by it (its rank there is its coordinate). The 2-D
 * plx_mesh of strategy.h is the special case ("node", "local"). */
#define PLX_MESH_MAX_DIMS 8
struct plx_nd_mesh;

/* Collective over world: every rank passes the same dims. names: ndims
 * distinct non-empty strings (copied); sizes: ndims positive sizes, or one
 * -1 to be inferred from the world size. A product other than the world
 * size, a repeated name or ndims outside 1 .. PLX_MESH_MAX_DIMS is
 * PLX_ERR_INVALID_ARG. world is borrowed until plx_nd_mesh_destroy(), which
 * frees the mesh and its communicators. */
PLX_API int plx_nd_mesh_create(struct plx_comm *world, int ndims, const char *const *names, const int *sizes,
                               struct plx_nd_mesh **out);
PLX_API void plx_nd_mesh_destroy(struct plx_nd_mesh *mesh);
PLX_API int plx_nd_mesh_ndims(const struct plx_nd_mesh *mesh);
/* Index of the dimension called name, or PLX_ERR_NOT_FOUND. */
PLX_API int plx_nd_mesh_dim(const struct plx_nd_mesh *mesh, const char *name);
/* Name (valid until destroy) and size of dimension dim. */
PLX_API const char *plx_nd_mesh_name(const struct plx_nd_mesh *mesh, int dim);
PLX_API int plx_nd_mesh_size(const struct plx_nd_mesh *mesh, int dim);
/* This rank's coordinate along dim. */
PLX_API int plx_nd_mesh_coord(const struct plx_nd_mesh *mesh, int dim);
/* The communicator of dim for this rank (borrowed: valid until destroy). */
PLX_API struct plx_comm *plx_nd_mesh_comm(const struct plx_nd_mesh *mesh, int dim);
/* World rank at coords (ndims entries), or PLX_ERR_INVALID_ARG when one is
 * out of range. */
PLX_API int plx_nd_mesh_rank_at(const struct plx_nd_mesh *mesh, const int *coords);
/* Coordinates (ndims entries) of world rank `rank`. */
PLX_API int plx_nd_mesh_coords_of(const struct plx_nd_mesh *mesh, int rank, int *coords);

/* ---- pipeline schedules --------------------------------------------------- *
 * S stages (the ranks of the pipeline communicator), M micro-batches, V model
 * chunks per stage. Chunk c of stage s is virtual stage c * S + s (Megatron's
 * interleaved layout), so activations flow stage 0 -> S-1, then wrap to
 * stage 0's next chunk. Each stage runs its own ordered list of actions. */
enum plx_pipe_kind {
    PLX_PIPE_GPIPE = 0,       /* all forwards, then all backwards (V = 1) */
    PLX_PIPE_1F1B = 1,        /* PipeDream-flush: warm-up forwards, one forward one backward, cool-down (V = 1) */
    PLX_PIPE_INTERLEAVED = 2, /* Megatron's interleaved 1F1B: V >= 2 chunks, M a multiple of S */
};

enum plx_pipe_op {
    PLX_PIPE_FORWARD = 0,   /* run the forward of (chunk, mb) */
    PLX_PIPE_BACKWARD = 1,  /* run the backward of (chunk, mb) */
    PLX_PIPE_SEND_ACT = 2,  /* send (chunk, mb)'s output activation to peer (the next virtual stage) */
    PLX_PIPE_RECV_ACT = 3,  /* receive (chunk, mb)'s input activation from peer (the previous one) */
    PLX_PIPE_SEND_GRAD = 4, /* send the gradient of (chunk, mb)'s input to peer (the previous one) */
    PLX_PIPE_RECV_GRAD = 5, /* receive the gradient of (chunk, mb)'s output from peer (the next one) */
};

struct plx_pipe_action {
    int op;    /* enum plx_pipe_op */
    int chunk; /* local model chunk, 0 .. V-1 */
    int mb;    /* micro-batch, 0 .. M-1 */
    int peer;  /* stage sent to / received from; -1 for FORWARD and BACKWARD */
};

struct plx_pipe_schedule;

/* Generate every stage's action list. GPIPE and 1F1B need chunks == 1;
 * INTERLEAVED needs chunks >= 2 and micro_batches a positive multiple of
 * stages (its forward order takes micro-batches in groups of S per chunk);
 * other values are PLX_ERR_INVALID_ARG with a message saying which rule.
 * Limits: stages 1 .. 1024, micro_batches 1 .. 65536, chunks 1 .. 64, and
 * stages * chunks * micro_batches at most 2^22.
 * Free with plx_pipe_schedule_destroy(). */
PLX_API int plx_pipe_schedule_create(int kind, int stages, int micro_batches, int chunks,
                                     struct plx_pipe_schedule **out);
PLX_API void plx_pipe_schedule_destroy(struct plx_pipe_schedule *s);
/* Stage `stage`'s list: *actions (valid until destroy) and *count. */
PLX_API int plx_pipe_schedule_actions(const struct plx_pipe_schedule *s, int stage,
                                      const struct plx_pipe_action **actions, int *count);
/* Shape: any of the outputs may be NULL. */
PLX_API int plx_pipe_schedule_shape(const struct plx_pipe_schedule *s, int *kind, int *stages, int *micro_batches,
                                    int *chunks);
/* "gpipe", "1f1b", "interleaved" <-> enum plx_pipe_kind (-1 if unknown). */
PLX_API const char *plx_pipe_kind_name(int kind);
PLX_API int plx_pipe_kind_from_name(const char *name);

/* Per-stage figures: from the checker (ideal timeline with the given costs)
 * or measured by the runner (wall clock, seconds). */
struct plx_pipe_stats {
    uint32_t struct_size;
    int peak_live;   /* most (chunk, mb) whose forward ran and backward not yet: stashed activations */
    double busy_s;   /* time in forward and backward */
    double total_s;  /* from the stage's start until every stage had finished */
    double bubble;   /* 1 - busy_s / total_s: the idle fraction */
    int forwards, backwards;
    /* After plx_pipe_run() failed: the stage that failed and where (-1 when
     * unknown or when nothing failed), the same on every stage, so a caller
     * can tell ranks outside the pipeline (e.g. with an allreduce). */
    int failed_stage, failed_chunk, failed_mb;
};

/* Prove that lists (lists[s] has counts[s] actions, for s < stages) complete:
 * simulate every stage together, sends never blocking and a receive waiting
 * until its message was sent. Refused (PLX_ERR_INVALID_ARG, naming stage,
 * position and rule): an action whose input is not there (a forward before
 * its activation arrived, a backward before its forward or its gradient, a
 * send of something not computed), a peer that is not the neighbouring
 * virtual stage, anything done twice, a deadlock (every stuck stage and the
 * action it waits at), an unreceived message, a forward or backward never
 * run. stats (stages entries, or NULL; set stats[0].struct_size, the
 * array's stride) gets each stage's peak live
 * activations and its ideal timeline with forward and backward costing
 * fwd_cost and bwd_cost and communication free. */
PLX_API int plx_pipe_check_lists(int stages, int micro_batches, int chunks, const struct plx_pipe_action *const *lists,
                                 const int *counts, double fwd_cost, double bwd_cost, struct plx_pipe_stats *stats);
/* The same for a generated schedule. */
PLX_API int plx_pipe_schedule_check(const struct plx_pipe_schedule *s, double fwd_cost, double bwd_cost,
                                    struct plx_pipe_stats *stats);

/* ---- pipeline runner ------------------------------------------------------ */
struct plx_pipe_callbacks {
    uint32_t struct_size;
    void *user; /* passed to every callback */
    /* Forward of micro-batch mb through local chunk `chunk`. in: the input
     * activation (act_count elements), NULL on the first virtual stage (the
     * caller reads its own data); out: fill with the output activation,
     * NULL on the last virtual stage (compute the loss there). Both are the
     * runner's, valid during the call: keep what backward needs. Nonzero
     * return fails the pipeline (negative PLX_ERR_* is passed on). */
    int (*forward)(void *user, int chunk, int mb, const void *in, void *out);
    /* Backward of (chunk, mb). grad_out: gradient of the loss with respect to
     * the chunk's output, NULL on the last virtual stage; grad_in: fill with
     * the gradient with respect to its input, NULL on the first. */
    int (*backward)(void *user, int chunk, int mb, const void *grad_out, void *grad_in);
};

struct plx_pipe_options {
    uint32_t struct_size;
    size_t act_count;   /* elements of every activation and gradient message (required) */
    int dtype;          /* default PLX_F32 */
    int64_t timeout_ms; /* bound on every wait; 0 or PLX_TIMEOUT_DEFAULT: 60000;
                           PLX_TIMEOUT_INFINITE: none */
    int tag_base;       /* tags tag_base .. tag_base + 2*S*V*M + 1 are used; default 1 << 24 */
    int lookahead;      /* receives posted ahead of their turn; default 8, -1: all at the start */
};
PLX_API void plx_pipe_options_init(struct plx_pipe_options *o);

/* Run this stage's list (stage = plx_comm_rank(pp); S = plx_comm_size(pp)):
 * receives are posted up to `lookahead` actions early so transfers overlap
 * the callbacks; sends never block the list. At the end every stage tells
 * every other that it finished, so all return only when the whole pipeline
 * has. A stage that fails (a callback's error, a lost or silent peer, a
 * timeout) tells every other stage at once on a control tag; each then
 * returns an error naming the failed stage, the micro-batch and what
 * happened: the failed stage its own code, the others PLX_ERR_REMOTE (or
 * PLX_ERR_PEER_LOST / PLX_ERR_TIMEOUT where they saw it themselves). After
 * an error pp is aborted (plx_comm_abort) so no transfer stays pending:
 * create a new communicator to go on. stats (or NULL) gets this stage's
 * measured figures, and after a failure where it happened. Collectives the
 * callbacks run on other communicators (tensor parallelism) are the
 * caller's: the tp ranks of a stage each learn of a failure from their own
 * pipeline, at different points, so one may stop while its tp peer waits in
 * such a collective until that communicator's timeout. examples/train_3d.c
 * shows how the other replicas learn of a failure (one allreduce). */
PLX_API int plx_pipe_run(struct plx_comm *pp, const struct plx_pipe_schedule *s, const struct plx_pipe_callbacks *cb,
                         const struct plx_pipe_options *o, struct plx_pipe_stats *stats);

/* ---- tensor parallelism ---------------------------------------------------- *
 * The conjugate operator pairs of Megatron-LM over the tensor-parallel
 * communicator tp (P ranks), in place or not (in == out allowed):
 *   COPY        forward identity,                 backward allreduce (sum)   ("f")
 *   REDUCE      forward allreduce (sum),          backward identity          ("g")
 *   GATHER_SEQ  forward all-gather (count -> P*count), backward reduce-scatter (sum)
 *   SCATTER_SEQ forward reduce-scatter (P*count -> count), backward all-gather
 * For the sequence-parallel pair count is the elements of one rank's shard
 * (pad the sequence with plx_tp_split); the full side holds P * count. */
enum plx_tp_op {
    PLX_TP_COPY = 0,
    PLX_TP_REDUCE = 1,
    PLX_TP_GATHER_SEQ = 2,
    PLX_TP_SCATTER_SEQ = 3,
};
PLX_API int plx_tp_forward(struct plx_comm *tp, int op, const void *in, void *out, size_t count, int dtype);
PLX_API int plx_tp_backward(struct plx_comm *tp, int op, const void *grad_out, void *grad_in, size_t count,
                            int dtype);

/* A dimension of n split over `parts`: part `index` holds [offset, offset +
 * count) and `padded` elements (count plus zero padding). PLX_TP_EVEN
 * refuses an n that is not a multiple of parts; PLX_TP_PAD gives every part
 * ceil(n / parts), the last ones padded (a part may hold no real element). */
enum plx_tp_split_mode { PLX_TP_EVEN = 0, PLX_TP_PAD = 1 };
struct plx_tp_range {
    size_t offset, count, padded;
};
PLX_API int plx_tp_split(size_t n, int parts, int index, int mode, struct plx_tp_range *out);

/* A linear layer y = W x + b, W of out_features x in_features (row-major).
 * COLUMN-parallel (Megatron's ColumnParallelLinear) splits the output
 * features: a rank holds rows [offset, offset + count) of W and the same
 * part of b; its output is its slice of y (follow it by an activation and a
 * ROW-parallel layer, or gather). ROW-parallel splits the input features: a
 * rank holds columns [offset, offset + count) of W, multiplies its slice of
 * x, and REDUCE sums the partial outputs; b is added once, after the sum. */
enum plx_tp_linear_kind { PLX_TP_COLUMN = 0, PLX_TP_ROW = 1 };
struct plx_tp_linear {
    uint32_t struct_size;
    int kind;                    /* enum plx_tp_linear_kind */
    size_t in_features, out_features;
    struct plx_tp_range split;   /* of out_features (COLUMN) or in_features (ROW) */
    size_t local_in, local_out;  /* shape of this rank's W shard: local_out x local_in (padded) */
};
/* Layout of rank `rank` of P. mode as for plx_tp_split. */
PLX_API int plx_tp_linear_init(struct plx_tp_linear *l, int kind, size_t in_features, size_t out_features, int rank,
                               int P, int mode);
/* Copy this rank's shard out of the full W (and b, if both are non-NULL;
 * ROW copies the whole b) into w_shard (local_out x local_in) and b_shard
 * (local_out); padding is zero. dtype: any; buffers borrowed. */
PLX_API int plx_tp_linear_shard(const struct plx_tp_linear *l, const void *W, const void *b, void *w_shard,
                                void *b_shard, int dtype);
/* The inverse: write the real part of a shard back into the full W (and b). */
PLX_API int plx_tp_linear_unshard(const struct plx_tp_linear *l, const void *w_shard, const void *b_shard, void *W,
                                  void *b, int dtype);

#ifdef __cplusplus
}
#endif
#endif
