/* ckpt.h - what the checkpoint files share: the on-disk layout (safetensors
 * shards, the JSON index), file helpers and checksums. Stability: internal. */
#ifndef PLX_CORE_CKPT_H
#define PLX_CORE_CKPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "plexus/checkpoint.h"

/* Checksums cover blocks of this many bytes of a piece, so a load that
 * needs part of a piece reads (and verifies) only the blocks it touches. */
#define PLX__CKPT_BLOCK ((size_t)4 << 20)
#define PLX__CKPT_DIGEST 32 /* BLAKE2b-256 */
#define PLX__CKPT_INDEX "index.json"
/* safetensors readers refuse headers above 100 MB; so do we. */
#define PLX__CKPT_MAX_HEADER ((uint64_t)100 << 20)

/* "F32" and friends: the safetensors dtype names. -1 if unknown. */
const char *plx__ckpt_dtype_tag(int dtype);
int plx__ckpt_dtype_from_tag(const char *tag);
/* "rank-00003.safetensors" */
void plx__ckpt_shard_name(char *out, size_t cap, int rank);
/* Element count of a shape; 0 on overflow (reported by the caller). */
int plx__ckpt_nelem(int ndim, const int64_t *shape, size_t *out);
/* Check one item's fields; `what` names the operation in the message. */
int plx__ckpt_check_item(const char *what, const struct plx_ckpt_item *it);

/* Select the fastest BLAKE2b; call before plx__ckpt_digest_hex. */
int plx__ckpt_digest_init(void);
/* Digest of one block as 64 hex digits + NUL. */
void plx__ckpt_digest_hex(const void *data, size_t bytes, char out[2 * PLX__CKPT_DIGEST + 1]);

/* Write a whole file: the safetensors shard of these items, with
 * checksums in its metadata; fsync if asked. Message names the file. */
int plx__ckpt_write_shard(const char *file, const struct plx_ckpt_item *items, int n, int do_fsync);

/* An open shard file: its parsed header and where the data starts. */
struct plx__ckpt_file {
    char *path;
    int fd;
    uint64_t size, data_start;
    json_t *header;
};
/* Open and parse a shard file's header; errors name the file. */
int plx__ckpt_file_open(struct plx__ckpt_file *f, const char *path);
void plx__ckpt_file_close(struct plx__ckpt_file *f);
/* The "plexus" metadata of a shard (a JSON object per tensor: offset,
 * shape, dtype, blake2b), parsed; NULL if absent or malformed. New reference. */
json_t *plx__ckpt_file_pieces(const struct plx__ckpt_file *f);

/* Rank 0: read the headers of the P shard files in dir and write
 * dir/index.json. Errors name the file and tensor that disagree. */
int plx__ckpt_write_index(const char *dir, int P, int do_fsync);

/* Collective over c (NULL: returns rc): every rank learns whether all
 * succeeded; a rank that did but sees another's failure gets
 * PLX_ERR_REMOTE naming the first failed rank. */
int plx__ckpt_agree(struct plx_comm *c, const char *what, int rc);

/* Whole-buffer I/O with EINTR and short transfers handled. */
int plx__ckpt_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);
int plx__ckpt_pread_all(int fd, void *buf, size_t n, uint64_t off);
int plx__ckpt_fsync_path(const char *path);
/* Remove a folder holding only checkpoint files (shards, index); anything
 * else in it makes this fail rather than delete what is not ours. */
int plx__ckpt_remove_dir(const char *dir);

#endif
