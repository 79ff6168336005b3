/* Prepared collectives (plx_coll_prepare): each run reads the buffers as
 * they are then and writes the right result; runs match the other ranks'
 * plain calls in issue order; a started run completes through its work;
 * bad arguments fail at preparation with the call's own error; a prepared
 * collective outlives its communicator only as a handle that refuses to
 * run; an aborted communicator fails its runs.
 *
 * Ranks as threads on the backend named: sim and tcp take the core's path
 * each run, shm its own prepared call (ABI 1.12), also when the run finds
 * a nonblocking collective queued before it. The mpi and shm suites check
 * every collective through the backends' prepared calls with plexus-bench
 * --prepared.
 *
 * usage: test_prepared BACKEND P */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"

enum { RUNS = 5, N = 37 };

static int failures;

/* Run r of rank i contributes i + r + k to element k: the sum is known. */
static double sum_of(int P, int r, size_t k)
{
    return (double)P * (P - 1) / 2 + (double)P * (r + (double)k);
}

static void allreduce_runs(struct plx_comm *c, int me, int P)
{
    float in[N] = {0}, out[N] = {0};
    struct plx_prepared *p = NULL;
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLREDUCE, in, out, N, PLX_F32, PLX_SUM, 0, NULL, &p) == 0);
    for (int r = 0; r < RUNS && p; r++) {
        for (size_t k = 0; k < N; k++) {
            in[k] = (float)(me + r + (int)k);
            out[k] = -1;
        }
        /* Rank 0 makes every other run a plain call: the two kinds match. */
        int rc = me == 0 && r % 2 ? plx_allreduce(c, in, out, N, PLX_F32, PLX_SUM) : plx_prepared_run(p);
        CHECK(rc == 0);
        int wrong = 0;
        for (size_t k = 0; k < N; k++)
            wrong += out[k] != (float)sum_of(P, r, k);
        CHECK(wrong == 0);
    }
    plx_prepared_free(p);
}

/* Two prepared collectives in alternation, one of them in place and
 * rooted, the other started and waited for. */
static void alternate(struct plx_comm *c, int me, int P)
{
    int64_t buf[N] = {0}, in[N] = {0}, out[N * 8] = {0};
    struct plx_prepared *bc = NULL, *ag = NULL;
    int root = P - 1;
    CHECK(plx_coll_prepare(c, PLX_COLL_BROADCAST, NULL, buf, N, PLX_I64, 0, root, NULL, &bc) == 0);
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLGATHER, in, out, N, PLX_I64, 0, 0, NULL, &ag) == 0);
    CHECK(P <= 8);
    for (int r = 0; r < RUNS && bc && ag; r++) {
        for (size_t k = 0; k < N; k++) {
            buf[k] = me == root ? 1000 * r + (int64_t)k : -1;
            in[k] = 100 * me + r;
        }
        CHECK(plx_prepared_run(bc) == 0);
        struct plx_work *w = NULL;
        CHECK(plx_prepared_start(ag, &w) == 0);
        CHECK(w && plx_work_wait(w, PLX_TIMEOUT_DEFAULT) == 0);
        plx_work_free(w);
        int wrong = 0;
        for (size_t k = 0; k < N; k++)
            wrong += buf[k] != 1000 * r + (int64_t)k;
        for (int j = 0; j < P; j++)
            for (size_t k = 0; k < N; k++)
                wrong += out[(size_t)j * N + k] != 100 * j + r;
        CHECK(wrong == 0);
    }
    plx_prepared_free(bc);
    plx_prepared_free(ag);
}

/* A run issued while a nonblocking collective is still in flight: it waits
 * for its turn (issue order), and both results are right. */
static void behind_nonblocking(struct plx_comm *c, int me, int P)
{
    enum { BIG = 1 << 14 };
    static _Thread_local float big[BIG];
    int32_t in[N] = {0}, out[N] = {0};
    struct plx_prepared *p = NULL;
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLREDUCE, in, out, N, PLX_I32, PLX_MAX, 0, NULL, &p) == 0);
    for (int r = 0; r < RUNS && p; r++) {
        for (size_t k = 0; k < BIG; k++)
            big[k] = (float)(me + 1);
        for (size_t k = 0; k < N; k++)
            in[k] = me * 10 + r;
        struct plx_work *w = NULL;
        CHECK(plx_iallreduce(c, big, big, BIG, PLX_F32, PLX_SUM, NULL, &w) == 0);
        CHECK(plx_prepared_run(p) == 0);
        CHECK(w && plx_work_wait(w, PLX_TIMEOUT_DEFAULT) == 0);
        plx_work_free(w);
        int wrong = 0;
        for (size_t k = 0; k < BIG; k++)
            wrong += big[k] != (float)P * (P + 1) / 2;
        for (size_t k = 0; k < N; k++)
            wrong += out[k] != (P - 1) * 10 + r;
        CHECK(wrong == 0);
    }
    plx_prepared_free(p);
}

/* Refused at preparation, each with the call's own reason. */
static void bad_arguments(struct plx_comm *c)
{
    float x[4] = {0};
    struct plx_prepared *p = (struct plx_prepared *)&p; /* must come back NULL */
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLGATHERV, x, x, 1, PLX_F32, 0, 0, NULL, &p) == PLX_ERR_INVALID_ARG);
    CHECK(p == NULL && strstr(plx_last_error(), "allgatherv cannot be prepared"));
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLREDUCE, x, x, 4, 99, PLX_SUM, 0, NULL, &p) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "invalid dtype 99"));
    CHECK(plx_coll_prepare(c, PLX_COLL_REDUCE, x, x, 4, PLX_F32, PLX_SUM, plx_comm_size(c), NULL, &p) ==
          PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "is not a rank"));
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLREDUCE, NULL, x, 4, PLX_F32, PLX_SUM, 0, NULL, &p) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "send buffer is NULL"));
    CHECK(plx_coll_prepare(c, PLX_COLL_SEND, x, x, 4, PLX_F32, PLX_SUM, 0, NULL, &p) == PLX_ERR_INVALID_ARG);
    CHECK(plx_coll_prepare(NULL, PLX_COLL_ALLREDUCE, x, x, 4, PLX_F32, PLX_SUM, 0, NULL, &p) == PLX_ERR_INVALID_ARG);
    CHECK(plx_coll_prepare(c, PLX_COLL_ALLREDUCE, x, x, 4, PLX_F32, PLX_SUM, 0, NULL, NULL) == PLX_ERR_INVALID_ARG);
    CHECK(plx_prepared_run(NULL) == PLX_ERR_INVALID_ARG);
    plx_prepared_free(NULL);
}

/* A communicator split from c, and an in-place allreduce of x[2] prepared
 * on it (NULL, child destroyed, if either fails). */
static struct plx_prepared *split_prepared(struct plx_comm *c, float *x, struct plx_comm **child)
{
    struct plx_prepared *p = NULL;
    CHECK(plx_comm_split(c, 0, 0, child) == 0);
    if (*child)
        CHECK(plx_coll_prepare(*child, PLX_COLL_ALLREDUCE, x, x, 2, PLX_F32, PLX_MAX, 0, NULL, &p) == 0);
    if (*child && !p)
        plx_comm_destroy(*child);
    return p;
}

/* Destroyed under a prepared collective: its runs are refused, and it is
 * freed afterwards (ASan: nothing of the communicator is touched). */
static void outlives(struct plx_comm *c)
{
    float x[2] = {1, 2};
    struct plx_comm *child = NULL;
    struct plx_prepared *p = split_prepared(c, x, &child);
    if (!p)
        return;
    CHECK(plx_prepared_run(p) == 0);
    CHECK(plx_comm_destroy(child) == 0);
    CHECK(plx_prepared_run(p) == PLX_ERR_INVALID_USAGE);
    CHECK(strstr(plx_last_error(), "communicator was destroyed"));
    struct plx_work *w = (struct plx_work *)&w;
    CHECK(plx_prepared_start(p, &w) == PLX_ERR_INVALID_USAGE && w == NULL);
    plx_prepared_free(p);
}

/* An aborted communicator fails the runs at once. */
static void aborts(struct plx_comm *c)
{
    float x[2] = {1, 2};
    struct plx_comm *child = NULL;
    struct plx_prepared *p = split_prepared(c, x, &child);
    if (!p)
        return;
    CHECK(plx_comm_abort(child) == 0);
    CHECK(plx_prepared_run(p) == PLX_ERR_ABORTED);
    plx_prepared_free(p); /* before the destroy this time */
    plx_comm_destroy(child);
}

static int rank_main(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    struct plx_comm *c = ctx->comm;
    allreduce_runs(c, ctx->rank, ctx->size);
    alternate(c, ctx->rank, ctx->size);
    behind_nonblocking(c, ctx->rank, ctx->size);
    bad_arguments(c);
    /* Still in step after the refusals (nothing was sent for them). */
    allreduce_runs(c, ctx->rank, ctx->size);
    outlives(c);
    aborts(c);
    CHECK(plx_barrier(c) == 0);
    return 0;
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "sim";
    int P = argc > 2 ? atoi(argv[2]) : 3;
    run_ranks(P, backend, NULL, 20000, rank_main, NULL);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
