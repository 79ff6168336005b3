/* load.c - read the element ranges a rank needs from whichever shard files
 * hold them. Everything is read into staging buffers and verified first
 * (block checksums, sizes, dtypes); the ranks then agree, and only if every
 * rank succeeded are the caller's buffers written, so a failed load leaves
 * them untouched everywhere. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"

struct ctx {
    const char *dir;
    json_t *tensors;
    int verify;
    struct plx__ckpt_file *files; /* opened on first use */
    char **names;
    int nfiles;
};

struct piece {
    size_t off, count;
    const char *file, *key;
    json_t *sums;
};

static int cmp_piece(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int get_file(struct ctx *c, const char *name, const char *tensor, struct plx__ckpt_file **out)
{
    for (int i = 0; i < c->nfiles; i++)
        if (!strcmp(c->names[i], name)) {
            *out = &c->files[i];
            return 0;
        }
    if (strchr(name, '/') || !strcmp(name, ".."))
        return plx_set_error(PLX_ERR_PROTOCOL, "checkpoint load: the index names file '%s' for tensor '%s', outside %s",
                        name, tensor, c->dir);
    struct plx__ckpt_file *nf = realloc(c->files, (size_t)(c->nfiles + 1) * sizeof *nf);
    if (nf)
        c->files = nf;
    char **nn = realloc(c->names, (size_t)(c->nfiles + 1) * sizeof *nn);
    if (nn)
        c->names = nn;
    if (!nf || !nn)
        return plx_set_error(PLX_ERR_NOMEM, "checkpoint load: out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    struct plx__ckpt_file *f = &c->files[c->nfiles];
    int rc = plx__ckpt_file_open(f, path);
    if (rc) {
        plx_error_prefix("checkpoint load: tensor '%s': ", tensor);
        plx__ckpt_file_close(f);
        return rc;
    }
    c->names[c->nfiles++] = strdup(name);
    *out = f;
    return 0;
}

/* Copy elements [lo, hi) of piece p (piece-relative) into dst. */
static int read_range(struct ctx *c, const struct piece *p, const char *tensor, int dtype, size_t lo, size_t hi,
                      char *dst)
{
    struct plx__ckpt_file *f = NULL;
    int rc = get_file(c, p->file, tensor, &f);
    if (rc)
        return rc;
    size_t es = plx_dtype_size(dtype);
    json_t *e = json_object_get(f->header, p->key);
    json_t *offs = json_object_get(e, "data_offsets");
    const char *tag = json_string_value(json_object_get(e, "dtype"));
    if (!e || !json_is_array(offs) || json_array_size(offs) != 2)
        return plx_set_error(PLX_ERR_PROTOCOL, "checkpoint load: %s has no entry for tensor '%s' that the index promises",
                        f->path, tensor);
    uint64_t b = (uint64_t)json_integer_value(json_array_get(offs, 0));
    uint64_t end = (uint64_t)json_integer_value(json_array_get(offs, 1));
    uint64_t bytes = (uint64_t)p->count * es;
    if (!tag || plx__ckpt_dtype_from_tag(tag) != dtype || end < b || end - b != bytes)
        return plx_set_error(PLX_ERR_PROTOCOL,
                        "checkpoint load: %s: tensor '%s' is %s of %llu bytes there, the index says %s of %llu",
                        f->path, tensor, tag ? tag : "?", (unsigned long long)(end - b), plx__ckpt_dtype_tag(dtype),
                        (unsigned long long)bytes);
    if (f->data_start + end > f->size)
        return plx_set_error(PLX_ERR_PROTOCOL,
                        "checkpoint load: %s is truncated: tensor '%s' needs bytes up to %llu, the file has %llu",
                        f->path, tensor, (unsigned long long)(f->data_start + end), (unsigned long long)f->size);
    uint64_t base = f->data_start + b, blo = (uint64_t)lo * es, bhi = (uint64_t)hi * es;
    if (!c->verify) {
        if (plx__ckpt_pread_all(f->fd, dst, bhi - blo, base + blo))
            return plx_set_error(PLX_ERR_SYSTEM, "checkpoint load: reading tensor '%s' from %s: %s", tensor, f->path,
                            strerror(errno));
        return 0;
    }
    /* Verified: read whole blocks around the range, check each. */
    size_t b0 = blo / PLX__CKPT_BLOCK, b1 = (bhi - 1) / PLX__CKPT_BLOCK;
    if (!json_is_array(p->sums) || json_array_size(p->sums) != (bytes + PLX__CKPT_BLOCK - 1) / PLX__CKPT_BLOCK)
        return plx_set_error(PLX_ERR_PROTOCOL, "checkpoint load: the index lists no usable checksums for tensor '%s' in %s",
                        tensor, f->path);
    uint64_t rlo = (uint64_t)b0 * PLX__CKPT_BLOCK, rhi = (uint64_t)(b1 + 1) * PLX__CKPT_BLOCK;
    if (rhi > bytes)
        rhi = bytes;
    /* Whole blocks wanted (the usual case: whole pieces): read straight
     * into the staging buffer, no bounce copy. */
    int direct = rlo == blo && rhi == bhi;
    char *buf = direct ? dst : malloc(rhi - rlo);
    if (!buf)
        return plx_set_error(PLX_ERR_NOMEM, "checkpoint load: out of memory reading tensor '%s'", tensor);
    if (plx__ckpt_pread_all(f->fd, buf, rhi - rlo, base + rlo)) {
        if (!direct)
            free(buf);
        return plx_set_error(PLX_ERR_SYSTEM, "checkpoint load: reading tensor '%s' from %s: %s", tensor, f->path,
                        strerror(errno));
    }
    for (size_t k = b0; k <= b1; k++) {
        uint64_t s = (uint64_t)k * PLX__CKPT_BLOCK, t = s + PLX__CKPT_BLOCK < bytes ? s + PLX__CKPT_BLOCK : bytes;
        char hex[2 * PLX__CKPT_DIGEST + 1];
        plx__ckpt_digest_hex(buf + (s - rlo), t - s, hex);
        const char *want = json_string_value(json_array_get(p->sums, k));
        if (!want || strcmp(want, hex)) {
            if (!direct)
                free(buf);
            return plx_set_error(PLX_ERR_PROTOCOL,
                            "checkpoint load: checksum mismatch in %s, tensor '%s', bytes %llu..%llu of its piece "
                            "(elements from %zu): the file is corrupt",
                            f->path, tensor, (unsigned long long)s, (unsigned long long)t, p->off);
        }
    }
    if (!direct) {
        memcpy(dst, buf + (blo - rlo), bhi - blo);
        free(buf);
    }
    return 0;
}

/* Fill staging with the item's elements. */
static int load_item(struct ctx *c, const struct plx_ckpt_item *it, char *staging)
{
    json_t *t = json_object_get(c->tensors, it->name);
    if (!t)
        return plx_set_error(PLX_ERR_NOT_FOUND, "checkpoint load: %s/%s has no tensor '%s'", c->dir, PLX__CKPT_INDEX,
                        it->name);
    const char *tag = json_string_value(json_object_get(t, "dtype"));
    if (!tag || plx__ckpt_dtype_from_tag(tag) != it->dtype)
        return plx_set_error(PLX_ERR_INVALID_ARG, "checkpoint load: tensor '%s' is %s in %s/%s, the caller asked for %s",
                        it->name, tag ? tag : "?", c->dir, PLX__CKPT_INDEX, plx__ckpt_dtype_tag(it->dtype));
    json_t *shape = json_object_get(t, "shape");
    int same = json_is_array(shape) && json_array_size(shape) == (size_t)it->ndim;
    for (int d = 0; same && d < it->ndim; d++)
        same = json_integer_value(json_array_get(shape, (size_t)d)) == it->shape[d];
    if (!same) {
        char *s = json_dumps(shape, JSON_COMPACT), want[256] = "[";
        for (int d = 0; d < it->ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "," : "", (long long)it->shape[d]);
        strcat(want, "]");
        int rc = plx_set_error(PLX_ERR_INVALID_ARG, "checkpoint load: tensor '%s' has shape %s in %s/%s, the caller asked for %s",
                          it->name, s ? s : "?", c->dir, PLX__CKPT_INDEX, want);
        free(s);
        return rc;
    }
    json_t *shards = json_object_get(t, "shards");
    size_t ns = json_array_size(shards);
    struct piece *ps = calloc(ns ? ns : 1, sizeof *ps);
    if (!ps)
        return plx_set_error(PLX_ERR_NOMEM, "checkpoint load: out of memory");
    for (size_t i = 0; i < ns; i++) {
        json_t *s = json_array_get(shards, i);
        ps[i] = (struct piece){(size_t)json_integer_value(json_object_get(s, "offset")),
                               (size_t)json_integer_value(json_object_get(s, "count")),
                               json_string_value(json_object_get(s, "file")),
                               json_string_value(json_object_get(s, "key")), json_object_get(s, "blake2b")};
    }
    qsort(ps, ns, sizeof *ps, cmp_piece);
    size_t es = plx_dtype_size(it->dtype), pos = it->offset, end = it->offset + it->count;
    int rc = 0;
    /* Sweep: the pieces sorted by offset; take from the first one covering pos. */
    for (size_t i = 0; i < ns && pos < end && !rc; i++) {
        struct piece *p = &ps[i];
        if (!p->file || !p->key) {
            rc = plx_set_error(PLX_ERR_PROTOCOL, "checkpoint load: %s/%s: a piece of tensor '%s' names no file", c->dir,
                          PLX__CKPT_INDEX, it->name);
            break;
        }
        if (p->off > pos || p->off + p->count <= pos)
            continue;
        size_t hi = p->off + p->count < end ? p->off + p->count : end;
        rc = read_range(c, p, it->name, it->dtype, pos - p->off, hi - p->off, staging + (pos - it->offset) * es);
        pos = hi;
    }
    if (!rc && pos < end)
        rc = plx_set_error(PLX_ERR_NOT_FOUND, "checkpoint load: element %zu of tensor '%s' is in no shard of %s", pos,
                      it->name, c->dir);
    free(ps);
    return rc;
}

PLX_API int plx_ckpt_load(struct plx_comm *comm, const char *path, const struct plx_ckpt_item *items, int n,
                          const struct plx_ckpt_options *o)
{
    struct plx_ckpt_options opt;
    plx_ckpt_options_init(&opt);
    if (o)
        memcpy(&opt, o, o->struct_size < sizeof opt ? o->struct_size : sizeof opt);
    int rc = 0;
    if (!path || !*path || n < 0 || (n && !items))
        rc = plx_set_error(PLX_ERR_INVALID_ARG, "plx_ckpt_load: no path or a bad item list");
    for (int i = 0; !rc && i < n; i++)
        rc = plx__ckpt_check_item("checkpoint load", &items[i]);
    if (!rc && opt.verify)
        rc = plx__ckpt_digest_init();
    struct ctx c = {.dir = path, .verify = opt.verify};
    json_t *index = NULL;
    if (!rc) {
        char ipath[4096];
        json_error_t je;
        snprintf(ipath, sizeof ipath, "%s/%s", path, PLX__CKPT_INDEX);
        int missing = access(ipath, F_OK) != 0;
        index = missing ? NULL : json_load_file(ipath, 0, &je);
        if (missing)
            rc = plx_set_error(PLX_ERR_NOT_FOUND, "checkpoint load: no checkpoint at %s (%s missing)", path, ipath);
        else if (!index)
            rc = plx_set_error(PLX_ERR_PROTOCOL, "checkpoint load: %s: %s (line %d)", ipath, je.text, je.line);
        else if (!json_is_object(c.tensors = json_object_get(index, "tensors")))
            rc = plx_set_error(PLX_ERR_PROTOCOL, "checkpoint load: %s has no \"tensors\" object", ipath);
    }
    char **staging = calloc((size_t)(n ? n : 1), sizeof *staging);
    if (!rc && !staging)
        rc = plx_set_error(PLX_ERR_NOMEM, "checkpoint load: out of memory");
    for (int i = 0; !rc && i < n; i++) {
        size_t bytes = items[i].count * plx_dtype_size(items[i].dtype);
        if (!(staging[i] = malloc(bytes ? bytes : 1)))
            rc = plx_set_error(PLX_ERR_NOMEM, "checkpoint load: out of memory for tensor '%s'", items[i].name);
        else
            rc = load_item(&c, &items[i], staging[i]);
    }
    rc = plx__ckpt_agree(comm, "checkpoint load", rc);
    for (int i = 0; !rc && i < n; i++)
        memcpy(items[i].data, staging[i], items[i].count * plx_dtype_size(items[i].dtype));
    for (int i = 0; staging && i < n; i++)
        free(staging[i]);
    free(staging);
    for (int i = 0; i < c.nfiles; i++) {
        plx__ckpt_file_close(&c.files[i]);
        free(c.names[i]);
    }
    free(c.files);
    free(c.names);
    json_decref(index);
    return rc;
}
