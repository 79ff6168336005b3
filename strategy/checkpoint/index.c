/* index.c - rank 0 builds index.json from the shard files' own headers, so
 * no rank has to ship its table of pieces over the network: every logical
 * tensor with its global shape and dtype, and the list of pieces (file,
 * key, element range, block checksums) that hold it. Ranks that disagree on
 * a tensor's dtype or shape are caught here, before anything is published. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"

/* Merge one shard file's pieces into tensors (name -> {dtype, shape, shards}). */
static int merge(json_t *tensors, const char *fname, const struct plx__ckpt_file *f)
{
    json_t *pieces = plx__ckpt_file_pieces(f);
    if (!pieces)
        return plx_set_error(PLX_ERR_PROTOCOL, "checkpoint index: %s has no plexus metadata", f->path);
    const char *name;
    json_t *p;
    int rc = 0;
    json_object_foreach(pieces, name, p)
    {
        json_t *dtype = json_object_get(p, "dtype"), *shape = json_object_get(p, "shape");
        json_t *t = json_object_get(tensors, name);
        if (!t) {
            t = json_pack("{s:O, s:O, s:[]}", "dtype", dtype, "shape", shape, "shards");
            json_object_set_new(tensors, name, t);
        } else if (!json_equal(json_object_get(t, "dtype"), dtype) || !json_equal(json_object_get(t, "shape"), shape)) {
            char *a = json_dumps(json_object_get(t, "shape"), JSON_COMPACT), *b = json_dumps(shape, JSON_COMPACT);
            rc = plx_set_error(PLX_ERR_INVALID_ARG,
                          "checkpoint save: tensor '%s' is %s %s in an earlier shard but %s %s in %s: ranks disagree",
                          name, json_string_value(json_object_get(t, "dtype")), a ? a : "?",
                          json_string_value(dtype), b ? b : "?", fname);
            free(a);
            free(b);
            break;
        }
        if (json_integer_value(json_object_get(p, "count")) == 0)
            continue; /* an empty piece holds nothing to find */
        json_array_append_new(json_object_get(t, "shards"),
                              json_pack("{s:s, s:s, s:O, s:O, s:O}", "file", fname, "key", name, "offset",
                                        json_object_get(p, "offset"), "count", json_object_get(p, "count"),
                                        "blake2b", json_object_get(p, "blake2b")));
    }
    json_decref(pieces);
    return rc;
}

int plx__ckpt_write_index(const char *dir, int P, int do_fsync)
{
    json_t *tensors = json_object();
    char fname[64], path[4096];
    int rc = 0;
    for (int r = 0; r < P && !rc; r++) {
        plx__ckpt_shard_name(fname, sizeof fname, r);
        snprintf(path, sizeof path, "%s/%s", dir, fname);
        struct plx__ckpt_file f;
        rc = plx__ckpt_file_open(&f, path);
        if (!rc)
            rc = merge(tensors, fname, &f);
        plx__ckpt_file_close(&f);
    }
    if (rc) {
        json_decref(tensors);
        return rc;
    }
    json_t *index = json_pack("{s:s, s:i, s:i, s:{s:s, s:I}, s:o}", "format", "plexus.checkpoint", "version", 1,
                              "world_size", P, "checksum", "algorithm", "blake2b-256", "block_bytes",
                              (json_int_t)PLX__CKPT_BLOCK, "tensors", tensors);
    snprintf(path, sizeof path, "%s/%s", dir, PLX__CKPT_INDEX);
    if (!index || json_dump_file(index, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER))
        rc = plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: could not write %s", path);
    else if (do_fsync && plx__ckpt_fsync_path(path))
        rc = plx_set_error(PLX_ERR_SYSTEM, "checkpoint save: fsync %s failed", path);
    json_decref(index);
    return rc;
}
