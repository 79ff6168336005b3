/* One rank of a job under mpirun, through an MPI plugin, in a host that is
 * not linked to MPI (plexus loads the plugin, the plugin brings libmpi):
 * every collective x dtype x op, blocking (MPI's blocking calls) and
 * nonblocking (MPI_I* driven by test/wait), in place and out of place, at
 * counts 0, 1, P-1 and a non-multiple of P, 16 MiB for a subset; native
 * split; tagged and any-source p2p; a wait past its timeout; abort without
 * ending the job; plx_finalize ending MPI. Every element is compared with a
 * serial reference (tests/common/matrix.c).
 * usage: test_mpi BACKEND   (mpi-openmpi | mpi-mpich | mpi, the alias) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "matrix.h"
static const char *rank_prefix(void);
#define CHECK_WHO() rank_prefix()
#include "check.h"

static int P, me, failures;

static const char *rank_prefix(void)
{
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "rank %d: ", me);
    return buf;
}

/* The matrix at counts 0, 1, P-1 and 7P+3, blocking then nonblocking, each
 * followed by its 16 MiB cases. */
static void matrix(struct plx_comm *c)
{
    size_t counts[] = {0, 1, (size_t)P - 1, 7 * (size_t)P + 3};
    size_t big_bytes = (size_t)16 << 20;
    size_t cap = big_bytes + 64 * (size_t)P * 8; /* the big cases hold 16 MiB per buffer */
    char *sb = malloc(cap), *rb = malloc(cap);
    int cases = 0;
    long bad = 0;
    for (int nb = 0; nb < 2; nb++) {
        long w = matrix_run(c, nb, counts, sizeof counts / sizeof counts[0], NULL, NULL, &cases);
        if (w < 0) {
            failures++;
            goto out;
        }
        bad += w;
        /* 16 MiB buffers: f32 and bf16 (a user-defined MPI op) sums, f64 max, every collective */
        for (int coll = 0; coll < PLX_COLL_SEND; coll++)
            for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++)
                for (int op = 0; op < (matrix_is_reduction(coll) ? PLX_REDOP_COUNT : 1); op++) {
                    int big = (dt == PLX_F32 && op == PLX_SUM) || (dt == PLX_BF16 && op == PLX_SUM) ||
                              (dt == PLX_F64 && op == PLX_MAX);
                    if (!big || coll == PLX_COLL_BARRIER)
                        continue;
                    size_t ns, nr;
                    matrix_sizes(coll, 1, P, &ns, &nr);
                    /* the larger buffer is 16 MiB */
                    size_t n = big_bytes / plx_dtype_size(dt) / (ns > nr ? ns : nr);
                    struct matrix_case k = {coll, dt, op, n, nb, nb}; /* in place when nonblocking */
                    w = matrix_case(c, &k, sb, rb);
                    cases++;
                    if (w < 0) {
                        failures++;
                        goto out;
                    }
                    bad += w;
                }
    }
out:
    if (me == 0)
        printf("matrix: %d cases per rank, %ld wrong elements on rank 0\n", cases, bad);
    failures += bad != 0;
    free(sb);
    free(rb);
}

/* Native split: even and odd ranks, reversed by key; one rank stays out. */
static void split(struct plx_comm *c)
{
    int color = me % 2, out_rank = P > 2 ? P - 1 : -1;
    struct plx_comm *s = NULL;
    int rc = plx_comm_split(c, me == out_rank ? PLX_UNDEFINED : color, -me, &s);
    CHECK(rc == 0);
    if (me == out_rank) {
        CHECK(s == NULL);
        return;
    }
    if (!s)
        return;
    int members = 0, sum_want = 0;
    for (int r = 0; r < P; r++)
        if (r % 2 == color && r != out_rank) {
            members++;
            sum_want += r;
        }
    int above = 0; /* ranks of my color above me come first (key -rank) */
    for (int r = me + 1; r < P; r++)
        if (r % 2 == color && r != out_rank)
            above++;
    CHECK(plx_comm_size(s) == members);
    CHECK(plx_comm_rank(s) == above);
    int v = me, sum = -1;
    CHECK(plx_allreduce(s, &v, &sum, 1, PLX_I32, PLX_SUM) == 0);
    CHECK(sum == sum_want);
    CHECK(plx_comm_native(s, PLX_COLL_ALLREDUCE, PLX_F32, PLX_SUM) == 1);
    CHECK(plx_comm_destroy(s) == 0);
}

/* A ring of tagged messages, then rank 0 takes one message from everyone
 * with any-source. */
static void p2p(struct plx_comm *c)
{
    int next = (me + 1) % P, prev = (me + P - 1) % P;
    int out[4] = {me, me * 10, me * 100, 7}, in[4] = {-1, -1, -1, -1}, other[4] = {0};
    struct plx_work *ws, *wr, *wo;
    /* two tags in flight from the same peer, received in the opposite order */
    CHECK(plx_isend(c, out, 4, PLX_I32, next, 1000 + me, NULL, &ws) == 0);
    int decoy = -me;
    struct plx_work *wd;
    CHECK(plx_isend(c, &decoy, 1, PLX_I32, next, 5, NULL, &wd) == 0);
    CHECK(plx_irecv(c, in, 4, PLX_I32, prev, 1000 + prev, NULL, &wr) == 0);
    CHECK(plx_irecv(c, other, 1, PLX_I32, prev, 5, NULL, &wo) == 0);
    CHECK(plx_work_wait(wr, PLX_TIMEOUT_DEFAULT) == 0);
    CHECK(plx_work_wait(wo, PLX_TIMEOUT_DEFAULT) == 0);
    CHECK(plx_work_wait(ws, PLX_TIMEOUT_DEFAULT) == 0);
    CHECK(plx_work_wait(wd, PLX_TIMEOUT_DEFAULT) == 0);
    plx_work_free(ws);
    plx_work_free(wr);
    plx_work_free(wo);
    plx_work_free(wd);
    CHECK(in[0] == prev && in[1] == prev * 10 && in[2] == prev * 100 && in[3] == 7);
    CHECK(other[0] == -prev);
    if (me == 0) {
        unsigned seen = 0;
        for (int i = 1; i < P; i++) {
            int v = -1;
            CHECK(plx_recv(c, &v, 1, PLX_I32, PLX_ANY_SOURCE, 77) == 0);
            if (v > 0 && v < P)
                seen |= 1u << v;
        }
        CHECK(seen == ((1u << P) - 2));
    } else {
        CHECK(plx_send(c, &me, 1, PLX_I32, 0, 77) == 0);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A receive nobody has sent yet: its wait times out and stays pending;
 * once the message is sent it completes. */
static void timeout(struct plx_comm *c)
{
    int v = -1;
    struct plx_work *w = NULL;
    if (me == 0) {
        CHECK(plx_irecv(c, &v, 1, PLX_I32, 1, 4242, NULL, &w) == 0);
        double t0 = now_ms();
        int rc = plx_work_wait(w, 300);
        double dt = now_ms() - t0;
        CHECK(rc == PLX_ERR_TIMEOUT);
        CHECK(dt >= 290 && dt < 5000);
    }
    CHECK(plx_barrier(c) == 0);
    if (me == 1)
        CHECK(plx_send(c, &me, 1, PLX_I32, 0, 4242) == 0);
    if (me == 0) {
        CHECK(plx_work_wait(w, PLX_TIMEOUT_DEFAULT) == 0);
        CHECK(v == 1);
        plx_work_free(w);
    }
}

/* plx_comm_abort with abort_kills_job = false (the default): a pending wait
 * fails with ABORTED and the job goes on. */
static void abort_comm(void)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = getenv("TEST_BACKEND");
    o.name = "abortme";
    struct plx_comm *a = NULL;
    CHECK(plx_comm_init(&o, &a) == 0);
    if (!a)
        return;
    if (me == 0) {
        int v;
        struct plx_work *w = NULL;
        CHECK(plx_irecv(a, &v, 1, PLX_I32, 1, 9, NULL, &w) == 0);
        CHECK(plx_comm_abort(a) == 0);
        int rc = plx_work_wait(w, 5000);
        CHECK(rc == PLX_ERR_ABORTED);
        plx_work_free(w);
        int x = 1, y;
        CHECK(plx_allreduce(a, &x, &y, 1, PLX_I32, PLX_SUM) == PLX_ERR_ABORTED);
    }
    CHECK(plx_comm_destroy(a) == 0);
}

/* blocking_timeout = true: a blocking collective that a rank is late for
 * returns PLX_ERR_TIMEOUT after the communicator's timeout (MPI's own
 * blocking call would wait forever). The late ranks join afterwards, so the
 * abandoned request completes and nothing is left pending. */
static void blocking_timeout(struct plx_comm *world, const char *backend)
{
    char key[96];
    snprintf(key, sizeof key, "%s.blocking_timeout=true", backend);
    const char *ov[] = {key, NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.name = "bt";
    o.overrides = ov;
    o.timeout_ms = 500;
    struct plx_comm *c = NULL;
    CHECK(plx_comm_init(&o, &c) == 0);
    if (!c)
        return;
    /* static: MPI still owns rank 0's buffers after the timeout (an MPI
     * collective cannot be cancelled) until the late ranks complete it */
    static int x = 1, y = 0;
    if (me == 0) {
        double t0 = now_ms();
        CHECK(plx_allreduce(c, &x, &y, 1, PLX_I32, PLX_SUM) == PLX_ERR_TIMEOUT);
        double dt = now_ms() - t0;
        CHECK(dt >= 450 && dt < 10000);
    }
    CHECK(plx_barrier(world) == 0);
    if (me != 0) {
        struct plx_work *w = NULL;
        CHECK(plx_iallreduce(c, &x, &y, 1, PLX_I32, PLX_SUM, NULL, &w) == 0);
        CHECK(plx_work_wait(w, 30000) == 0);
        plx_work_free(w);
        CHECK(y == P);
    }
    CHECK(plx_barrier(world) == 0);
    CHECK(plx_comm_destroy(c) == 0);
}

/* With abort_kills_job = true, plx_comm_abort on rank 0 ends the whole job
 * (MPI_Abort) while the others wait in a receive nobody sends: the launcher
 * must exit nonzero long before their 60 s timeout (check_abort.sh). */
static int abort_kills(const char *backend)
{
    char kill[96];
    snprintf(kill, sizeof kill, "%s.abort_kills_job=true", backend);
    const char *ov[] = {kill, NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.overrides = ov;
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 3;
    }
    if (plx_comm_rank(c) == 0) {
        plx_comm_abort(c);
        fprintf(stderr, "rank 0: plx_comm_abort returned: MPI_Abort was not called\n");
        return 4;
    }
    int v;
    int rc = plx_recv(c, &v, 1, PLX_I32, 0, 1);
    fprintf(stderr, "rank %d: still running after the abort (recv: %s)\n", plx_comm_rank(c), plx_err_name(rc));
    return 5;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_mpi BACKEND [--abort-kills-job]\n");
        return 2;
    }
    if (argc > 2 && !strcmp(argv[2], "--abort-kills-job"))
        return abort_kills(argv[1]);
    setenv("TEST_BACKEND", argv[1], 1);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1]; /* rank, size, init: from the launcher's environment */
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL;
    int rc = plx_comm_init(&o, &c);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 1;
    }
    P = plx_comm_size(c);
    me = plx_comm_rank(c);
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    CHECK(launched && atoi(launched) == P);
    CHECK(!strcmp(plx_comm_backend(c), argv[1]));
    for (int coll = 0; coll < PLX_COLL_SEND; coll++) /* everything runs in MPI */
        CHECK(plx_comm_native(c, coll, PLX_BF16, PLX_MIN) == 1);
    matrix(c);
    split(c);
    p2p(c);
    if (P >= 2)
        timeout(c);
    abort_comm();
    if (P >= 2)
        blocking_timeout(c, argv[1]);
    int one = 1, total = 0; /* the world communicator is untouched by the abort */
    CHECK(plx_allreduce(c, &one, &total, 1, PLX_I32, PLX_SUM) == 0);
    CHECK(total == P);
    CHECK(plx_comm_destroy(c) == 0);
    CHECK(plx_finalize() == 0); /* plexus initialised MPI: this finalizes it, once */
    CHECK(plx_finalize() == 0);
    if (failures)
        fprintf(stderr, "rank %d: %d failures\n", me, failures);
    else if (me == 0)
        printf("%s: %d ranks: all checks passed\n", argv[1], P);
    return failures ? 1 : 0;
}
