/* format.c - the safetensors shard layout: dtype names, the header with our
 * metadata, writing a shard with its block checksums, and opening one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are little-endian; a big-endian host would have to swap"
#endif

static const char *const tags[PLX_DTYPE_COUNT] = {
    [PLX_I8] = "I8",   [PLX_U8] = "U8",   [PLX_I32] = "I32", [PLX_U32] = "U32", [PLX_I64] = "I64",
    [PLX_U64] = "U64", [PLX_F16] = "F16", [PLX_BF16] = "BF16", [PLX_F32] = "F32", [PLX_F64] = "F64",
};

const char *plx__ckpt_dtype_tag(int dtype)
{
    return dtype >= 0 && dtype < PLX_DTYPE_COUNT ? tags[dtype] : NULL;
}

int plx__ckpt_dtype_from_tag(const char *tag)
{
    for (int d = 0; tag && d < PLX_DTYPE_COUNT; d++)
        if (!strcmp(tags[d], tag))
            return d;
    return -1;
}

void plx__ckpt_shard_name(char *out, size_t cap, int rank)
{
    snprintf(out, cap, "rank-%05d.safetensors", rank);
}

int plx__ckpt_nelem(int ndim, const int64_t *shape, size_t *out)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] && n > SIZE_MAX / (size_t)shape[d]))
            return -1;
        n *= (size_t)shape[d];
    }
    *out = n;
    return 0;
}

int plx__ckpt_check_item(const char *what, const struct plx_ckpt_item *it)
{
    size_t nelem;
    if (!it->name || !*it->name || strlen(it->name) > 255 || !strcmp(it->name, "__metadata__"))
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: a tensor name is empty, longer than 255 bytes or reserved", what);
    for (const char *p = it->name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\')
            return plx_set_error(PLX_ERR_INVALID_ARG, "%s: tensor '%s': names may not hold quotes, backslashes or control characters",
                            what, it->name);
    if (!plx__ckpt_dtype_tag(it->dtype))
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: tensor '%s': unknown dtype %d", what, it->name, it->dtype);
    if (it->ndim < 0 || it->ndim > PLX_CKPT_MAX_DIMS || plx__ckpt_nelem(it->ndim, it->shape, &nelem))
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: tensor '%s': bad shape (%d dimensions)", what, it->name, it->ndim);
    if (it->offset > nelem || it->count > nelem - it->offset)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: tensor '%s': piece [%zu, +%zu) is outside its %zu elements", what,
                        it->name, it->offset, it->count, nelem);
    if (it->count && !it->data)
        return plx_set_error(PLX_ERR_INVALID_ARG, "%s: tensor '%s': NULL data for %zu elements", what, it->name, it->count);
    return 0;
}

int plx__ckpt_digest_init(void)
{
    /* Picks libsodium's fastest BLAKE2b (AVX2/SSE4.1) for this CPU;
     * without it the portable code runs. Idempotent and thread-safe. */
    return sodium_init() < 0 ? plx_set_error(PLX_ERR_INTERNAL, "checkpoint: libsodium failed to initialise") : 0;
}

void plx__ckpt_digest_hex(const void *data, size_t bytes, char out[2 * PLX__CKPT_DIGEST + 1])
{
    unsigned char d[PLX__CKPT_DIGEST];
    crypto_generichash(d, sizeof d, data, bytes, NULL, 0);
    sodium_bin2hex(out, 2 * PLX__CKPT_DIGEST + 1, d, sizeof d);
}

int plx__ckpt_pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n) {
        ssize_t k = pwrite(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int plx__ckpt_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    while (n) {
        ssize_t k = pread(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = ENODATA;
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int plx__ckpt_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int plx__ckpt_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        int ours = !strcmp(n, PLX__CKPT_INDEX) ||
                   (!strncmp(n, "rank-", 5) && len > 12 && !strcmp(n + len - 12, ".safetensors"));
        if (!ours)
            continue; /* rmdir below then fails: the folder holds something else */
        snprintf(p, sizeof p, "%s/%s", dir, n);
        unlink(p);
    }
    closedir(d);
    return rmdir(dir);
}

/* The shard header: one entry per item (1-D, its piece), in item order, and
 * metadata "plexus" = a JSON text mapping each name to its place in the
 * logical tensor and its block checksums (safetensors metadata values are
 * strings, so the object travels serialised). */
static char *build_header(const struct plx_ckpt_item *items, int n, char **digests, size_t *len)
{
    json_t *h = json_object(), *meta = json_object(), *pieces = json_object();
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const struct plx_ckpt_item *it = &items[i];
        uint64_t bytes = (uint64_t)it->count * plx_dtype_size(it->dtype);
        json_t *e = json_object(), *shape = json_array(), *sums = json_array();
        json_object_set_new(e, "dtype", json_string(plx__ckpt_dtype_tag(it->dtype)));
        json_object_set_new(e, "shape", json_pack("[I]", (json_int_t)it->count));
        json_object_set_new(e, "data_offsets", json_pack("[I,I]", (json_int_t)at, (json_int_t)(at + bytes)));
        json_object_set_new(h, it->name, e);
        for (int d = 0; d < it->ndim; d++)
            json_array_append_new(shape, json_integer(it->shape[d]));
        size_t nblk = (bytes + PLX__CKPT_BLOCK - 1) / PLX__CKPT_BLOCK;
        for (size_t b = 0; b < nblk; b++)
            json_array_append_new(sums, json_stringn(digests[i] + b * 2 * PLX__CKPT_DIGEST, 2 * PLX__CKPT_DIGEST));
        json_object_set_new(pieces, it->name,
                            json_pack("{s:s, s:o, s:I, s:I, s:o}", "dtype", plx__ckpt_dtype_tag(it->dtype), "shape",
                                      shape, "offset", (json_int_t)it->offset, "count", (json_int_t)it->count,
                                      "blake2b", sums));
        at += bytes;
    }
    char *pt = json_dumps(pieces, JSON_COMPACT);
    json_decref(pieces);
    json_object_set_new(meta, "format", json_string("plexus.checkpoint.shard/1"));
    json_object_set_new(meta, "plexus", json_string(pt ? pt : ""));
    free(pt);
    json_object_set_new(h, "__metadata__", meta);
    char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!s)
        return NULL;
    /* Pad with spaces so the data starts 8-byte aligned (as safetensors does). */
    size_t l = strlen(s), padded = (l + 7) & ~(size_t)7;
    char *p = realloc(s, padded + 1);
    if (!p) {
        free(s);
        return NULL;
    }
    memset(p + l, ' ', padded - l);
    p[padded] = 0;
    *len = padded;
    return p;
}

/* One pass over the data: each block is hashed just before it is written,
 * while it is in cache. The header precedes the data but carries the
 * digests, so its length is fixed first with placeholder digests (hex
 * digests have one length, and nothing in them needs JSON escaping), the
 * data goes after it, and the real header is written last. */
int plx__ckpt_write_shard(const char *file, const struct plx_ckpt_item *items, int n, int do_fsync)
{
    int rc = plx__ckpt_digest_init();
    if (rc)
        return rc;
    char **digests = calloc((size_t)(n ? n : 1), sizeof *digests);
    if (!digests)
        return plx_set_error(PLX_ERR_NOMEM, "checkpoint save: %s: out of memory", file);
    for (int i = 0; i < n && !rc; i++) {
        size_t bytes = items[i].count * plx_dtype_size(items[i].dtype);
        size_t nblk = (bytes + PLX__CKPT_BLOCK - 1) / PLX__CKPT_BLOCK;
        if (!(digests[i] = malloc(nblk * 2 * PLX__CKPT_DIGEST + 1)))
            rc = plx_set_error(PLX_ERR_NOMEM, "checkpoint save: %s: out of memory", file);
        else
            memset(digests[i], '0', nblk * 2 * PLX__CKPT_DIGEST);
    }
    size_t hlen = 0, hlen2 = 0;
    char *header = rc ? NULL : build_header(items, n, digests, &hlen);
    if (!rc && !header)
        rc = plx_set_error(PLX_ERR_NOMEM, "checkpoint save: %s: could not build the header", file);
    int fd = -1;
    if (!rc && (fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        rc = plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: open %s: %s", file, strerror(errno));
    if (!rc) {
        uint64_t at = 8 + hlen;
        for (int i = 0; i < n && !rc; i++) {
            size_t bytes = items[i].count * plx_dtype_size(items[i].dtype);
            for (size_t lo = 0; lo < bytes && !rc; lo += PLX__CKPT_BLOCK) {
                size_t k = bytes - lo < PLX__CKPT_BLOCK ? bytes - lo : PLX__CKPT_BLOCK;
                const char *src = (const char *)items[i].data + lo;
                char hex[2 * PLX__CKPT_DIGEST + 1];
                plx__ckpt_digest_hex(src, k, hex);
                memcpy(digests[i] + lo / PLX__CKPT_BLOCK * 2 * PLX__CKPT_DIGEST, hex, 2 * PLX__CKPT_DIGEST);
                if (plx__ckpt_pwrite_all(fd, src, k, at + lo))
                    rc = -1;
            }
            at += bytes;
        }
        free(header);
        header = rc ? NULL : build_header(items, n, digests, &hlen2);
        unsigned char len8[8];
        for (int b = 0; b < 8; b++)
            len8[b] = (unsigned char)((uint64_t)hlen >> (8 * b));
        if (!rc && (!header || hlen2 != hlen)) {
            close(fd);
            rc = plx_set_error(PLX_ERR_INTERNAL, "checkpoint save: %s: the header changed length (%zu, then %zu)", file,
                          hlen, hlen2);
        } else {
            if (!rc && (plx__ckpt_pwrite_all(fd, len8, 8, 0) || plx__ckpt_pwrite_all(fd, header, hlen, 8)))
                rc = -1;
            if (!rc && do_fsync && fsync(fd))
                rc = -1;
            if (rc)
                rc = plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: writing %s: %s", file, strerror(errno));
            if (close(fd) && !rc)
                rc = plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: closing %s: %s", file, strerror(errno));
        }
    }
    for (int i = 0; i < n; i++)
        free(digests[i]);
    free(digests);
    free(header);
    return rc;
}

int plx__ckpt_file_open(struct plx__ckpt_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path)
        return plx_set_error(PLX_ERR_NOMEM, "checkpoint: out of memory");
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return plx_set_error(errno == ENOENT ? PLX_ERR_NOT_FOUND : PLX_ERR_SYSTEM, "open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st))
        return plx_set_error(PLX_ERR_SYSTEM, "stat %s: %s", path, strerror(errno));
    f->size = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (f->size < 8 || plx__ckpt_pread_all(f->fd, len8, 8, 0))
        return plx_set_error(PLX_ERR_PROTOCOL, "%s is truncated: %" PRIu64 " bytes, shorter than its header length",
                        path, f->size);
    uint64_t hlen = 0;
    for (int b = 0; b < 8; b++)
        hlen |= (uint64_t)len8[b] << (8 * b);
    if (hlen > PLX__CKPT_MAX_HEADER)
        return plx_set_error(PLX_ERR_PROTOCOL, "%s: header length %" PRIu64 " is not plausible (corrupt file?)", path, hlen);
    if (f->size < 8 + hlen)
        return plx_set_error(PLX_ERR_PROTOCOL, "%s is truncated: %" PRIu64 " bytes, its header alone needs %" PRIu64,
                        path, f->size, 8 + hlen);
    char *h = malloc(hlen + 1);
    if (!h)
        return plx_set_error(PLX_ERR_NOMEM, "%s: out of memory for the header", path);
    int rc = plx__ckpt_pread_all(f->fd, h, hlen, 8);
    json_error_t je;
    if (!rc)
        f->header = json_loadb(h, hlen, 0, &je);
    free(h);
    if (rc)
        return plx_set_error(PLX_ERR_SYSTEM, "reading %s: %s", path, strerror(errno));
    if (!f->header || !json_is_object(f->header))
        return plx_set_error(PLX_ERR_PROTOCOL, "%s: header is not a JSON object (corrupt file?): %s at byte %d", path,
                        f->header ? "not an object" : je.text, f->header ? 0 : je.position);
    f->data_start = 8 + hlen;
    return 0;
}

void plx__ckpt_file_close(struct plx__ckpt_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    json_decref(f->header);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

json_t *plx__ckpt_file_pieces(const struct plx__ckpt_file *f)
{
    json_t *meta = json_object_get(f->header, "__metadata__");
    const char *s = json_string_value(json_object_get(meta, "plexus"));
    if (!s)
        return NULL;
    json_t *p = json_loads(s, 0, NULL);
    if (p && !json_is_object(p)) {
        json_decref(p);
        p = NULL;
    }
    return p;
}
