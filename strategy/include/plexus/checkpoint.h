/* checkpoint.h - distributed checkpoints that load into any world size and
 * any sharding.
 *
 * Stability: stable API; structs start with struct_size and are append-only.
 *
 * A checkpoint is a folder. Each saving rank writes rank-NNNNN.safetensors
 * (the safetensors layout: an 8-byte little-endian header length, a JSON
 * header naming each tensor's dtype, shape and byte range, then raw
 * little-endian data); its tensors are the flat element ranges that rank
 * held. Rank 0 writes index.json, which maps every logical tensor (name,
 * global shape, dtype) to the shard files holding which element ranges,
 * with a BLAKE2b-256 checksum per block of each range. The folder is
 * written under a temporary name and published by one atomic rename once
 * every rank has finished, so a crash mid-save leaves the previous
 * checkpoint at the same path intact.
 *
 * A tensor is addressed as a flat (row-major) array of its global shape; a
 * rank's piece is the element range [offset, offset + count). That is what
 * FSDP shards, DDP replicas and optimizer state are.
 */
#ifndef PLEXUS_CHECKPOINT_H
#define PLEXUS_CHECKPOINT_H

#include "plexus/plexus.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLX_CKPT_MAX_DIMS 8

/* One named tensor piece. Strings and pointers are borrowed: valid during
 * the call (for an asynchronous save, until plx_ckpt_save_async returns:
 * the data is copied first). */
struct plx_ckpt_item {
    uint32_t struct_size;
    const char *name;       /* unique, at most 255 bytes, no '"' or control characters */
    int dtype;              /* enum plx_dtype */
    int ndim;               /* 0 .. PLX_CKPT_MAX_DIMS; 0 is a scalar */
    int64_t shape[PLX_CKPT_MAX_DIMS]; /* global shape */
    void *data;             /* save: read; load: written only if the whole load succeeds */
    size_t offset;          /* first element of this piece in the flat tensor */
    size_t count;           /* elements of this piece (0: this rank holds none) */
};
/* Fill struct_size and zero the rest. */
PLX_API void plx_ckpt_item_init(struct plx_ckpt_item *it);

struct plx_ckpt_options {
    uint32_t struct_size;
    int verify;             /* load: check BLAKE2b checksums (default 1) */
    int fsync;              /* save: fsync files and folders before publishing (default 1) */
};
PLX_API void plx_ckpt_options_init(struct plx_ckpt_options *o);

/* Collective over comm: every rank writes its items and rank 0 publishes
 * `path` (replacing a previous checkpoint there atomically). comm NULL: a
 * one-process save. Errors: PLX_ERR_INVALID_ARG (bad item, ranks that
 * disagree on a tensor's dtype or shape), PLX_ERR_SYSTEM (a file operation,
 * named), or the collective's error (a lost rank): nothing is published then. */
PLX_API int plx_ckpt_save(struct plx_comm *comm, const char *path, const struct plx_ckpt_item *items, int n,
                          const struct plx_ckpt_options *o);

/* Asynchronous save: copies every item to host memory, then writes and
 * publishes from a background thread over a private communicator split from
 * comm (so comm stays free for training). Collective over comm for the
 * split. *job is freed by plx_ckpt_wait(). */
struct plx_ckpt_job;
PLX_API int plx_ckpt_save_async(struct plx_comm *comm, const char *path, const struct plx_ckpt_item *items, int n,
                                const struct plx_ckpt_options *o, struct plx_ckpt_job **job);
/* Wait for an asynchronous save (timeout_ms: milliseconds, or
 * PLX_TIMEOUT_INFINITE or PLX_TIMEOUT_DEFAULT: until it ends; any other
 * negative value: only look) and free the job; returns the save's status. On
 * PLX_ERR_TIMEOUT the job is still running and not freed. Its error detail
 * is the calling thread's plx_last_error(). */
PLX_API int plx_ckpt_wait(struct plx_ckpt_job *job, int64_t timeout_ms);

/* Load the pieces this rank needs, from whichever shard files hold them.
 * Collective over comm when comm is not NULL: the data is copied into any
 * rank's buffers only if every rank read and verified all of its items.
 * Errors name the file and the tensor: PLX_ERR_NOT_FOUND (no index, a
 * missing shard file, an unknown tensor), PLX_ERR_INVALID_ARG (dtype or
 * shape mismatch, a range outside the tensor), PLX_ERR_PROTOCOL (a
 * truncated or malformed file, a checksum mismatch), PLX_ERR_REMOTE
 * (another rank failed; its message is not repeated). */
PLX_API int plx_ckpt_load(struct plx_comm *comm, const char *path, const struct plx_ckpt_item *items, int n,
                          const struct plx_ckpt_options *o);

/* ---- describing strategies' state ---------------------------------------- */

/* Items for the parameter shards of n FSDP units (unit i is unit index i
 * of f, as plx_fsdp_add_unit numbered them): names[i], its global element
 * count counts[i] and dtype dtypes[i] (the FSDP API does not report them).
 * The tensor is 1-D of counts[i] elements unless shapes is not NULL
 * (shapes[i] points at ndims[i] extents). items must have room for n.
 * Data pointers are the live shards: saving reads them, loading writes
 * them (SHARD_GRAD_OP keeps full copies too: call plx_fsdp_regather on
 * each unit after a load). Ranks holding the same shard (NO_SHARD,
 * HYBRID_SHARD replicas) all write it; the index lists every copy and a
 * load reads one. */
struct plx_fsdp;
PLX_API int plx_ckpt_fsdp_items(struct plx_fsdp *f, int n, const char *const *names, const size_t *counts,
                                const int *dtypes, const int *ndims, const int64_t *const *shapes,
                                struct plx_ckpt_item *items);

/* Items for n replicated buffers (DDP parameters, or any state every rank
 * holds whole). save = 1: rank r of comm describes only slice r of each
 * buffer, so the ranks write disjoint pieces in parallel; save = 0: every
 * rank describes the whole buffer (a load fills each replica). */
PLX_API int plx_ckpt_replicated_items(struct plx_comm *comm, int save, int n, const char *const *names,
                                      void *const *bufs, const size_t *counts, const int *dtypes, const int *ndims,
                                      const int64_t *const *shapes, struct plx_ckpt_item *items);

#ifdef __cplusplus
}
#endif
#endif
