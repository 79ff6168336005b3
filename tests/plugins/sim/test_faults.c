/* Faults on the sim backend: a rank that never arrives, a failure injected
 * mid-collective, a slow rank, abort from another thread, refusal of work
 * after an error, split, and argument errors. Nothing may hang: every wait
 * is bounded and its duration asserted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ranks.h"

static int failures;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define TIMEOUT_MS 1000
#define MARGIN_MS 4000 /* a busy 2-core machine may run late, never by seconds more */

static int absent_fn(struct rank_ctx *ctx, int rc)
{
    (void)ctx;
    return rc != 0; /* every rank must fail */
}

static void test_absent(void)
{
    const char *ov[] = {"sim.absent_rank=2", NULL};
    double t0 = now_ms();
    int worst = run_ranks(3, "sim", ov, TIMEOUT_MS, absent_fn, NULL);
    double ms = now_ms() - t0;
    CHECK(worst == 1);
    CHECK(ms >= TIMEOUT_MS * 0.9 && ms < TIMEOUT_MS + MARGIN_MS);
}

/* Ranks 0 and 1 must time out naming rank 2; rank 2 says it is absent. */
static int absent_check_fn(struct rank_ctx *ctx, int rc)
{
    if (ctx->rank == 2) {
        CHECK(rc == PLX_ERR_UNAVAILABLE);
        CHECK(strstr(plx_last_error(), "rank 2 is configured absent") != NULL);
    } else {
        CHECK(rc == PLX_ERR_TIMEOUT);
        CHECK(strstr(plx_last_error(), "rank(s) 2") != NULL);
    }
    return 0;
}

static int inject_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    int v[64], r[64];
    for (int i = 0; i < 64; i++)
        v[i] = ctx->rank;
    CHECK(plx_allreduce(ctx->comm, v, r, 64, PLX_I32, PLX_SUM) == 0);
    double t0 = now_ms();
    rc = plx_allreduce(ctx->comm, v, r, 64, PLX_I32, PLX_SUM);
    double ms = now_ms() - t0;
    if (ctx->rank == 1) {
        CHECK(rc == PLX_ERR_INTERNAL);
        CHECK(strstr(plx_last_error(), "injected failure") != NULL);
    } else {
        CHECK(rc == PLX_ERR_TIMEOUT);
        CHECK(strstr(plx_last_error(), "rank(s) 1") != NULL || strstr(plx_last_error(), "rank 1") != NULL);
        CHECK(ms < TIMEOUT_MS + MARGIN_MS);
    }
    /* The communicator refuses new work, with a clear message. */
    rc = plx_allreduce(ctx->comm, v, r, 64, PLX_I32, PLX_SUM);
    CHECK(rc == PLX_ERR_INVALID_USAGE);
    CHECK(strstr(plx_last_error(), "unusable after an earlier error") != NULL);
    return 0;
}

static int delay_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    double v = 1, r = 0;
    if (rc == 0) {
        CHECK(plx_allreduce(ctx->comm, &v, &r, 1, PLX_F64, PLX_SUM) == 0);
        CHECK(r == ctx->size);
    }
    return 0;
}

struct abort_arg {
    struct plx_comm *comm;
};

static void *aborter(void *p)
{
    struct abort_arg *a = p;
    usleep(200 * 1000);
    plx_comm_abort(a->comm);
    return NULL;
}

/* Rank 1 never joins the allreduce; rank 0's wait ends by abort, not timeout. */
static int abort_fn(struct rank_ctx *ctx, int rc)
{
    static volatile int released;
    CHECK(rc == 0);
    if (rc)
        return 1;
    if (ctx->rank == 1) {
        while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
            usleep(10000);
        return 0;
    }
    pthread_t t;
    struct abort_arg a = {ctx->comm};
    pthread_create(&t, NULL, aborter, &a);
    int v = 1, r;
    double t0 = now_ms();
    rc = plx_allreduce(ctx->comm, &v, &r, 1, PLX_I32, PLX_SUM);
    double ms = now_ms() - t0;
    pthread_join(t, NULL);
    __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
    CHECK(rc == PLX_ERR_ABORTED);
    CHECK(ms < 3000); /* the timeout is 20 s: only abort can end it this soon */
    CHECK(plx_barrier(ctx->comm) == PLX_ERR_ABORTED);
    return 0;
}

static int split_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    struct plx_comm *sub = NULL;
    int color = ctx->rank % 2;
    rc = plx_comm_split(ctx->comm, ctx->rank == 4 ? PLX_UNDEFINED : color, -ctx->rank, &sub);
    CHECK(rc == 0);
    if (ctx->rank == 4) {
        CHECK(sub == NULL);
        return 0;
    }
    if (!sub)
        return 1;
    /* key = -rank: the new order is reversed */
    int members = color == 0 ? 2 : 2; /* ranks {0,2} (4 sits out) and {1,3} */
    CHECK(plx_comm_size(sub) == members);
    CHECK(plx_comm_rank(sub) == (ctx->rank < 2 ? 1 : 0));
    int v = ctx->rank, sum = -1;
    CHECK(plx_allreduce(sub, &v, &sum, 1, PLX_I32, PLX_SUM) == 0);
    CHECK(sum == (color == 0 ? 0 + 2 : 1 + 3));
    CHECK(strstr(plx_comm_name(sub), "/split0.") != NULL);
    plx_comm_destroy(sub);
    return 0;
}

static int args_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    int v = 0, r;
    CHECK(plx_allreduce(ctx->comm, &v, &r, 1, 42, PLX_SUM) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "invalid dtype 42") != NULL);
    CHECK(plx_allreduce(ctx->comm, &v, &r, 1, PLX_I32, 9) == PLX_ERR_INVALID_ARG);
    CHECK(plx_broadcast(ctx->comm, &v, 1, PLX_I32, 5) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "root 5 is not a rank of a communicator of size 2") != NULL);
    CHECK(plx_allreduce(ctx->comm, NULL, &r, 1, PLX_I32, PLX_SUM) == PLX_ERR_INVALID_ARG);
    CHECK(plx_send(ctx->comm, &v, 1, PLX_I32, 7, 0) == PLX_ERR_INVALID_ARG);
    CHECK(plx_send(ctx->comm, &v, 1, PLX_I32, 0, -3) == PLX_ERR_INVALID_ARG);
    struct plx_op_options o = {.struct_size = sizeof o, .mem_kind = PLX_MEM_CUDA, .timeout_ms = -1};
    struct plx_work *w = NULL;
    CHECK(plx_iallreduce(ctx->comm, &v, &r, 1, PLX_I32, PLX_SUM, &o, &w) == PLX_ERR_UNSUPPORTED);
    CHECK(strstr(plx_last_error(), "backend 'sim' cannot take CUDA memory") != NULL);
    /* Bad arguments do not break the communicator. */
    v = ctx->rank + 1;
    CHECK(plx_allreduce(ctx->comm, &v, &r, 1, PLX_I32, PLX_SUM) == 0 && r == 3);
    /* Point-to-point with tags, FIFO per (peer, tag). */
    if (ctx->rank == 0) {
        int a = 11, b = 22;
        CHECK(plx_send(ctx->comm, &a, 1, PLX_I32, 1, 5) == 0);
        CHECK(plx_send(ctx->comm, &b, 1, PLX_I32, 1, 5) == 0);
    } else {
        int a = 0, b = 0;
        CHECK(plx_recv(ctx->comm, &a, 1, PLX_I32, 0, 5) == 0);
        CHECK(plx_recv(ctx->comm, &b, 1, PLX_I32, PLX_ANY_SOURCE, 5) == 0);
        CHECK(a == 11 && b == 22);
    }
    return 0;
}

int main(void)
{
    test_absent();
    {
        const char *ov[] = {"sim.absent_rank=2", NULL};
        run_ranks(3, "sim", ov, TIMEOUT_MS, absent_check_fn, NULL);
    }
    {
        const char *ov[] = {"sim.fail_op=allreduce", "sim.fail_after=2", "sim.fail_rank=1", NULL};
        run_ranks(3, "sim", ov, TIMEOUT_MS, inject_fn, NULL);
    }
    {
        /* the same failure while the core's generic algorithm runs over p2p */
        const char *ov[] = {"sim.native_collectives=false", "sim.fail_op=send", "sim.fail_after=3",
                            "sim.fail_rank=1", NULL};
        run_ranks(3, "sim", ov, TIMEOUT_MS, inject_fn, NULL);
    }
    {
        const char *ov[] = {"sim.delay_rank=1", "sim.delay_ms=200", NULL};
        run_ranks(3, "sim", ov, 5000, delay_fn, NULL);
    }
    run_ranks(2, "sim", NULL, 20000, abort_fn, NULL);
    {
        const char *ov[] = {"sim.native_collectives=false", NULL};
        run_ranks(2, "sim", ov, 20000, abort_fn, NULL);
    }
    run_ranks(5, "sim", NULL, 10000, split_fn, NULL);
    run_ranks(2, "sim", NULL, 10000, args_fn, NULL);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all fault checks passed\n");
    return failures != 0;
}
