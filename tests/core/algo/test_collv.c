/* alltoallv and allgatherv with uneven counts (zeros included), packed and
 * scattered layouts (gaps, blocks in reverse order), blocking and
 * nonblocking, in place and not, for several dtypes: every element checked,
 * and the gaps between blocks left untouched. Bad counts and displacements
 * are refused on the calling rank with a message naming it and the index,
 * and the communicator stays usable.
 *
 * usage: test_collv --threads P        (sim ranks as threads)
 *        test_collv --backend B        (one process rank: tcp, mpi-...) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"

static int failures;
enum { SENTINEL = 0x5a };

/* Elements rank src sends rank dst in layout `seed`, zeros included: seed 3
 * is symmetric (for in place), seed 4 has blocks of up to 1.2 MiB in f64. */
static size_t cnt(int seed, int src, int dst)
{
    if (seed == 3)
        return (size_t)((src + dst + 1) % 4);
    size_t scale = seed == 2 ? 37 : seed == 4 ? 40000 : 1;
    return (size_t)((src * 7 + dst * 3 + seed * 5) % 5) * scale;
}

/* The value of element k of the block src sends dst, as an integer small
 * enough for every dtype tested (u8 wraps the same way on both ends). */
static long val(int src, int dst, size_t k)
{
    return (long)(src * 31 + dst * 7) + (long)k;
}

static void put(void *buf, int dtype, size_t i, long x)
{
    switch (dtype) {
    case PLX_U8: ((uint8_t *)buf)[i] = (uint8_t)x; break;
    case PLX_I32: ((int32_t *)buf)[i] = (int32_t)x; break;
    case PLX_I64: ((int64_t *)buf)[i] = (int64_t)x; break;
    case PLX_F64: ((double *)buf)[i] = (double)x; break;
    }
}

static int same(const void *buf, int dtype, size_t i, long x)
{
    switch (dtype) {
    case PLX_U8: return ((const uint8_t *)buf)[i] == (uint8_t)x;
    case PLX_I32: return ((const int32_t *)buf)[i] == (int32_t)x;
    case PLX_I64: return ((const int64_t *)buf)[i] == (int64_t)x;
    default: return ((const double *)buf)[i] == (double)x;
    }
}

/* Displacements: packed (NULL) or scattered, blocks in reverse rank order
 * with a gap of 3 elements before each. Returns the extent. */
static size_t layout(int scattered, const size_t *n, size_t *d, int P)
{
    size_t at = 0;
    for (int k = 0; k < P; k++) {
        int i = scattered ? P - 1 - k : k;
        at += scattered ? 3 : 0;
        d[i] = at;
        at += n[i];
    }
    return at + (scattered ? 3 : 0);
}

static int is_gap(const size_t *n, const size_t *d, int P, size_t e)
{
    for (int i = 0; i < P; i++)
        if (e >= d[i] && e < d[i] + n[i])
            return 0;
    return 1;
}

static void test_alltoallv(struct plx_comm *c, int seed, int dtype, int scattered, int nonblocking, int inplace)
{
    int P = plx_comm_size(c), r = plx_comm_rank(c);
    size_t es = plx_dtype_size(dtype);
    size_t sn[64], sd[64], rn[64], rd[64];
    for (int j = 0; j < P; j++) {
        sn[j] = cnt(seed, r, j);
        rn[j] = cnt(seed, j, r);
    }
    size_t sext = layout(scattered, sn, sd, P), rext = layout(!scattered, rn, rd, P);
    if (inplace) { /* one buffer, the receive layout for both */
        memcpy(sn, rn, sizeof sn);
        memcpy(sd, rd, sizeof sd);
        sext = rext;
    }
    char *send = malloc(sext * es + 1), *recv = malloc(rext * es + 1);
    memset(send, SENTINEL, sext * es + 1);
    memset(recv, SENTINEL, rext * es + 1);
    char *sbuf = inplace ? recv : send;
    for (int j = 0; j < P; j++)
        for (size_t k = 0; k < sn[j]; k++) /* in place: what r sends j sits in j's receive slot */
            put(sbuf, dtype, sd[j] + k, val(r, j, k));
    int rc;
    if (nonblocking) {
        struct plx_work *w = NULL;
        rc = plx_ialltoallv(c, sbuf, sn, scattered || inplace ? sd : NULL, recv, rn, !scattered || inplace ? rd : NULL,
                            dtype, NULL, &w);
        if (rc == 0)
            rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
    } else {
        rc = plx_alltoallv(c, sbuf, sn, scattered || inplace ? sd : NULL, recv, rn, !scattered || inplace ? rd : NULL,
                           dtype);
    }
    CHECK(rc == 0);
    long wrong = 0;
    for (int j = 0; rc == 0 && j < P; j++)
        for (size_t k = 0; k < rn[j]; k++)
            if (!same(recv, dtype, rd[j] + k, val(j, r, k)) && wrong++ < 3)
                fprintf(stderr, "alltoallv seed %d %s%s%s rank %d: element %zu from rank %d wrong\n", seed,
                        plx_dtype_name(dtype), scattered ? " scattered" : "", inplace ? " in place" : "", r, k, j);
    for (size_t e = 0; rc == 0 && !inplace && e < rext * es + 1; e++)
        if ((e >= rext * es || is_gap(rn, rd, P, e / es)) && (unsigned char)recv[e] != SENTINEL && wrong++ < 3)
            fprintf(stderr, "alltoallv rank %d: gap byte %zu written\n", r, e);
    if (wrong)
        failures++;
    free(send);
    free(recv);
}

static void test_allgatherv(struct plx_comm *c, int seed, int dtype, int scattered, int nonblocking, int inplace)
{
    int P = plx_comm_size(c), r = plx_comm_rank(c);
    size_t es = plx_dtype_size(dtype), n[64], d[64];
    for (int j = 0; j < P; j++)
        n[j] = cnt(seed, j, j + 1);
    size_t ext = layout(scattered, n, d, P);
    char *recv = malloc(ext * es + 1), *send = malloc(n[r] * es + 1);
    memset(recv, SENTINEL, ext * es + 1);
    char *sbuf = inplace ? recv + d[r] * es : send;
    for (size_t k = 0; k < n[r]; k++)
        put(sbuf, dtype, k, val(r, 0, k));
    int rc;
    if (nonblocking) {
        struct plx_work *w = NULL;
        rc = plx_iallgatherv(c, sbuf, n[r], recv, n, scattered ? d : NULL, dtype, NULL, &w);
        if (rc == 0)
            rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
    } else {
        rc = plx_allgatherv(c, sbuf, n[r], recv, n, scattered ? d : NULL, dtype);
    }
    CHECK(rc == 0);
    long wrong = 0;
    for (int j = 0; rc == 0 && j < P; j++)
        for (size_t k = 0; k < n[j]; k++)
            if (!same(recv, dtype, d[j] + k, val(j, 0, k)) && wrong++ < 3)
                fprintf(stderr, "allgatherv seed %d %s rank %d: element %zu from rank %d wrong\n", seed,
                        plx_dtype_name(dtype), r, k, j);
    for (size_t e = 0; rc == 0 && e < ext * es + 1; e++)
        if ((e >= ext * es || is_gap(n, d, P, e / es)) && (unsigned char)recv[e] != SENTINEL && wrong++ < 3)
            fprintf(stderr, "allgatherv rank %d: gap byte %zu written\n", r, e);
    if (wrong)
        failures++;
    free(send);
    free(recv);
}

/* Refused locally, with the rank and the index in the message. */
static void expect_refused(int rc, int r, const char *index_word)
{
    char want[32];
    snprintf(want, sizeof want, "rank %d", r);
    CHECK(rc == PLX_ERR_INVALID_ARG);
    if (!strstr(plx_last_error(), want) || !strstr(plx_last_error(), index_word)) {
        fprintf(stderr, "message does not name '%s' and '%s': %s\n", want, index_word, plx_last_error());
        failures++;
    }
}

static void test_bad(struct plx_comm *c)
{
    int P = plx_comm_size(c), r = plx_comm_rank(c);
    size_t n[64], d[64];
    int32_t buf[256];
    for (int j = 0; j < P; j++) {
        n[j] = 2;
        d[j] = (size_t)j * 2;
    }
    expect_refused(plx_alltoallv(c, buf, NULL, NULL, buf + 128, n, NULL, PLX_I32), r, "send counts");
    size_t bad[64];
    memcpy(bad, d, sizeof bad);
    bad[P - 1] = SIZE_MAX - 1; /* displacement + count overflows */
    char idx[32];
    snprintf(idx, sizeof idx, "block %d", P - 1);
    expect_refused(plx_alltoallv(c, buf, n, bad, buf + 128, n, d, PLX_I32), r, idx);
    memcpy(bad, d, sizeof bad);
    bad[P - 1] = 1; /* overlaps block 0 [0, 2) */
    snprintf(idx, sizeof idx, "and %d", P - 1);
    if (P > 1)
        expect_refused(plx_alltoallv(c, buf, n, d, buf + 128, n, bad, PLX_I32), r, idx);
    snprintf(idx, sizeof idx, "index %d", r);
    expect_refused(plx_allgatherv(c, buf, 3, buf + 128, n, NULL, PLX_I32), r, idx);
    struct plx_work *w = NULL;
    expect_refused(plx_iallgatherv(c, buf, 2, buf + 128, NULL, NULL, PLX_I32, NULL, &w), r, "receive counts");
    CHECK(w == NULL);
    CHECK(plx_alltoallv(c, buf, n, NULL, buf + 128, n, NULL, 99) == PLX_ERR_INVALID_ARG);
    /* Still usable. */
    CHECK(plx_barrier(c) == 0);
}

/* Ranks that disagree on a count: rank 1 expects `want` elements from rank
 * 0, which sends it `have` (everyone else agrees on 2 per pair). Rank 1 must
 * fail with PLX_ERR_MISMATCH naming both ranks and the index; other ranks
 * finish, or fail alike with the same message (mpi's check_counts). Each
 * case runs on a child communicator of its own (a failure ends it). */
static void test_disagree(struct plx_comm *parent, int allgather, size_t have, size_t want)
{
    int P = plx_comm_size(parent), r = plx_comm_rank(parent);
    struct plx_comm *c = NULL;
    CHECK(plx_comm_split(parent, 0, r, &c) == 0);
    if (!c)
        return;
    size_t sn[64], rn[64], big = have > want ? have : want;
    for (int j = 0; j < P; j++)
        sn[j] = rn[j] = 2;
    if (allgather) {
        for (int j = 0; j < P; j++)
            rn[j] = j == 0 ? have : 2; /* rank 0 contributes `have`; rank 1 thinks `want` */
        if (r == 1)
            rn[0] = want;
    } else {
        if (r == 0)
            sn[1] = have;
        if (r == 1)
            rn[0] = want;
    }
    int32_t *send = calloc(big * (size_t)P + 8, sizeof *send), *recv = calloc(big * (size_t)P + 8, sizeof *recv);
    int rc = allgather ? plx_allgatherv(c, send, rn[r], recv, rn, NULL, PLX_I32)
                       : plx_alltoallv(c, send, sn, NULL, recv, rn, NULL, PLX_I32);
    char want_msg[160];
    snprintf(want_msg, sizeof want_msg, "rank 0 sends %zu elements to rank 1, rank 1 expects %zu from rank 0 (index 0)",
             have, want);
    /* Rank 1 found it and names both sides; a peer may finish first, or fail
     * with the same words, or (once any rank fails an operation no rank
     * reports success for it) fail naming rank 1 as the one that gave up. */
    int ok = rc == 0 ? r != 1
                     : (rc == PLX_ERR_MISMATCH && strstr(plx_last_error(), want_msg) != NULL) ||
                           (r != 1 && strstr(plx_last_error(), "rank 1 gave up") != NULL);
    if (!ok) {
        fprintf(stderr, "%s disagreement (%zu sent, %zu expected) on rank %d: rc %d (%s), want %s'%s'\n",
                allgather ? "allgatherv" : "alltoallv", have, want, r, rc, rc ? plx_last_error() : "no error",
                r == 1 ? "" : "success, 'rank 1 gave up' or ", want_msg);
        failures++;
    }
    free(send);
    free(recv);
    /* Everyone is done with c before anyone closes it: a rank that finished
     * and destroyed c at once could close rank 1's connections while rank 1
     * still waits for the rest of the block, and rank 1 would then report
     * the lost connection instead of the disagreement (tcp, 1 run in 30). */
    CHECK(plx_barrier(parent) == 0);
    plx_comm_destroy(c);
}

static int run_rank(struct plx_comm *c)
{
    static const int dtypes[] = {PLX_I32, PLX_F64, PLX_U8, PLX_I64};
    test_bad(c);
    for (int seed = 0; seed < 3; seed++)
        for (int t = 0; t < 4; t++)
            for (int mode = 0; mode < 4; mode++) {
                test_alltoallv(c, seed, dtypes[t], mode & 1, mode >> 1, 0);
                test_allgatherv(c, seed, dtypes[t], mode & 1, mode >> 1, 0);
                test_allgatherv(c, seed, dtypes[t], mode & 1, mode >> 1, 1);
            }
    /* In place needs what r sends j == what j sends r: a symmetric layout. */
    for (int t = 0; t < 4; t++)
        for (int nb = 0; nb < 2; nb++)
            test_alltoallv(c, 3, dtypes[t], 0, nb, 1);
    /* Larger than any eager threshold: 1 MiB blocks on some pairs. */
    test_alltoallv(c, 4, PLX_F64, 1, 1, 0);
    test_allgatherv(c, 4, PLX_F64, 1, 0, 0);
    CHECK(plx_barrier(c) == 0);
    if (plx_comm_size(c) > 1 && !getenv("COLLV_NO_DISAGREE")) {
        /* fewer, more, zero against some, and larger than a header's inline part */
        static const size_t cases[][2] = {{2, 3}, {3, 2}, {0, 5}, {5, 0}, {3000, 7}, {7, 3000}, {3000, 3001}};
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            test_disagree(c, 0, cases[k][0], cases[k][1]);
            test_disagree(c, 1, cases[k][0], cases[k][1]);
        }
    }
    if (plx_comm_rank(c) == 0)
        printf("collv on %s with %d ranks: %s\n", plx_comm_backend(c), plx_comm_size(c), failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}

static int thread_rank(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    return rc ? 1 : run_rank(ctx->comm);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--threads"))
        return run_ranks(atoi(argv[2]), "sim", NULL, 30000, thread_rank, NULL) || failures;
    if (argc == 3 && !strcmp(argv[1], "--backend")) {
        struct plx_comm_options o;
        plx_comm_options_init(&o);
        o.backend = argv[2];
        o.timeout_ms = 30000;
        struct plx_comm *c;
        if (plx_comm_init(&o, &c)) {
            fprintf(stderr, "init: %s\n", plx_last_error());
            return 1;
        }
        int rc = run_rank(c);
        plx_comm_destroy(c);
        plx_finalize();
        return rc;
    }
    fprintf(stderr, "usage: test_collv --threads P | --backend NAME\n");
    return 2;
}
