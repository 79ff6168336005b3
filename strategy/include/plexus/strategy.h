/* strategy.h - data-parallel strategies over flat buffers: a device mesh,
 * DDP (gradient bucketing: synchronous, overlapped, no-sync) and FSDP
 * (FULL_SHARD / ZeRO-3, SHARD_GRAD_OP / ZeRO-2, NO_SHARD, HYBRID_SHARD).
 *
 * Stability: stable API; option structs start with struct_size and are
 * append-only. Buffers are (pointer, count, dtype) in host memory; the
 * strategies never allocate on the caller's behalf except where a function
 * says so. Every function returns 0 or a negative PLX_ERR_* code with the
 * detail in plx_last_error().
 */
#ifndef PLEXUS_STRATEGY_H
#define PLEXUS_STRATEGY_H

#include "plexus/plexus.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device mesh ------------------------------------------------------- *
 * A world of nodes x local ranks (rank = node * local + local_rank). The
 * intra-node communicator joins the ranks of one node, the inter-node one
 * the ranks with the same local rank on every node. */
struct plx_mesh;

/* Collective over world. local_size 0: plx_comm_local_size(world) (from
 * LOCAL_WORLD_SIZE). A world size that is not a multiple of local_size is
 * PLX_ERR_INVALID_ARG. Free with plx_mesh_destroy(). */
PLX_API int plx_mesh_create(struct plx_comm *world, int local_size, struct plx_mesh **out);
PLX_API void plx_mesh_destroy(struct plx_mesh *mesh);
/* Borrowed: valid until plx_mesh_destroy(). */
PLX_API struct plx_comm *plx_mesh_intra(const struct plx_mesh *mesh);
PLX_API struct plx_comm *plx_mesh_inter(const struct plx_mesh *mesh);
PLX_API int plx_mesh_nodes(const struct plx_mesh *mesh);

/* ---- DDP ---------------------------------------------------------------- */
enum plx_ddp_mode {
    PLX_DDP_SYNC = 0,    /* every bucket's allreduce at plx_ddp_finish() */
    PLX_DDP_OVERLAP = 1, /* a bucket's allreduce starts when its last gradient is ready */
    PLX_DDP_NO_SYNC = 2, /* accumulate locally; the next synchronised step includes it */
};

struct plx_ddp_options {
    uint32_t struct_size;
    size_t bucket_cap_bytes; /* 0: 25 MiB */
    int average;             /* 1 (default): divide by the world size */
    /* Later fields (a caller built before them gets their defaults). */
    size_t first_bucket_bytes;   /* cap of each dtype's first bucket (the first to
                                    launch); 0: 1 MiB; never above bucket_cap_bytes */
    int gradient_as_bucket_view; /* 1: every gradient lives inside its bucket's
                                    flat storage (no copies); see plx_ddp_grad_buffer() */
};
PLX_API void plx_ddp_options_init(struct plx_ddp_options *o);

struct plx_ddp;
/* comm is borrowed until plx_ddp_destroy(). */
PLX_API int plx_ddp_create(struct plx_comm *comm, const struct plx_ddp_options *o, struct plx_ddp **out);
PLX_API void plx_ddp_destroy(struct plx_ddp *ddp);
/* Register a gradient buffer (borrowed until destroy), in the order the
 * model defines its parameters; buckets fill in reverse order, as gradients
 * become ready in backward. *index identifies it. Only before the bucket
 * layout is fixed (the first plx_ddp_begin() or plx_ddp_grad_buffer()).
 *
 * Buckets, as PyTorch's reducer builds them: each dtype fills its own open
 * bucket (interleaved dtypes do not split buckets); a bucket closes once it
 * holds at least its cap in bytes (the gradient that crosses the cap stays
 * in); a dtype's first bucket is capped by first_bucket_bytes, the later
 * ones by bucket_cap_bytes. Buckets are numbered (and launched) in the order
 * they were opened. gradient_as_bucket_view: grad may be NULL; if not, its
 * contents when the layout is fixed are copied into the bucket and the
 * gradient lives there from then on (grad is no longer read or written). */
PLX_API int plx_ddp_register(struct plx_ddp *ddp, void *grad, size_t count, int dtype, int *index);
/* Start a step in a mode; gradients are then marked ready one by one. */
PLX_API int plx_ddp_begin(struct plx_ddp *ddp, int mode);
/* The gradient is final for this step (marking twice is an error naming it). */
PLX_API int plx_ddp_ready(struct plx_ddp *ddp, int index);
/* Finish the step: every gradient must be ready; averaged results are in
 * the gradient buffers when this returns (NO_SYNC: untouched). */
PLX_API int plx_ddp_finish(struct plx_ddp *ddp);
/* Number of buckets and the gradients of bucket b (for inspection). */
PLX_API int plx_ddp_bucket_count(const struct plx_ddp *ddp);
/* The gradients of bucket b in bucket order: returns how many there are
 * (0 before the layout is fixed) and writes the first max of them to
 * indices (may be NULL). PLX_ERR_INVALID_ARG for a bad bucket. */
PLX_API int plx_ddp_bucket_grads(const struct plx_ddp *ddp, int bucket, int *indices, int max);
/* Where gradient index lives now: with gradient_as_bucket_view, inside its
 * bucket's flat storage (valid until destroy; write the gradient there),
 * else the buffer registered or last set. Fixes the bucket layout (no more
 * registration). NULL (detail in plx_last_error()) for a bad index. */
PLX_API void *plx_ddp_grad_buffer(struct plx_ddp *ddp, int index);
/* Re-point gradient index to another buffer of the same count and dtype
 * (borrowed until destroy or the next re-pointing), between steps only.
 * It is copied into its bucket at launch and the result copied back.
 * gradient_as_bucket_view: grad NULL points it back into the bucket.
 * PLX_ERR_INVALID_USAGE inside a step or for NULL without a bucket view. */
PLX_API int plx_ddp_set_grad(struct plx_ddp *ddp, int index, void *grad);
/* Mark gradient index unused by this rank in this step (PyTorch's
 * find_unused_parameters): it is ready, and it contributes zero, or what it
 * accumulated over the NO_SYNC steps since the last synchronised one. Its
 * buffer (zeroed if it held nothing accumulated) receives the reduced
 * result like any other. Marking a gradient both ready and unused is an
 * error, as marking it twice. */
PLX_API int plx_ddp_mark_unused(struct plx_ddp *ddp, int index);

/* Communication hooks (PyTorch's register_comm_hook): one call per bucket
 * replaces the bucket's allreduce. The hook reduces data in place: start
 * launches the work (*work a nonblocking work, or NULL when it finished
 * synchronously); finish, if not NULL, runs after that work completed
 * (e.g. to decompress). The result must be the mean over the world when
 * average is 1, else the sum. */
struct plx_ddp_bucket {
    uint32_t struct_size;
    int index;             /* bucket number = launch order, same on every rank */
    void *data;            /* the bucket's flat gradients */
    size_t count;          /* elements */
    int dtype;
    int average;           /* the options' average */
    struct plx_comm *comm; /* the DDP communicator */
};
struct plx_ddp_comm_hook {
    uint32_t struct_size;
    void *state; /* passed back to the callbacks; borrowed until destroy */
    int (*start)(void *state, const struct plx_ddp_bucket *bucket, struct plx_work **work);
    int (*finish)(void *state, const struct plx_ddp_bucket *bucket); /* may be NULL */
};
/* Built-in hooks. The compress hooks cast f32/f64 buckets to 16 bits after
 * dividing by the world size (when averaging), allreduce them with SUM and
 * cast the result back, as PyTorch's fp16_compress_hook / bf16_compress_hook;
 * buckets of other dtypes are allreduced as usual. */
enum plx_ddp_builtin_hook {
    PLX_DDP_HOOK_ALLREDUCE = 0,     /* the default */
    PLX_DDP_HOOK_FP16_COMPRESS = 1,
    PLX_DDP_HOOK_BF16_COMPRESS = 2,
};
/* Install a hook (copied; state borrowed until destroy) or a built-in one,
 * before the first step. PLX_ERR_INVALID_USAGE after it. */
PLX_API int plx_ddp_register_comm_hook(struct plx_ddp *ddp, const struct plx_ddp_comm_hook *hook);
PLX_API int plx_ddp_register_builtin_hook(struct plx_ddp *ddp, int builtin);

/* Threads: plx_ddp_ready() and plx_ddp_mark_unused() may be called from
 * several threads at once during a step (a lock orders them; the hook's
 * start runs under it, on the thread whose call completed the bucket, so
 * a hook must not call back into this DDP). Every other plx_ddp_* call
 * must come from one thread at a time and not overlap a step's marking. */

/* Broadcast n parameter buffers from root (model initialisation). */
PLX_API int plx_broadcast_params(struct plx_comm *comm, void *const *bufs, const size_t *counts, const int *dtypes,
                                 int n, int root);

/* ---- FSDP --------------------------------------------------------------- *
 * Units are flat parameters. Each rank keeps the master shard of every unit
 * (the unit's dtype, f32 typically) and a gradient shard of the same dtype.
 * Mixed precision follows PyTorch's MixedPrecision: gathered parameters
 * have param_dtype, gradients are communicated in reduce_dtype and
 * accumulated into the gradient shard in the master dtype. Gradient shards
 * start zeroed and accumulate across reduce_grad calls (micro-batches) until
 * plx_fsdp_zero_grad(). */
enum plx_fsdp_strategy {
    PLX_FSDP_FULL_SHARD = 0,    /* ZeRO-3: parameters, gradients sharded; gather before use */
    PLX_FSDP_SHARD_GRAD_OP = 1, /* ZeRO-2: full parameters kept, gradients sharded, re-gather after step */
    PLX_FSDP_NO_SHARD = 2,      /* DDP: everything replicated */
    PLX_FSDP_HYBRID_SHARD = 3,  /* shard inside a node, replicate across nodes (needs a mesh) */
};

/* Where sharded state lives while gathered parameters are in device memory
 * (PyTorch's CPUOffload, DeepSpeed's offload_param / offload_optimizer). */
enum plx_fsdp_offload {
    PLX_FSDP_OFFLOAD_NONE = 0,   /* shards, gradient shards, optimizer state: device */
    PLX_FSDP_OFFLOAD_PARAMS = 1, /* parameter shards on the host; gradients, optimizer state: device */
    PLX_FSDP_OFFLOAD_FULL = 2,   /* parameter and gradient shards and optimizer state on the host
                                    (the optimizer steps on the host) */
};

struct plx_fsdp_options {
    uint32_t struct_size;
    int strategy;                 /* enum plx_fsdp_strategy */
    struct plx_mesh *mesh;        /* HYBRID_SHARD: borrowed until destroy */
    double optim_bytes_per_param; /* for the optimizer-state estimate; default 8 (Adam, f32) */
    /* Appended in 0.2 (mixed precision, offload). */
    int param_dtype;  /* dtype of gathered parameters (and of the gradients passed to
                         reduce_grad); -1 (default): each unit's own dtype */
    int reduce_dtype; /* dtype gradients are reduced in; -1 (default): param_dtype */
    int offload;      /* enum plx_fsdp_offload; default NONE */
};
PLX_API void plx_fsdp_options_init(struct plx_fsdp_options *o);

struct plx_fsdp;
PLX_API int plx_fsdp_create(struct plx_comm *comm, const struct plx_fsdp_options *o, struct plx_fsdp **out);
/* Waits for reductions in flight, then frees everything. destroy(NULL) is a no-op. */
PLX_API void plx_fsdp_destroy(struct plx_fsdp *fsdp);
/* Add a unit (a flat parameter) from its full initial values (identical on
 * every rank; borrowed during the call). The shard is padded so any count
 * works. dtypes: f32, f64, f16, bf16 (the master dtype). */
PLX_API int plx_fsdp_add_unit(struct plx_fsdp *f, const void *full, size_t count, int dtype, int *unit);
/* The local master shard of parameters and of gradients (owned by f, valid
 * until destroy), in the unit's dtype; *count = elements of the shard that
 * are real (padding excluded). NO_SHARD: the whole unit. The gradient shard
 * is final once every reduction of the unit has completed
 * (plx_fsdp_wait_grad). */
PLX_API void *plx_fsdp_shard(struct plx_fsdp *f, int unit, size_t *count);
PLX_API void *plx_fsdp_grad_shard(struct plx_fsdp *f, int unit, size_t *count);
/* Offset of the shard's first element in the full unit. */
PLX_API size_t plx_fsdp_shard_offset(const struct plx_fsdp *f, int unit);
/* Write the full parameters of unit (count elements of param_dtype) into
 * full. Waits for a prefetch of that unit if one is in flight. */
PLX_API int plx_fsdp_gather(struct plx_fsdp *f, int unit, void *full);
/* Start gathering unit into full without waiting (one prefetch at a time;
 * full is borrowed until the gather of that unit returns). */
PLX_API int plx_fsdp_prefetch(struct plx_fsdp *f, int unit, void *full);
/* Reduce the full gradient (count elements of param_dtype; mean over the
 * world) and add it to the gradient shard: a reduce-scatter in reduce_dtype,
 * HYBRID_SHARD adds the inter-node allreduce, NO_SHARD allreduces. May run
 * while a prefetch is in flight. Waits for an ireduce_grad of the unit in
 * flight first. */
PLX_API int plx_fsdp_reduce_grad(struct plx_fsdp *f, int unit, const void *full_grad);
/* The same without waiting: starts the reduction and returns; full_grad is
 * borrowed until it completes. plx_fsdp_wait_grad() completes it and adds
 * the result to the gradient shard. One reduction per unit in flight (a
 * second call for the unit completes the first); any number of units, and
 * a prefetch, may be in flight together. Every rank must issue reductions
 * and prefetches in the same order. HYBRID_SHARD: the inter-node allreduce
 * starts once the reduce-scatter has completed (seen by a later FSDP call or
 * the wait), in the order the reductions were issued. */
PLX_API int plx_fsdp_ireduce_grad(struct plx_fsdp *f, int unit, const void *full_grad);
/* Complete the reduction in flight for unit (-1: every unit, in unit order);
 * 0 when none is in flight. */
PLX_API int plx_fsdp_wait_grad(struct plx_fsdp *f, int unit);
/* Zero the gradient shard of unit (-1: every unit), completing a reduction
 * in flight first. Gradients accumulate until this is called. */
PLX_API int plx_fsdp_zero_grad(struct plx_fsdp *f, int unit);
/* After the optimizer updated the master shards, refresh the kept full
 * parameters (SHARD_GRAD_OP: from every rank's shard; NO_SHARD with a
 * param_dtype other than the unit's: the converted copy). Otherwise a no-op. */
PLX_API int plx_fsdp_regather(struct plx_fsdp *f, int unit);
/* The full parameters SHARD_GRAD_OP and NO_SHARD keep, in param_dtype (NULL otherwise). */
PLX_API void *plx_fsdp_full_params(struct plx_fsdp *f, int unit);
/* Global gradient-norm clipping over every unit's gradient shard (padding
 * excluded), as torch.nn.utils.clip_grad_norm_: the total norm of type
 * norm_type (a positive p, or INFINITY for the largest magnitude) over the
 * whole model; if max_norm / (total + 1e-6) < 1 every gradient is scaled by
 * that coefficient. max_norm < 0: only measure. *total_norm (may be NULL) is
 * the norm before clipping. Completes every reduction in flight first.
 * Collective over the shard group. */
PLX_API int plx_fsdp_clip_grad_norm_p(struct plx_fsdp *f, double max_norm, double norm_type, double *total_norm);
/* The same with norm type 2; max_norm <= 0: only measure. */
PLX_API int plx_fsdp_clip_grad_norm(struct plx_fsdp *f, double max_norm, double *norm);

/* Memory this rank holds for the strategy, measured from its allocations.
 * Output struct sized by the caller: any struct_size from the first
 * version's (through optim_estimate_bytes) up is accepted, and only fields
 * that fit are written. */
struct plx_fsdp_memstats {
    uint32_t struct_size;
    size_t param_bytes;       /* shards (+ kept full copies) */
    size_t grad_bytes;        /* gradient shards */
    size_t gather_bytes;      /* gather scratch held now */
    size_t peak_bytes;        /* peak of everything held (all byte counts here) */
    size_t padding_bytes;     /* of param_bytes, padding */
    double optim_estimate_bytes; /* shard elements x optim_bytes_per_param */
    /* Appended in 0.2: categories and placement. Every byte counted above
     * (and reduce_bytes) is in exactly one category; each category is on the
     * host or on the device as the offload policy places it. */
    size_t reduce_bytes;      /* reduction buffers held now (ireduce_grad in flight) */
    int offload;              /* the policy in force */
    int device_alloc;         /* 1 if device-placed buffers are device memory; 0: this
                                 build has no device allocator, they are host memory
                                 and the device figures are the policy's placement */
    size_t shard_host_bytes, shard_device_bytes; /* master parameter shards */
    size_t full_host_bytes, full_device_bytes;   /* kept full copies (param_dtype) */
    size_t grad_host_bytes, grad_device_bytes;   /* gradient shards */
    size_t comm_host_bytes, comm_device_bytes;   /* gather + reduce buffers held now */
    size_t host_bytes, device_bytes;             /* the sums of the four categories */
    double optim_host_bytes, optim_device_bytes; /* the optimizer-state estimate */
};
PLX_API int plx_fsdp_memory(const struct plx_fsdp *f, struct plx_fsdp_memstats *out);

/* ---- SyncBatchNorm ------------------------------------------------------ *
 * Batch normalisation over every rank's batch (PyTorch's SyncBatchNorm) on
 * flat f32 buffers laid out n x channels x spatial (NC: spatial 1; NCHW:
 * spatial H*W). Ranks may hold different batch sizes, 0 included. Training:
 * each rank's per-channel count, mean and M2 (sum of squared deviations)
 * are gathered in one collective and merged with Chan's parallel formula
 * (no sum-of-squares cancellation); x is normalised by the global mean and
 * biased variance; the running statistics move by momentum toward the mean
 * and the unbiased variance. Backward allreduces the two per-channel sums
 * (dy and dy * xhat) in one call. Eval uses the running statistics and does
 * not communicate. Every rank must call forward/backward in the same order. */
struct plx_syncbn_options {
    uint32_t struct_size;
    double eps;      /* default 1e-5 */
    double momentum; /* default 0.1: running = (1 - momentum) running + momentum batch */
};
PLX_API void plx_syncbn_options_init(struct plx_syncbn_options *o);

struct plx_syncbn;
/* comm is borrowed until plx_syncbn_destroy(). Running mean starts at 0,
 * running variance at 1. Free with plx_syncbn_destroy(). */
PLX_API int plx_syncbn_create(struct plx_comm *comm, size_t channels, const struct plx_syncbn_options *o,
                              struct plx_syncbn **out);
PLX_API void plx_syncbn_destroy(struct plx_syncbn *bn);
/* The running statistics (channels floats each, owned by bn, valid until
 * destroy; the caller may write them, e.g. to load a checkpoint). */
PLX_API float *plx_syncbn_running_mean(struct plx_syncbn *bn);
PLX_API float *plx_syncbn_running_var(struct plx_syncbn *bn);
/* y = (x - mean) / sqrt(var + eps) * weight + bias over n samples of this
 * rank (x, y borrowed during the call; y may equal x). weight and bias
 * (channels floats) may be NULL: 1 and 0. training 1: global batch
 * statistics (collective; PLX_ERR_INVALID_ARG on every rank if the world
 * holds at most one value per channel), kept for plx_syncbn_backward();
 * training 0: running statistics, local. */
PLX_API int plx_syncbn_forward(struct plx_syncbn *bn, const float *x, float *y, size_t n, size_t spatial,
                               const float *weight, const float *bias, int training);
/* Backward of the last training forward (collective): x and n, spatial as
 * given to it, dy the gradient of y. Writes dx (may equal dy) and, where
 * not NULL, this rank's dweight and dbias (written, not accumulated; as
 * PyTorch, they are local sums that DDP then reduces like any gradient). */
PLX_API int plx_syncbn_backward(struct plx_syncbn *bn, const float *x, const float *dy, float *dx, size_t n,
                                size_t spatial, const float *weight, float *dweight, float *dbias);

#ifdef __cplusplus
}
#endif
#endif
