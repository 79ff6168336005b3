/* The sim backend's own code paths that the matrix does not reach: counts
 * spanning several work items with a remainder (in place and out of place),
 * nonblocking collectives queued ahead of a blocking one (which must then
 * not run inline, or the order breaks), bitwise-identical float results on
 * every rank, and request reuse over many operations. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"

static int failures;

/* More than two 256 KiB work items of i32, plus a remainder. */
#define N ((size_t)2 * 65536 + 7)

static int32_t val(int rank, size_t i)
{
    return (int32_t)(i % 101) + 3 * rank + 1;
}

static int32_t sum_at(int P, size_t i)
{
    int32_t s = 0;
    for (int r = 0; r < P; r++)
        s += val(r, i);
    return s;
}

static int start(struct plx_comm *c, int coll, const void *s, void *r, size_t n, int nb, struct plx_work **w)
{
    int root = plx_comm_size(c) - 1;
    *w = NULL;
    if (!nb) {
        switch (coll) {
        case PLX_COLL_ALLREDUCE: return plx_allreduce(c, s, r, n, PLX_I32, PLX_SUM);
        case PLX_COLL_REDUCE: return plx_reduce(c, s, r, n, PLX_I32, PLX_SUM, root);
        case PLX_COLL_REDUCE_SCATTER: return plx_reduce_scatter(c, s, r, n, PLX_I32, PLX_SUM);
        case PLX_COLL_BROADCAST: return plx_broadcast(c, r, n, PLX_I32, root);
        case PLX_COLL_ALLGATHER: return plx_allgather(c, s, r, n, PLX_I32);
        case PLX_COLL_GATHER: return plx_gather(c, s, r, n, PLX_I32, root);
        case PLX_COLL_SCATTER: return plx_scatter(c, s, r, n, PLX_I32, root);
        default: return plx_alltoall(c, s, r, n, PLX_I32);
        }
    }
    switch (coll) {
    case PLX_COLL_ALLREDUCE: return plx_iallreduce(c, s, r, n, PLX_I32, PLX_SUM, NULL, w);
    case PLX_COLL_REDUCE: return plx_ireduce(c, s, r, n, PLX_I32, PLX_SUM, root, NULL, w);
    case PLX_COLL_REDUCE_SCATTER: return plx_ireduce_scatter(c, s, r, n, PLX_I32, PLX_SUM, NULL, w);
    case PLX_COLL_BROADCAST: return plx_ibroadcast(c, r, n, PLX_I32, root, NULL, w);
    case PLX_COLL_ALLGATHER: return plx_iallgather(c, s, r, n, PLX_I32, NULL, w);
    case PLX_COLL_GATHER: return plx_igather(c, s, r, n, PLX_I32, root, NULL, w);
    case PLX_COLL_SCATTER: return plx_iscatter(c, s, r, n, PLX_I32, root, NULL, w);
    default: return plx_ialltoall(c, s, r, n, PLX_I32, NULL, w);
    }
}

/* Expected element i of rank me's output (recv) for coll; -1: not checked. */
static int64_t want(int coll, int me, int P, size_t i)
{
    int root = P - 1;
    switch (coll) {
    case PLX_COLL_ALLREDUCE: return sum_at(P, i);
    case PLX_COLL_REDUCE: return me == root ? sum_at(P, i) : -1;
    case PLX_COLL_REDUCE_SCATTER: return sum_at(P, (size_t)me * N + i);
    case PLX_COLL_BROADCAST: return val(root, i);
    case PLX_COLL_ALLGATHER: return val((int)(i / N), i % N);
    case PLX_COLL_GATHER: return me == root ? val((int)(i / N), i % N) : -1;
    case PLX_COLL_SCATTER: return val(root, (size_t)me * N + i);
    default: return val((int)(i / N), (size_t)me * N + i % N); /* block j of rank i -> block i of rank j */
    }
}

/* One collective at count N, in place or not, blocking or not. */
static void chunked_case(struct rank_ctx *ctx, int coll, int inplace, int nb)
{
    int me = ctx->rank, P = ctx->size, root = P - 1;
    size_t big = N * (size_t)P;
    int32_t *sb = malloc(big * sizeof *sb), *rb = malloc(big * sizeof *rb);
    int32_t *s = sb, *r = rb;
    size_t ns = N, nr = N;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER || coll == PLX_COLL_ALLTOALL)
        nr = big;
    if (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL)
        ns = big;
    if (inplace) {
        if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER)
            s = rb + (size_t)me * N;
        else if (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER)
            r = sb + (size_t)me * N;
        else
            s = r = rb;
    }
    memset(rb, 0x5a, big * sizeof *rb);
    for (size_t i = 0; i < ns; i++)
        s[i] = val(me, i);
    if (coll == PLX_COLL_BROADCAST)
        for (size_t i = 0; i < N; i++)
            r[i] = me == root ? val(root, i) : 0;
    struct plx_work *w;
    int rc = start(ctx->comm, coll, s, r, N, nb, &w);
    if (!rc && w) {
        rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
    }
    CHECK(rc == 0);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; !rc && i < nr; i++) {
        int64_t x = want(coll, me, P, i);
        if (x >= 0 && r[i] != x && !wrong++)
            first = i;
    }
    if (wrong)
        fprintf(stderr, "rank %d: %s inplace=%d nb=%d: %ld wrong, first at %zu: %d, want %lld\n", me,
                plx_coll_name(coll), inplace, nb, wrong, first, r[first], (long long)want(coll, me, P, first));
    CHECK(wrong == 0);
    free(sb);
    free(rb);
}

static int chunked_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    static const int colls[] = {PLX_COLL_ALLREDUCE, PLX_COLL_REDUCE,  PLX_COLL_REDUCE_SCATTER, PLX_COLL_BROADCAST,
                                PLX_COLL_ALLGATHER, PLX_COLL_GATHER, PLX_COLL_SCATTER,        PLX_COLL_ALLTOALL};
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
        for (int inplace = 0; inplace < 2; inplace++)
            chunked_case(ctx, colls[k], inplace, (int)(k + (size_t)inplace) % 2);
    return 0;
}

/* Three nonblocking allreduces (small and large) queued, then a blocking
 * one: each must see its own inputs, in issue order on every rank. */
static int order_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    int P = ctx->size;
    size_t n[4] = {5, N, 1000, N};
    int32_t *in[4], *out[4];
    struct plx_work *w[3];
    for (int j = 0; j < 4; j++) {
        in[j] = malloc(n[j] * sizeof(int32_t));
        out[j] = calloc(n[j], sizeof(int32_t));
        for (size_t i = 0; i < n[j]; i++)
            in[j][i] = (int32_t)(j + 1) * val(ctx->rank, i);
    }
    for (int j = 0; j < 3; j++)
        CHECK(plx_iallreduce(ctx->comm, in[j], out[j], n[j], PLX_I32, PLX_SUM, NULL, &w[j]) == 0);
    CHECK(plx_allreduce(ctx->comm, in[3], out[3], n[3], PLX_I32, PLX_SUM) == 0);
    for (int j = 2; j >= 0; j--) { /* completion order does not matter to waiting */
        CHECK(plx_work_wait(w[j], PLX_TIMEOUT_DEFAULT) == 0);
        plx_work_free(w[j]);
    }
    for (int j = 0; j < 4; j++) {
        long wrong = 0;
        for (size_t i = 0; i < n[j]; i++)
            wrong += out[j][i] != (int32_t)(j + 1) * sum_at(P, i);
        CHECK(wrong == 0);
        free(in[j]);
        free(out[j]);
    }
    return 0;
}

/* Rounding differs with the order of a float sum: every rank must still
 * get the same bits (each chunk is reduced once, or in rank order). */
static float *results[8];
static pthread_barrier_t bar;

static int bits_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    size_t sizes[2] = {1000, N};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        uint32_t seed = 12345u + (uint32_t)ctx->rank * 7919u;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            x[i] = (float)(seed >> 8) / 16777216.0f * 3.0f - 1.0f;
        }
        CHECK(plx_allreduce(ctx->comm, x, y, n, PLX_F32, PLX_SUM) == 0);
        results[ctx->rank] = y;
        pthread_barrier_wait(&bar);
        CHECK(memcmp(y, results[0], n * sizeof *y) == 0);
        CHECK(y[n / 2] > -1.0f * (float)ctx->size && y[n / 2] < 2.0f * (float)ctx->size); /* inputs in [-1, 2) */
        pthread_barrier_wait(&bar);
        free(x);
        free(y);
    }
    return 0;
}

/* Many small nonblocking operations, polled with test: requests are reused
 * from the free list; nothing may leak or mix up. */
static int churn_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    int bad = 0;
    for (int it = 0; it < 300; it++) {
        int v[2] = {it, ctx->rank}, r[2] = {-1, -1};
        struct plx_work *w;
        if (plx_iallreduce(ctx->comm, v, r, 2, PLX_I32, PLX_MAX, NULL, &w) != 0) {
            bad++;
            break;
        }
        int done = 0; /* test once (may or may not be done yet), then wait */
        bad += plx_work_test(w, &done) != 0;
        rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
        plx_work_free(w);
        bad += rc != 0 || r[0] != it || r[1] != ctx->size - 1;
        /* interleave p2p, whose requests share the free list */
        int peer = (ctx->rank + 1) % ctx->size, from = (ctx->rank + ctx->size - 1) % ctx->size, got = -1;
        struct plx_work *sw, *rw;
        if (plx_irecv(ctx->comm, &got, 1, PLX_I32, PLX_ANY_SOURCE, it, NULL, &rw) ||
            plx_isend(ctx->comm, &ctx->rank, 1, PLX_I32, peer, it, NULL, &sw)) {
            bad++;
            break;
        }
        bad += plx_work_wait(rw, PLX_TIMEOUT_DEFAULT) != 0 || got != from;
        bad += plx_work_wait(sw, PLX_TIMEOUT_DEFAULT) != 0;
        plx_work_free(rw);
        plx_work_free(sw);
    }
    CHECK(bad == 0);
    return 0;
}

int main(void)
{
    const char *const native[] = {NULL};
    run_ranks(3, "sim", native, 60000, chunked_fn, NULL);
    run_ranks(4, "sim", native, 60000, order_fn, NULL);
    pthread_barrier_init(&bar, NULL, 4);
    run_ranks(4, "sim", native, 60000, bits_fn, NULL);
    pthread_barrier_destroy(&bar);
    run_ranks(3, "sim", native, 60000, churn_fn, NULL);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all sim path checks passed\n");
    return failures != 0;
}
