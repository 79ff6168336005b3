/* test_rpc - calls, errors, timeouts and reference counting of RRefs
 * across 4 ranks (sim threads with --ranks 4, or tcp processes under
 * plexus-run).
 *
 * Calls: echo of 8 B and 256 KiB to a neighbour and to itself, async to
 * every rank; a handler's error comes back with its code and message; an
 * unknown handler; a handler that tries to block on a call; a call that
 * outlives its timeout, and a remote() that does (its value must not stay).
 * RRefs: rank 1 creates a value on rank 2 and forks it to ranks 0 and 3;
 * rank 0 forks its copy on to rank 3 again (a forwarded forward); rank 0
 * owns a value of its own that rank 1 holds. Holders fetch with to_here,
 * the creator releases first, and the value must survive every release but
 * the last; after plx_rpc_shutdown every rank's table must be empty.
 * Timeouts: PLX_TIMEOUT_INFINITE and PLX_TIMEOUT_DEFAULT mean what they
 * mean everywhere in plexus, and a nonsense agent timeout is refused. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plexus/rpc.h"

/* The RRefs this rank was handed (by the "hold" handler). */
struct held {
    pthread_mutex_t mu;
    struct plx_rref *r[16];
    int n;
    struct plx_rpc *rpc;
};

static int h_echo(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)caller, (void)err, (void)cap;
    *res = len ? malloc(len) : NULL;
    if (len)
        memcpy(*res, a, len);
    *rl = len;
    return 0;
}

static int h_fail(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)res, (void)rl;
    snprintf(err, cap, "bad input '%.*s' from rank %d", (int)len, (const char *)a, caller);
    return PLX_ERR_INVALID_ARG;
}

static int h_slow(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)caller, (void)a, (void)len, (void)res, (void)rl, (void)err, (void)cap;
    usleep(400000);
    return 0;
}

/* The value kept by remote(): the argument with "!" appended. */
static int h_make(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)caller, (void)err, (void)cap;
    char *v = malloc(len + 1);
    memcpy(v, a, len);
    v[len] = '!';
    *res = v;
    *rl = len + 1;
    return 0;
}

static int h_slowmake(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err,
                      size_t cap)
{
    usleep(400000);
    return h_make(ctx, caller, a, len, res, rl, err, cap);
}

static int h_hold(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)caller, (void)res, (void)rl;
    struct held *h = ctx;
    struct plx_rref *r;
    int rc = plx_rref_from_wire(h->rpc, a, len, &r);
    if (rc) {
        snprintf(err, cap, "%s", plx_last_error());
        return rc;
    }
    pthread_mutex_lock(&h->mu);
    h->r[h->n++] = r;
    pthread_mutex_unlock(&h->mu);
    return 0;
}

#define CHECK(c, ...)                                                                                      \
    do {                                                                                                   \
        if (!(c)) {                                                                                        \
            fprintf(stderr, "rank %d: line %d: %s: ", me, __LINE__, #c);                                  \
            fprintf(stderr, __VA_ARGS__);                                                                  \
            fprintf(stderr, " (last error: %s)\n", plx_last_error());                                      \
            bad++;                                                                                         \
        }                                                                                                  \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A handler that tries to block on another call: refused, and the refusal
 * travels back to its caller. */
static int h_nested(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)a, (void)len, (void)res, (void)rl;
    struct held *h = ctx;
    int rc = plx_rpc_sync(h->rpc, caller, "echo", NULL, 0, NULL, NULL, -1);
    snprintf(err, cap, "%s", plx_last_error());
    return rc ? rc : PLX_ERR_INTERNAL;
}

/* How many references the handler has stored (it runs on another thread). */
static int held_count(struct held *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* Send a fork of r to rank dst, which keeps it. */
static int give(struct plx_rpc *rpc, const struct plx_rref *r, int dst)
{
    unsigned char wire[PLX_RREF_WIRE_BYTES];
    int rc = plx_rref_fork(rpc, r, wire, -1);
    return rc ? rc : plx_rpc_sync(rpc, dst, "hold", wire, sizeof wire, NULL, NULL, -1);
}

static int expect_value(struct plx_rpc *rpc, const struct plx_rref *r, const char *want)
{
    void *v = NULL;
    size_t n = 0;
    int rc = plx_rref_to_here(rpc, r, &v, &n, -1);
    int ok = !rc && n == strlen(want) && !memcmp(v, want, n);
    free(v);
    return ok;
}

/* plexus's one timeout rule on the agent: PLX_TIMEOUT_INFINITE waits past
 * the agent's default, PLX_TIMEOUT_DEFAULT takes it, and an agent timeout
 * that is neither milliseconds nor one of the two is refused everywhere. */
static int timeout_rule(struct plx_comm *c, int me)
{
    int bad = 0, rc;
    struct plx_rpc_options o;
    plx_rpc_options_init(&o);
    o.timeout_ms = -5;
    struct plx_rpc *rpc = NULL;
    rc = plx_rpc_create(c, &o, &rpc);
    CHECK(rc == PLX_ERR_INVALID_ARG && !rpc && strstr(plx_last_error(), "timeout_ms -5"), "agent timeout -5: %s",
          plx_err_name(rc));
    if (rpc)
        plx_rpc_destroy(rpc);
    o.timeout_ms = 100; /* below the slow handler's 400 ms */
    if ((rc = plx_rpc_create(c, &o, &rpc))) {
        fprintf(stderr, "rank %d: plx_rpc_create: %s\n", me, plx_last_error());
        return 1;
    }
    plx_rpc_register(rpc, "slow", h_slow, NULL);
    plx_barrier(c);
    if (me == 0) {
        rc = plx_rpc_sync(rpc, 1, "slow", NULL, 0, NULL, NULL, PLX_TIMEOUT_INFINITE);
        CHECK(!rc, "PLX_TIMEOUT_INFINITE outlives the agent's 100 ms: %s (%s)", plx_err_name(rc), plx_last_error());
        double t0 = now_ms();
        rc = plx_rpc_sync(rpc, 1, "slow", NULL, 0, NULL, NULL, PLX_TIMEOUT_DEFAULT);
        double ms = now_ms() - t0;
        CHECK(rc == PLX_ERR_TIMEOUT && ms < 350, "PLX_TIMEOUT_DEFAULT is the agent's 100 ms: %s after %.0f ms",
              plx_err_name(rc), ms);
    }
    CHECK(!plx_rpc_shutdown(rpc, 20000), "shutdown of the 100 ms agent: %s", plx_last_error());
    plx_rpc_destroy(rpc);
    return bad;
}

static int run(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c), bad = 0, rc;
    if (P != 4) {
        fprintf(stderr, "test_rpc needs 4 ranks\n");
        return 1;
    }
    struct held held = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct plx_rpc_options o;
    plx_rpc_options_init(&o);
    o.timeout_ms = 20000;
    struct plx_rpc *rpc;
    if ((rc = plx_rpc_create(c, &o, &rpc))) {
        fprintf(stderr, "rank %d: plx_rpc_create: %s\n", me, plx_last_error());
        return 1;
    }
    held.rpc = rpc;
    plx_rpc_register(rpc, "echo", h_echo, NULL);
    plx_rpc_register(rpc, "fail", h_fail, NULL);
    plx_rpc_register(rpc, "slow", h_slow, NULL);
    plx_rpc_register(rpc, "make", h_make, NULL);
    plx_rpc_register(rpc, "hold", h_hold, &held);
    plx_rpc_register(rpc, "nested", h_nested, &held);
    plx_rpc_register(rpc, "slowmake", h_slowmake, NULL);
    plx_barrier(c); /* every handler registered everywhere */

    /* ---- calls ---- */
    size_t big = 256 << 10;
    unsigned char *msg = malloc(big);
    for (size_t i = 0; i < big; i++)
        msg[i] = (unsigned char)(i * 31 + (size_t)me);
    size_t sizes[2] = {8, big};
    int targets[2] = {(me + 1) % P, me};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 2; t++) {
            void *out = NULL;
            size_t n = 0;
            rc = plx_rpc_sync(rpc, targets[t], "echo", msg, sizes[k], &out, &n, -1);
            CHECK(!rc && n == sizes[k] && !memcmp(out, msg, n), "echo of %zu bytes to rank %d", sizes[k], targets[t]);
            free(out);
        }
    struct plx_rpc_future *fut[4];
    for (int d = 0; d < P; d++)
        CHECK(!plx_rpc_async(rpc, d, "echo", &d, sizeof d, -1, &fut[d]), "async to %d", d);
    for (int d = 0; d < P; d++) {
        void *out = NULL;
        size_t n = 0;
        rc = plx_rpc_wait(fut[d], &out, &n);
        CHECK(!rc && n == sizeof d && *(int *)out == d, "async echo from rank %d", d);
        free(out);
    }
    /* A handler's error, with its code and message. */
    rc = plx_rpc_sync(rpc, (me + 2) % P, "fail", "xyz", 3, NULL, NULL, -1);
    CHECK(rc == PLX_ERR_INVALID_ARG && strstr(plx_last_error(), "bad input 'xyz'") &&
              strstr(plx_last_error(), "'fail'"),
          "handler error: %s", plx_err_name(rc));
    rc = plx_rpc_sync(rpc, (me + 1) % P, "nope", NULL, 0, NULL, NULL, -1);
    CHECK(rc == PLX_ERR_NOT_FOUND && strstr(plx_last_error(), "no handler 'nope'"), "unknown handler: %s",
          plx_err_name(rc));
    rc = plx_rpc_sync(rpc, (me + 3) % P, "nested", NULL, 0, NULL, NULL, -1);
    CHECK(rc == PLX_ERR_INVALID_USAGE && strstr(plx_last_error(), "must not block"), "a handler blocking: %s",
          plx_err_name(rc));
    if (me == 0) { /* rank 1's handler takes 400 ms; the call allows 50 */
        double t0 = now_ms();
        rc = plx_rpc_sync(rpc, 1, "slow", NULL, 0, NULL, NULL, 50);
        double ms = now_ms() - t0;
        CHECK(rc == PLX_ERR_TIMEOUT && ms < 350 && strstr(plx_last_error(), "'slow' to rank 1"), "timeout after %.0f ms",
              ms);
    }
    if (me == 3) { /* a remote() whose caller gives up: the owner must not keep its value */
        struct plx_rref *r = NULL;
        rc = plx_rpc_remote(rpc, 1, "slowmake", "x", 1, 50, &r);
        CHECK(rc == PLX_ERR_TIMEOUT && !r, "remote that times out: %s", plx_err_name(rc));
    }
    free(msg);
    plx_barrier(c);

    /* ---- RRefs ---- */
    struct plx_rref *mine = NULL;
    if (me == 1) {
        struct plx_rref *r;
        CHECK(!plx_rpc_remote(rpc, 2, "make", "abc", 3, -1, &r), "remote on rank 2");
        CHECK(plx_rref_owner(r) == 2, "owner %d", plx_rref_owner(r));
        CHECK(expect_value(rpc, r, "abc!"), "to_here from the creator");
        CHECK(!give(rpc, r, 0) && !give(rpc, r, 3), "forks to ranks 0 and 3");
        CHECK(!plx_rref_release(rpc, r), "creator's release");
    }
    if (me == 0) { /* a value owned by the caller itself, held elsewhere */
        CHECK(!plx_rpc_remote(rpc, 0, "make", "self", 4, -1, &mine), "remote on itself");
        CHECK(!give(rpc, mine, 1), "fork of an own value to rank 1");
        CHECK(!plx_rref_release(rpc, mine), "release of the own reference");
        mine = NULL;
    }
    plx_barrier(c);
    /* Ranks 0 and 3 hold rank 2's value; rank 1 holds rank 0's. The
     * creator's release must not have freed rank 2's value. */
    if (me == 2)
        CHECK(plx_rpc_owned_count(rpc) == 1, "owner keeps the value while others hold it: %zu",
              plx_rpc_owned_count(rpc));
    if (me == 0 || me == 3) {
        CHECK(held_count(&held) == 1 && expect_value(rpc, held.r[0], "abc!"), "a third rank's to_here");
    }
    if (me == 1)
        CHECK(held_count(&held) == 1 && expect_value(rpc, held.r[0], "self!"), "to_here of rank 0's own value");
    plx_barrier(c);
    if (me == 0) { /* forward the forwarded reference once more, then drop ours */
        CHECK(!give(rpc, held.r[0], 3), "a fork of a fork");
        CHECK(!plx_rref_release(rpc, held.r[0]), "release by rank 0");
        held.n = 0;
        /* Same peer, same order: the release is served before this echo. */
        CHECK(!plx_rpc_sync(rpc, 2, "echo", NULL, 0, NULL, NULL, -1), "echo after release");
    }
    plx_barrier(c);
    if (me == 3) { /* two references now: both must fetch */
        CHECK(held_count(&held) == 2 && expect_value(rpc, held.r[0], "abc!") && expect_value(rpc, held.r[1], "abc!"),
              "rank 3 holds %d references", held_count(&held));
        CHECK(!plx_rref_release(rpc, held.r[0]), "release 1 of 2");
        CHECK(!plx_rpc_sync(rpc, 2, "echo", NULL, 0, NULL, NULL, -1), "echo after release");
        CHECK(expect_value(rpc, held.r[1], "abc!"), "the last reference still fetches");
        CHECK(!plx_rref_release(rpc, held.r[1]), "the last release");
        held.n = 0;
        CHECK(!plx_rpc_sync(rpc, 2, "echo", NULL, 0, NULL, NULL, -1), "echo after release");
    }
    if (me == 1) { /* keep rank 0's value until shutdown: released just before */
        CHECK(!plx_rref_release(rpc, held.r[0]), "rank 1's release");
        held.n = 0;
    }
    plx_barrier(c);
    if (me == 2)
        CHECK(plx_rpc_owned_count(rpc) == 0, "rank 2 freed its value after the last release: %zu left",
              plx_rpc_owned_count(rpc));
    /* Shutdown waits for every rank's outstanding calls: rank 0 leaves a
     * 400 ms call to rank 2 unwaited; it must be answered when shutdown
     * returns. */
    struct plx_rpc_future *pending = NULL;
    if (me == 0)
        CHECK(!plx_rpc_async(rpc, 2, "slow", NULL, 0, -1, &pending), "async slow");
    double t0 = now_ms();
    rc = plx_rpc_shutdown(rpc, 20000);
    CHECK(!rc, "shutdown");
    if (me == 0) {
        int done = 0;
        plx_rpc_test(pending, &done);
        CHECK(done && now_ms() - t0 > 300, "shutdown returned after %.0f ms with the call %s", now_ms() - t0,
              done ? "answered" : "still pending");
        CHECK(!plx_rpc_wait(pending, NULL, NULL), "the call shutdown waited for");
    }
    CHECK(plx_rpc_owned_count(rpc) == 0, "after shutdown rank %d still owns %zu values", me, plx_rpc_owned_count(rpc));
    rc = plx_rpc_sync(rpc, (me + 1) % P, "echo", NULL, 0, NULL, NULL, -1);
    CHECK(rc == PLX_ERR_INVALID_USAGE, "a call after shutdown is refused: %s", plx_err_name(rc));
    plx_rpc_destroy(rpc);
    bad += timeout_rule(c, me);
    int total = 0;
    if (plx_allreduce(c, &bad, &total, 1, PLX_I32, PLX_SUM))
        total = 1;
    if (me == 0)
        printf("%s\n", total ? "FAIL" : "ok: calls, errors, timeout; every owner's table empty after shutdown");
    return total != 0;
}

static int nranks;
static char world[64];
struct targ {
    int rank, status;
};

static void *rank_main(void *p)
{
    struct targ *a = p;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.rank = a->rank;
    o.size = nranks;
    o.init = world;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        a->status = 2;
        return NULL;
    }
    a->status = run(c);
    plx_comm_destroy(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--ranks"))
        nranks = atoi(argv[2]);
    if (nranks > 0 && nranks <= 16) {
        snprintf(world, sizeof world, "mem://rpc-%d", (int)getpid());
        pthread_t th[16];
        struct targ a[16];
        for (int i = 0; i < nranks; i++) {
            a[i] = (struct targ){i, 0};
            pthread_create(&th[i], NULL, rank_main, &a[i]);
        }
        int st = 0;
        for (int i = 0; i < nranks; i++) {
            pthread_join(th[i], NULL);
            st = a[i].status > st ? a[i].status : st;
        }
        return st;
    }
    struct plx_comm *c;
    if (plx_comm_init(NULL, &c)) {
        fprintf(stderr, "test_rpc: %s\n", plx_last_error());
        return 2;
    }
    int st = run(c);
    plx_comm_destroy(c);
    plx_finalize();
    return st;
}
