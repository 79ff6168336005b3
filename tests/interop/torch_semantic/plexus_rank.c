/* plexus_rank.c CASES OUTDIR - one rank of the plexus side of the semantic
 * comparison with torch's gloo process group (started by plexus-run).
 *
 * Reads the case list that matrix.py wrote ("coll dtype op count root" per
 * line), runs each case through plexus with the inputs matrix.gen() defines
 * (the same function, in C below), and writes what this rank received to
 * OUTDIR/plexus.RANK.{idx,bin} in torch_rank.py's format: one index line per
 * case (key, "ok" or "refused", bytes, reason) and the bytes, in case order.
 * allreduce, reduce and broadcast run in place, as torch's calls do.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"

/* matrix.py's DTYPES order (the salt uses the index) and significand bits. */
static const char *const dt_names[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
static const int dt_plx[] = {PLX_F32, PLX_F64, PLX_F16, PLX_BF16, PLX_I32, PLX_I64, PLX_U8, PLX_I8};
static const int dt_bits[] = {24, 53, 11, 8, 0, 0, 0, 0};

enum { DIST_RAW = 0, DIST_SUM = 1, DIST_PROD = 2 };

static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* An exact, normal value as f16 bits (the generated values always are). */
static uint16_t f16_exact(double v)
{
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    int e;
    double m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((2 * m - 1) * 1024));
}

/* Element i of rank's inputs: matrix.gen(), element by element. */
static void gen_one(void *buf, size_t i, int rank, int dti, int dist)
{
    size_t es = plx_dtype_size(dt_plx[dti]);
    uint64_t salt = (uint64_t)(8 * dti + dist);
    uint64_t h = splitmix((((uint64_t)rank + 1) << 32 | (uint64_t)i) ^ (salt << 56));
    int b = dt_bits[dti];
    if (dist == DIST_RAW || !b) {
        memcpy((char *)buf + i * es, &h, es); /* h's first bytes in memory, as matrix.gen takes them */
        return;
    }
    double v;
    if (dist == DIST_SUM) {
        v = ldexp((double)((int64_t)(h >> (64 - b)) - ((int64_t)1 << (b - 1))), -(b - 1) - (int)(h & 3));
    } else {
        v = (1.0 + ldexp((double)(h >> (65 - b)), -(b - 1))) * ((h >> 1) & 1 ? 0.5 : 1.0);
        if (h & 1)
            v = -v;
    }
    switch (dt_plx[dti]) {
    case PLX_F64: ((double *)buf)[i] = v; break;
    case PLX_F32: ((float *)buf)[i] = (float)v; break;
    case PLX_F16: ((uint16_t *)buf)[i] = f16_exact(v); break;
    default: { /* bf16: v is exact in bf16, so the top half of its f32 */
        float f = (float)v;
        uint32_t x;
        memcpy(&x, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(x >> 16);
    }
    }
}

struct rankio {
    FILE *idx, *bin;
};

static void record(struct rankio *io, const char *key, int rc, const void *data, size_t bytes)
{
    if (rc) {
        fprintf(io->idx, "%s\trefused\t0\t%s: %s\n", key, plx_err_name(rc), plx_last_error());
        return;
    }
    if (bytes)
        fwrite(data, 1, bytes, io->bin);
    fprintf(io->idx, "%s\tok\t%zu\t\n", key, bytes);
}

/* Runs one case; returns its status and sets what this rank keeps. */
static int run_case(struct plx_comm *c, const char *coll, int dt, int op, size_t n, int root, char *in, char *out,
                    const char **keep, size_t *keep_n)
{
    int P = plx_comm_size(c), me = plx_comm_rank(c);
    *keep = out;
    *keep_n = n;
    if (!strcmp(coll, "allreduce")) {
        *keep = in;
        return plx_allreduce(c, in, in, n, dt, op);
    }
    if (!strcmp(coll, "reduce")) {
        *keep = in;
        *keep_n = me == root ? n : 0;
        return plx_reduce(c, in, in, n, dt, op, root);
    }
    if (!strcmp(coll, "reduce_scatter"))
        return plx_reduce_scatter(c, in, out, n, dt, op);
    if (!strcmp(coll, "broadcast")) {
        *keep = in;
        return plx_broadcast(c, in, n, dt, root);
    }
    if (!strcmp(coll, "allgather")) {
        *keep_n = n * (size_t)P;
        return plx_allgather(c, in, out, n, dt);
    }
    if (!strcmp(coll, "gather")) {
        *keep_n = me == root ? n * (size_t)P : 0;
        return plx_gather(c, in, me == root ? out : NULL, n, dt, root);
    }
    if (!strcmp(coll, "scatter"))
        return plx_scatter(c, me == root ? in : NULL, out, n, dt, root);
    if (!strcmp(coll, "alltoall")) {
        *keep_n = n * (size_t)P;
        return plx_alltoall(c, in, out, n, dt);
    }
    *keep_n = 0;
    return plx_barrier(c);
}

static int find(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: plexus_rank CASES OUTDIR (one rank; start with plexus-run)\n");
        return 2;
    }
    FILE *cases = fopen(argv[1], "r");
    if (!cases) {
        perror(argv[1]);
        return 2;
    }
    struct plx_comm_options opt;
    plx_comm_options_init(&opt);
    opt.timeout_ms = 60000;
    struct plx_comm *c;
    int rc = plx_comm_init(&opt, &c);
    if (rc) {
        fprintf(stderr, "plexus_rank: init: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 1;
    }
    int P = plx_comm_size(c), me = plx_comm_rank(c), status = 0;
    char path[4096];
    struct rankio io;
    snprintf(path, sizeof path, "%s/plexus.%d.idx", argv[2], me);
    io.idx = fopen(path, "w");
    snprintf(path, sizeof path, "%s/plexus.%d.bin", argv[2], me);
    io.bin = fopen(path, "wb");
    if (!io.idx || !io.bin) {
        perror(path);
        return 1;
    }
    static const char *const ops[] = {"sum", "prod", "min", "max", "avg"};
    static const int plx_ops[] = {PLX_SUM, PLX_PROD, PLX_MIN, PLX_MAX, PLX_AVG};
    char coll[32], dname[8], oname[8], key[96];
    size_t n;
    int root;
    while (fscanf(cases, "%31s %7s %7s %zu %d", coll, dname, oname, &n, &root) == 5) {
        int dti = find(dt_names, 8, dname), oi = find(ops, 5, oname);
        if (dti < 0) {
            fprintf(stderr, "plexus_rank: unknown dtype %s\n", dname);
            status = 1;
            break;
        }
        int dt = dt_plx[dti], op = oi < 0 ? PLX_SUM : plx_ops[oi];
        int moving = oi < 0, is_float = dt_bits[dti] != 0;
        int dist = moving || !is_float ? DIST_RAW : op == PLX_PROD ? DIST_PROD : DIST_SUM;
        size_t es = plx_dtype_size(dt), total = n * (size_t)P;
        size_t in_n = !strcmp(coll, "reduce_scatter") || !strcmp(coll, "scatter") || !strcmp(coll, "alltoall")
                          ? total : n;
        char *in = malloc(total * es + 1), *out = malloc(total * es + 1);
        if (!in || !out) {
            fprintf(stderr, "plexus_rank: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < in_n; i++)
            gen_one(in, i, me, dti, dist);
        memset(out, 0xa5, total * es);
        const char *keep;
        size_t keep_n;
        rc = run_case(c, coll, dt, op, n, root, in, out, &keep, &keep_n);
        snprintf(key, sizeof key, "%s.%s.%s.%zu", coll, dname, oname, n);
        record(&io, key, rc, keep, keep_n * es);
        free(in);
        free(out);
        /* A refusal must not leave ranks out of step: the next case would hang. */
        if (rc && rc != PLX_ERR_UNSUPPORTED && rc != PLX_ERR_INVALID_ARG) {
            fprintf(stderr, "plexus_rank: %s: %s: %s\n", key, plx_err_name(rc), plx_last_error());
            status = 1;
            break;
        }
    }
    fclose(cases);
    if (fclose(io.idx) | fclose(io.bin))
        status = 1;
    rc = plx_barrier(c);
    plx_comm_destroy(c);
    return status || rc ? 1 : 0;
}
