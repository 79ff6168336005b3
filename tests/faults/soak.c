/* soak.c - one rank of the soak test (scripts/soak.sh starts them with
 * plexus-run): mixed collectives and point-to-point of random sizes, dtypes
 * and ops, every result checked, for SECONDS seconds.
 *
 * Every rank draws the same sequence from one seed, so they agree on each
 * operation; every 32 operations rank 0 broadcasts whether to go on. The
 * resident memory (VmRSS) is read after a warm-up that touches the largest
 * size of every kind (so buffers and scratch exist), and at the end; growth
 * beyond 10% + 8 MiB fails the run, as does any error or wrong element.
 *
 * Usage: soak_rank SECONDS [SEED] (RANK, WORLD_SIZE, ... from the launcher). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_values.h"
#include "plexus/plexus.h"

#define MAX_COUNT (1u << 18) /* elements per rank; with 8-byte types and 4 ranks, 8 MiB buffers */
#define RSS_SLACK_KIB (8 * 1024)

enum kind { K_ALLREDUCE, K_BCAST, K_REDUCE, K_ALLGATHER, K_RSCATTER, K_GATHER, K_SCATTER, K_ALLTOALL, K_BARRIER,
            K_P2P, K_BATCH, K_KINDS };
static const char *const kind_names[K_KINDS] = {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
                                                "gather", "scatter", "alltoall", "barrier", "sendrecv", "batch"};

struct soak {
    struct plx_comm *c;
    int rank, size;
    uint64_t rng;
    unsigned char *send, *recv, *aux[3][2];
    long ops, wrong, errors;
    long per_kind[K_KINDS];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

static uint64_t next(struct soak *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

/* Values every dtype holds exactly, for the data-movement collectives. */
static double g(int a, size_t i)
{
    return (double)(((size_t)a * 3 + i) % 7);
}

static void fill(void *buf, size_t n, int dt, int a)
{
    for (size_t i = 0; i < n; i++)
        put(buf, i, dt, g(a, i));
}

static int expect(struct soak *s, const char *what, const void *buf, size_t off, size_t n, int dt, int a)
{
    for (size_t i = 0; i < n; i++)
        if (get(buf, off + i, dt) != g(a, i)) {
            fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", s->rank, what, off + i,
                    get(buf, off + i, dt), g(a, i));
            s->wrong++;
            return 1;
        }
    return 0;
}

static int expect_reduced(struct soak *s, const char *what, const void *buf, size_t first, size_t n, int dt, int op)
{
    for (size_t i = 0; i < n; i++)
        if (get(buf, i, dt) != reduce_ref(first + i, op, dt, s->size)) {
            fprintf(stderr, "rank %d: %s(%s, %s): element %zu is %g, expected %g\n", s->rank, what,
                    plx_dtype_name(dt), plx_redop_name(op), first + i, get(buf, i, dt),
                    reduce_ref(first + i, op, dt, s->size));
            s->wrong++;
            return 1;
        }
    return 0;
}

static int failed(struct soak *s, int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "rank %d: %s failed after %ld ops: %s: %s\n", s->rank, what, s->ops, plx_err_name(rc),
                plx_last_error());
        s->errors++;
    }
    return rc;
}

/* One operation of kind k with count elements of dt; returns nonzero on an
 * error (the communicator is then unusable). */
static int one(struct soak *s, int k, size_t count, int dt, int op, int root)
{
    const int P = s->size, r = s->rank;
    void *sb = s->send, *rb = s->recv;
    int rc = 0;
    switch (k) {
    case K_ALLREDUCE:
        for (size_t i = 0; i < count; i++)
            put(sb, i, dt, val(r, i, op, P));
        if (!(rc = failed(s, plx_allreduce(s->c, sb, rb, count, dt, op), "allreduce")))
            expect_reduced(s, "allreduce", rb, 0, count, dt, op);
        break;
    case K_REDUCE:
        for (size_t i = 0; i < count; i++)
            put(sb, i, dt, val(r, i, op, P));
        if (!(rc = failed(s, plx_reduce(s->c, sb, rb, count, dt, op, root), "reduce")) && r == root)
            expect_reduced(s, "reduce", rb, 0, count, dt, op);
        break;
    case K_RSCATTER:
        for (size_t i = 0; i < count * (size_t)P; i++)
            put(sb, i, dt, val(r, i, op, P));
        if (!(rc = failed(s, plx_reduce_scatter(s->c, sb, rb, count, dt, op), "reduce_scatter")))
            expect_reduced(s, "reduce_scatter", rb, (size_t)r * count, count, dt, op);
        break;
    case K_BCAST:
        if (r == root)
            fill(rb, count, dt, root);
        else
            memset(rb, 0xab, count * plx_dtype_size(dt));
        if (!(rc = failed(s, plx_broadcast(s->c, rb, count, dt, root), "broadcast")))
            expect(s, "broadcast", rb, 0, count, dt, root);
        break;
    case K_ALLGATHER:
    case K_GATHER:
        fill(sb, count, dt, r);
        rc = k == K_ALLGATHER ? plx_allgather(s->c, sb, rb, count, dt) : plx_gather(s->c, sb, rb, count, dt, root);
        if (!(rc = failed(s, rc, kind_names[k])) && (k == K_ALLGATHER || r == root))
            for (int q = 0; q < P; q++)
                expect(s, kind_names[k], rb, (size_t)q * count, count, dt, q);
        break;
    case K_SCATTER:
        if (r == root)
            for (int q = 0; q < P; q++)
                fill((char *)sb + (size_t)q * count * plx_dtype_size(dt), count, dt, q);
        if (!(rc = failed(s, plx_scatter(s->c, sb, rb, count, dt, root), "scatter")))
            expect(s, "scatter", rb, 0, count, dt, r);
        break;
    case K_ALLTOALL:
        for (int q = 0; q < P; q++) /* block q goes to rank q: tag it with (r, q) */
            fill((char *)sb + (size_t)q * count * plx_dtype_size(dt), count, dt, r * P + q);
        if (!(rc = failed(s, plx_alltoall(s->c, sb, rb, count, dt), "alltoall")))
            for (int q = 0; q < P; q++)
                expect(s, "alltoall", rb, (size_t)q * count, count, dt, q * P + r);
        break;
    case K_BARRIER:
        rc = failed(s, plx_barrier(s->c), "barrier");
        break;
    case K_P2P: { /* a ring: send right, receive from the left, nonblocking */
        struct plx_work *ws = NULL, *wr = NULL;
        int right = (r + 1) % P, left = (r + P - 1) % P;
        fill(sb, count, dt, r);
        rc = plx_irecv(s->c, rb, count, dt, left, 11, NULL, &wr);
        if (!rc)
            rc = plx_isend(s->c, sb, count, dt, right, 11, NULL, &ws);
        if (!rc)
            rc = plx_work_wait(ws, PLX_TIMEOUT_DEFAULT);
        if (!rc)
            rc = plx_work_wait(wr, PLX_TIMEOUT_DEFAULT);
        plx_work_free(ws);
        plx_work_free(wr);
        if (!(rc = failed(s, rc, "send/recv")))
            expect(s, "send/recv", rb, 0, count, dt, left);
        break;
    }
    case K_BATCH: { /* three nonblocking allreduces in flight, then waited in order */
        struct plx_work *w[3] = {NULL, NULL, NULL};
        for (int b = 0; b < 3 && !rc; b++) {
            for (size_t i = 0; i < count; i++)
                put(s->aux[b][0], i, dt, val(r, i, op, P));
            rc = plx_iallreduce(s->c, s->aux[b][0], s->aux[b][1], count, dt, op, NULL, &w[b]);
        }
        for (int b = 0; b < 3; b++) {
            if (!rc && w[b])
                rc = plx_work_wait(w[b], PLX_TIMEOUT_DEFAULT);
            plx_work_free(w[b]);
        }
        if (!(rc = failed(s, rc, "iallreduce batch")))
            for (int b = 0; b < 3; b++)
                expect_reduced(s, "iallreduce", s->aux[b][1], 0, count, dt, op);
        s->ops += 2;
        break;
    }
    }
    s->ops++;
    s->per_kind[k]++;
    return rc;
}

/* Draw the next operation (identical on every rank) and run it. */
static int step(struct soak *s, int largest)
{
    int k = (int)(next(s) % K_KINDS);
    size_t base = (size_t)1 << (next(s) % 18);
    size_t count = base - 1 + next(s) % base; /* 0 .. MAX_COUNT - 2, log-uniform: empty ones too */
    int dt = (int)(next(s) % PLX_DTYPE_COUNT), op = (int)(next(s) % PLX_REDOP_COUNT);
    int root = (int)(next(s) % (uint64_t)s->size);
    if (k == K_BATCH)
        count /= 4;
    if (largest >= 0) { /* warm-up: every kind at its largest */
        k = largest;
        count = k == K_BATCH ? MAX_COUNT / 4 : MAX_COUNT - 1;
        dt = PLX_F64;
    }
    if (op >= PLX_BAND && dt >= PLX_F16) /* bitwise: integers only */
        op -= PLX_BAND;
    return one(s, k, count, dt, op, root);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: soak_rank SECONDS [SEED]\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    struct soak s = {0};
    s.rng = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x5eed50a4u;
    if (!s.rng)
        s.rng = 1;
    size_t bytes = (size_t)MAX_COUNT * 8 * 16; /* room for up to 16 ranks' blocks */
    s.send = malloc(bytes);
    s.recv = malloc(bytes);
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < 2; j++)
            s.aux[b][j] = malloc(MAX_COUNT / 4 * 8);
    int rc = plx_comm_init(NULL, &s.c);
    if (rc) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    s.rank = plx_comm_rank(s.c);
    s.size = plx_comm_size(s.c);
    if (s.size > 16) {
        fprintf(stderr, "soak: at most 16 ranks\n");
        return 2;
    }
    for (int k = 0; k < K_KINDS && !rc; k++)
        rc = step(&s, k);
    long rss0 = rss_kib();
    double t0 = now_s(), last_report = t0;
    int go = 1;
    while (!rc && go) {
        for (int i = 0; i < 32 && !rc; i++)
            rc = step(&s, -1);
        if (rc)
            break;
        /* rank 0 decides for everyone whether to go on */
        go = s.rank == 0 ? now_s() - t0 < seconds : 0;
        rc = failed(&s, plx_broadcast(s.c, &go, 1, PLX_I32, 0), "broadcast of the go flag");
        s.ops++;
        if (s.rank == 0 && now_s() - last_report >= 30) {
            last_report = now_s();
            printf("%4.0f s: %ld ops, %ld wrong, VmRSS %ld KiB\n", now_s() - t0, s.ops, s.wrong, rss_kib());
            fflush(stdout);
        }
    }
    double dt = now_s() - t0;
    long rss1 = rss_kib(), bound = rss0 + rss0 / 10 + RSS_SLACK_KIB;
    int ok = !rc && !s.errors && !s.wrong && rss1 <= bound;
    printf("rank %d: %.0f s, %ld ops (%.0f/s), %ld errors, %ld wrong results, VmRSS %ld KiB after warm-up, "
           "%ld KiB at the end (bound %ld KiB = +10%% + 8 MiB): %s\n",
           s.rank, dt, s.ops, (double)s.ops / dt, s.errors, s.wrong, rss0, rss1, bound, ok ? "ok" : "FAILED");
    if (s.rank == 0) {
        printf("rank 0: ops by kind:");
        for (int k = 0; k < K_KINDS; k++)
            printf(" %s %ld", kind_names[k], s.per_kind[k]);
        printf("\n");
    }
    plx_comm_destroy(s.c);
    free(s.send);
    free(s.recv);
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < 2; j++)
            free(s.aux[b][j]);
    return ok ? 0 : 1;
}
