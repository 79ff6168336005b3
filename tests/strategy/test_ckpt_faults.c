/* test_ckpt_faults - damaged checkpoints give their own clear errors and
 * leave the destination buffers untouched.
 *
 * Two sim ranks save the test tensors; then one process loads copies that
 * were damaged: a flipped data byte, a truncated shard, a deleted shard, a
 * missing index, and requests that do not match (unknown name, dtype,
 * shape). Each must fail with the expected code, a message naming the file
 * and the tensor, and buffers still holding their sentinel bytes. Last, a
 * collective load in which only rank 1 asks for something wrong: rank 0
 * read everything it needed, yet its buffers stay untouched too. And a
 * 3-block piece: unaligned ranges load, a corrupt block is found only by
 * the loads that read it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_data.h"
#include "plexus/checkpoint.h"
#include "ranks.h"

static int failures;
static char base[512];

#define NT (CK_UNITS + CK_REPL)

struct bufs {
    struct plx_ckpt_item items[NT];
    void *data[NT];
    void *copy[NT];
};

static const char *tname(int k)
{
    return k < CK_UNITS ? ck_unit_names[k] : ck_repl_names[k - CK_UNITS];
}

/* Every tensor whole (the DDP layout), sentinel-filled. */
static void bufs_init(struct bufs *b)
{
    for (int k = 0; k < NT; k++) {
        int dt = k < CK_UNITS ? ck_unit_dtypes[k] : ck_repl_dtypes[k - CK_UNITS];
        size_t n = k < CK_UNITS ? ck_unit_counts[k] : ck_repl_counts[k - CK_UNITS];
        struct plx_ckpt_item *it = &b->items[k];
        plx_ckpt_item_init(it);
        it->name = tname(k);
        it->dtype = dt;
        it->ndim = k < CK_UNITS ? ck_unit_ndims[k] : 1;
        if (k < CK_UNITS)
            memcpy(it->shape, ck_unit_shapes[k], (size_t)it->ndim * sizeof(int64_t));
        else
            it->shape[0] = (int64_t)n;
        it->count = n;
        b->data[k] = it->data = malloc(n * plx_dtype_size(dt));
        memset(it->data, 0xa5, n * plx_dtype_size(dt));
        b->copy[k] = malloc(n * plx_dtype_size(dt));
        memcpy(b->copy[k], it->data, n * plx_dtype_size(dt));
    }
}

static int bufs_untouched(const struct bufs *b)
{
    for (int k = 0; k < NT; k++)
        if (memcmp(b->data[k], b->copy[k], b->items[k].count * plx_dtype_size(b->items[k].dtype)))
            return 0;
    return 1;
}

static void bufs_free(struct bufs *b)
{
    for (int k = 0; k < NT; k++) {
        free(b->data[k]);
        free(b->copy[k]);
    }
}

static int save_rank(struct rank_ctx *ctx, int init_rc)
{
    if (init_rc)
        return 1;
    struct plx_ckpt_item items[NT];
    void *bufs[NT];
    for (int k = 0; k < NT; k++) {
        int dt = k < CK_UNITS ? ck_unit_dtypes[k] : ck_repl_dtypes[k - CK_UNITS];
        size_t n = k < CK_UNITS ? ck_unit_counts[k] : ck_repl_counts[k - CK_UNITS];
        bufs[k] = malloc(n * plx_dtype_size(dt));
        ck_fill(bufs[k], dt, k, 0, n);
    }
    int rc = plx_ckpt_replicated_items(ctx->comm, 1, CK_UNITS, ck_unit_names, bufs, ck_unit_counts, ck_unit_dtypes,
                                       ck_unit_ndims, ck_unit_shapes, items);
    if (!rc)
        rc = plx_ckpt_replicated_items(ctx->comm, 1, CK_REPL, ck_repl_names, bufs + CK_UNITS, ck_repl_counts,
                                       ck_repl_dtypes, NULL, NULL, items + CK_UNITS);
    if (!rc)
        rc = plx_ckpt_save(ctx->comm, base, items, NT, NULL);
    if (rc)
        fprintf(stderr, "save: %s\n", plx_last_error());
    for (int k = 0; k < NT; k++)
        free(bufs[k]);
    return rc != 0;
}

/* A fresh copy of the saved checkpoint. */
static void copy_ckpt(const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, base, to);
    if (system(cmd))
        fprintf(stderr, "copy failed: %s\n", cmd), failures++;
}

static long data_start(const char *file)
{
    FILE *f = fopen(file, "rb");
    unsigned char b[8] = {0};
    if (!f || fread(b, 1, 8, f) != 8)
        return -1;
    fclose(f);
    long h = 0;
    for (int i = 0; i < 8; i++)
        h |= (long)b[i] << (8 * i);
    return 8 + h;
}

/* Load dir; expect rc and every word of `must` in the message, buffers
 * untouched. */
static void expect_fail(const char *what, const char *dir, struct bufs *b, int want, const char *const *must)
{
    int rc = plx_ckpt_load(NULL, dir, b->items, NT, NULL);
    const char *msg = plx_last_error();
    printf("%-22s -> %s: %s\n", what, plx_err_name(rc), msg);
    if (rc != want) {
        fprintf(stderr, "%s: got %s, expected %s\n", what, plx_err_name(rc), plx_err_name(want));
        failures++;
    }
    for (int i = 0; must[i]; i++)
        if (!strstr(msg, must[i])) {
            fprintf(stderr, "%s: the message does not name '%s'\n", what, must[i]);
            failures++;
        }
    if (!bufs_untouched(b)) {
        fprintf(stderr, "%s: the destination buffers were written\n", what);
        failures++;
    }
}

static int collective_rank(struct rank_ctx *ctx, int init_rc)
{
    if (init_rc)
        return 1;
    struct bufs b;
    bufs_init(&b);
    if (ctx->rank == 1)
        b.items[1].name = "no.such.tensor";
    int rc = plx_ckpt_load(ctx->comm, base, b.items, NT, NULL);
    int bad = 0;
    int want = ctx->rank == 1 ? PLX_ERR_NOT_FOUND : PLX_ERR_REMOTE;
    printf("collective, rank %d     -> %s: %s\n", ctx->rank, plx_err_name(rc), plx_last_error());
    if (rc != want || !bufs_untouched(&b)) {
        fprintf(stderr, "collective load: rank %d: %s (expected %s), buffers %s\n", ctx->rank, plx_err_name(rc),
                plx_err_name(want), bufs_untouched(&b) ? "untouched" : "WRITTEN");
        bad = 1;
    }
    if (ctx->rank == 0 && !strstr(plx_last_error(), "rank 1"))
        bad = 1, fprintf(stderr, "collective load: rank 0's error does not name rank 1\n");
    bufs_free(&b);
    return bad;
}

/* Pieces over several checksum blocks (4 MiB): a load of an unaligned
 * range crossing blocks gets its values; after a byte of the last block is
 * corrupted, a range in the first block still loads (only the blocks read
 * are checked) and a range reaching the last block fails. */
static void blocks(const char *root)
{
    enum { NB = 10 << 18 }; /* f32 elements: 10 MiB, 3 blocks */
    char dir[600], file[700];
    snprintf(dir, sizeof dir, "%s/blocks", root);
    float *v = malloc(NB * sizeof *v);
    for (size_t i = 0; i < NB; i++)
        v[i] = (float)(i % 65521);
    struct plx_ckpt_item it;
    plx_ckpt_item_init(&it);
    it.name = "big";
    it.dtype = PLX_F32;
    it.ndim = 1;
    it.shape[0] = NB;
    it.data = v;
    it.count = NB;
    if (plx_ckpt_save(NULL, dir, &it, 1, NULL))
        failures++, fprintf(stderr, "blocks: save: %s\n", plx_last_error());
    float *got = calloc(NB, sizeof *got);
    it.data = got;
    it.offset = 1000001; /* block 0 into block 1, unaligned */
    it.count = 1500000;
    int rc = plx_ckpt_load(NULL, dir, &it, 1, NULL);
    if (rc || memcmp(got, v + it.offset, it.count * sizeof *v))
        failures++, fprintf(stderr, "blocks: an unaligned range across blocks: %s\n", plx_last_error());
    snprintf(file, sizeof file, "%s/rank-00000.safetensors", dir);
    long at = data_start(file) + (long)NB * 4 - 3; /* in block 2 */
    int fd = open(file, O_RDWR);
    unsigned char c = 0;
    if (at < 0 || fd < 0 || pread(fd, &c, 1, at) != 1 || (c ^= 1, pwrite(fd, &c, 1, at) != 1))
        failures++;
    if (fd >= 0)
        close(fd);
    it.offset = 10;
    it.count = 1000;
    rc = plx_ckpt_load(NULL, dir, &it, 1, NULL);
    printf("%-22s -> %s\n", "block 0 of a corrupt piece", rc ? plx_last_error() : "loaded");
    if (rc || memcmp(got, v + 10, 1000 * sizeof *v))
        failures++, fprintf(stderr, "blocks: a range in an intact block should load\n");
    it.offset = NB - 2000000;
    it.count = 2000000;
    memset(got, 0, NB * sizeof *got);
    rc = plx_ckpt_load(NULL, dir, &it, 1, NULL);
    printf("%-22s -> %s: %s\n", "its corrupt block", plx_err_name(rc), plx_last_error());
    if (rc != PLX_ERR_PROTOCOL || !strstr(plx_last_error(), "checksum mismatch") || got[0] != 0)
        failures++, fprintf(stderr, "blocks: the corrupt block was not reported, or the buffer was written\n");
    free(v);
    free(got);
}

int main(void)
{
    char root[] = "/tmp/plexus-ckpt-faults-XXXXXX", dir[600], file[700];
    if (!mkdtemp(root))
        return 1;
    snprintf(base, sizeof base, "%s/base", root);
    snprintf(dir, sizeof dir, "%s/damaged", root);
    if (run_ranks(2, "sim", NULL, 30000, save_rank, NULL))
        return 1;
    struct bufs b;
    bufs_init(&b);

    /* The intact checkpoint loads: the failures below are the damage's. */
    if (plx_ckpt_load(NULL, base, b.items, NT, NULL)) {
        fprintf(stderr, "intact load failed: %s\n", plx_last_error());
        failures++;
    }
    for (int k = 0; k < NT; k++)
        if (!ck_equal(b.data[k], b.items[k].dtype, k, 0, b.items[k].count))
            fprintf(stderr, "intact load: %s differs\n", tname(k)), failures++;
    bufs_free(&b);
    bufs_init(&b);

    /* One flipped byte: the first data byte of rank 1's shard (its slice of layer1.weight). */
    copy_ckpt(dir);
    snprintf(file, sizeof file, "%s/rank-00001.safetensors", dir);
    long at = data_start(file);
    int fd = open(file, O_RDWR);
    unsigned char c = 0;
    if (at < 0 || fd < 0 || pread(fd, &c, 1, at) != 1 || (c ^= 0x10, pwrite(fd, &c, 1, at) != 1))
        failures++, fprintf(stderr, "could not corrupt %s\n", file);
    if (fd >= 0)
        close(fd);
    expect_fail("one corrupt byte", dir, &b, PLX_ERR_PROTOCOL,
                (const char *[]){"checksum mismatch", "rank-00001.safetensors", "layer1.weight", NULL});

    /* Truncated: rank 0's shard cut 10 bytes into its data. */
    copy_ckpt(dir);
    snprintf(file, sizeof file, "%s/rank-00000.safetensors", dir);
    if ((at = data_start(file)) < 0 || truncate(file, at + 10))
        failures++;
    expect_fail("truncated shard", dir, &b, PLX_ERR_PROTOCOL,
                (const char *[]){"truncated", "rank-00000.safetensors", "layer1.weight", NULL});

    /* A shard deleted. */
    copy_ckpt(dir);
    snprintf(file, sizeof file, "%s/rank-00001.safetensors", dir);
    unlink(file);
    expect_fail("deleted shard", dir, &b, PLX_ERR_NOT_FOUND,
                (const char *[]){"rank-00001.safetensors", "layer1.weight", NULL});

    /* The index deleted. */
    copy_ckpt(dir);
    snprintf(file, sizeof file, "%s/index.json", dir);
    unlink(file);
    expect_fail("missing index", dir, &b, PLX_ERR_NOT_FOUND, (const char *[]){"index.json", NULL});

    /* Requests that do not match the checkpoint. */
    b.items[2].name = "no.such.tensor";
    expect_fail("unknown tensor", base, &b, PLX_ERR_NOT_FOUND, (const char *[]){"no.such.tensor", "index.json", NULL});
    b.items[2].name = ck_unit_names[2];
    b.items[1].dtype = PLX_I32; /* same element size as F32: only the dtype differs */
    expect_fail("dtype mismatch", base, &b, PLX_ERR_INVALID_ARG,
                (const char *[]){"layer1.bias", "F32", "I32", "index.json", NULL});
    b.items[1].dtype = PLX_F32;
    b.items[0].shape[0] = 7, b.items[0].shape[1] = 13;
    expect_fail("shape mismatch", base, &b, PLX_ERR_INVALID_ARG,
                (const char *[]){"layer1.weight", "[13,7]", "[7,13]", NULL});
    b.items[0].shape[0] = 13, b.items[0].shape[1] = 7;
    bufs_free(&b);

    if (run_ranks(2, "sim", NULL, 30000, collective_rank, NULL))
        failures++;
    blocks(root);

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd))
        fprintf(stderr, "could not remove %s\n", root);
    printf("%s\n", failures ? "FAIL" : "ok: every damage reported, buffers untouched");
    return failures ? 1 : 0;
}
