/* matrix.c - one rank of the collective matrix on a multi-process backend
 * (started by plexus-run): every collective x dtype x op, blocking or
 * nonblocking, in place and out of place, at counts 0, 1, P-1, a
 * non-multiple of P and >= 1 Mi elements, each element compared with a
 * serial reference (check_values.h: small integers, so every dtype's
 * result is exact). Then the same on the halves of a split, which gets its
 * own segment. usage: matrix BACKEND|auto|INTRA+INTER nonblocking(0|1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_values.h"
#include "plexus/plexus.h"

static int P, nonblocking;

static int is_reduction(int coll)
{
    return coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_REDUCE || coll == PLX_COLL_REDUCE_SCATTER;
}

/* Elements in the send (s) and receive (r) buffers of coll for count n. */
static void sizes(int coll, size_t n, size_t *s, size_t *r)
{
    *s = *r = n;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER || coll == PLX_COLL_ALLTOALL)
        *r = n * (size_t)P;
    if (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL)
        *s = n * (size_t)P;
}

static int start(struct plx_comm *c, int coll, const void *s, void *r, size_t n, int dt, int op, int root,
                 struct plx_work **w)
{
    if (!nonblocking) {
        *w = NULL;
        switch (coll) {
        case PLX_COLL_ALLREDUCE: return plx_allreduce(c, s, r, n, dt, op);
        case PLX_COLL_BROADCAST: return plx_broadcast(c, r, n, dt, root);
        case PLX_COLL_REDUCE: return plx_reduce(c, s, r, n, dt, op, root);
        case PLX_COLL_ALLGATHER: return plx_allgather(c, s, r, n, dt);
        case PLX_COLL_REDUCE_SCATTER: return plx_reduce_scatter(c, s, r, n, dt, op);
        case PLX_COLL_GATHER: return plx_gather(c, s, r, n, dt, root);
        case PLX_COLL_SCATTER: return plx_scatter(c, s, r, n, dt, root);
        case PLX_COLL_ALLTOALL: return plx_alltoall(c, s, r, n, dt);
        default: return plx_barrier(c);
        }
    }
    int rc;
    switch (coll) {
    case PLX_COLL_ALLREDUCE: rc = plx_iallreduce(c, s, r, n, dt, op, NULL, w); break;
    case PLX_COLL_BROADCAST: rc = plx_ibroadcast(c, r, n, dt, root, NULL, w); break;
    case PLX_COLL_REDUCE: rc = plx_ireduce(c, s, r, n, dt, op, root, NULL, w); break;
    case PLX_COLL_ALLGATHER: rc = plx_iallgather(c, s, r, n, dt, NULL, w); break;
    case PLX_COLL_REDUCE_SCATTER: rc = plx_ireduce_scatter(c, s, r, n, dt, op, NULL, w); break;
    case PLX_COLL_GATHER: rc = plx_igather(c, s, r, n, dt, root, NULL, w); break;
    case PLX_COLL_SCATTER: rc = plx_iscatter(c, s, r, n, dt, root, NULL, w); break;
    case PLX_COLL_ALLTOALL: rc = plx_ialltoall(c, s, r, n, dt, NULL, w); break;
    default: rc = plx_ibarrier(c, NULL, w); break;
    }
    if (rc)
        return rc;
    rc = plx_work_wait(*w, PLX_TIMEOUT_DEFAULT);
    plx_work_free(*w);
    return rc;
}

/* One case on one rank; returns the number of wrong elements (or -1). */
static long one_case(struct plx_comm *c, int coll, int dt, int op, size_t n, int inplace, char *sb, char *rb)
{
    int me = plx_comm_rank(c), root = P - 1;
    size_t es = plx_dtype_size(dt), ns, nr;
    sizes(coll, n, &ns, &nr);
    const void *s = sb;
    void *r = rb;
    if (inplace) {
        if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER)
            s = rb + (size_t)me * n * es;
        else if (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER)
            r = sb + (size_t)me * n * es;
        else
            s = r = rb;
    }
    memset(rb, 0xa5, nr * es + 8);
    for (size_t i = 0; i < ns; i++)
        put((void *)s, i, dt, val(me, i, op, P));
    if (coll == PLX_COLL_BROADCAST)
        for (size_t i = 0; i < n; i++)
            put(r, i, dt, me == root ? val(root, i, op, P) : 0);
    struct plx_work *w;
    int rc = start(c, coll, s, r, n, dt, op, root, &w);
    if (rc) {
        fprintf(stderr, "rank %d: %s %s %s n=%zu inplace=%d: %s: %s\n", me, plx_coll_name(coll), plx_dtype_name(dt),
                plx_redop_name(op), n, inplace, plx_err_name(rc), plx_last_error());
        return -1;
    }
    long wrong = 0;
    size_t out = coll == PLX_COLL_REDUCE ? (me == root ? n : 0)
                 : coll == PLX_COLL_GATHER ? (me == root ? nr : 0)
                 : coll == PLX_COLL_BARRIER ? 0 : (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER) ? n : nr;
    for (size_t i = 0; i < out; i++) {
        double want;
        switch (coll) {
        case PLX_COLL_ALLREDUCE: case PLX_COLL_REDUCE: want = reduce_ref(i, op, dt, P); break;
        case PLX_COLL_BROADCAST: want = val(root, i, op, P); break;
        case PLX_COLL_ALLGATHER: case PLX_COLL_GATHER: want = val((int)(i / n), i % n, op, P); break;
        case PLX_COLL_REDUCE_SCATTER: want = reduce_ref((size_t)me * n + i, op, dt, P); break;
        case PLX_COLL_SCATTER: want = val(root, (size_t)me * n + i, op, P); break;
        default: want = val((int)(i / n), (size_t)me * n + i % n, op, P); break;
        }
        double got = get(r, i, dt);
        if (got != want && wrong++ < 3)
            fprintf(stderr, "rank %d: %s %s %s n=%zu inplace=%d: element %zu is %g, want %g\n", me,
                    plx_coll_name(coll), plx_dtype_name(dt), plx_redop_name(op), n, inplace, i, got, want);
    }
    /* A rooted collective must not write a non-root's receive buffer. */
    if ((coll == PLX_COLL_REDUCE || coll == PLX_COLL_GATHER) && me != root && !inplace)
        for (size_t i = 0; i < nr * es; i++)
            if ((unsigned char)rb[i] != 0xa5) {
                fprintf(stderr, "rank %d: %s wrote the receive buffer of a non-root\n", me, plx_coll_name(coll));
                wrong++;
                break;
            }
    return wrong;
}

/* The whole matrix on c; returns the number of wrong elements, or -1. */
static long matrix(struct plx_comm *c, int full)
{
    size_t big = (size_t)1 << 20;
    size_t counts[] = {0, 1, (size_t)P - 1, 7 * (size_t)P + 3, big};
    size_t cap = (big + 16) * (size_t)P * 8;
    char *sb = malloc(cap), *rb = malloc(cap);
    long bad = 0;
    int cases = 0;
    for (int coll = 0; coll < PLX_COLL_SEND; coll++)
        for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++)
            for (int op = 0; op < (is_reduction(coll) ? PLX_REDOP_COUNT : 1); op++)
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                    size_t n = counts[k];
                    /* the big count on a few combinations only, to keep the run short */
                    if (n == big && !((dt == PLX_F32 || dt == PLX_I32 || dt == PLX_BF16) &&
                                      (op == PLX_SUM || op == PLX_MAX || op == PLX_AVG)))
                        continue;
                    if (!full && (n == big || (dt != PLX_F32 && dt != PLX_I64)))
                        continue;
                    if (coll == PLX_COLL_BARRIER && (k || dt))
                        continue;
                    for (int ip = 0; ip < 2; ip++) {
                        long w = one_case(c, coll, dt, op, n, ip, sb, rb);
                        cases++;
                        if (w < 0) {
                            free(sb);
                            free(rb);
                            return -1;
                        }
                        bad += w;
                    }
                }
    if (plx_comm_rank(c) == 0)
        printf("%s P=%d nonblocking=%d: %d cases per rank, %ld wrong elements on rank 0\n", plx_comm_name(c), P,
               nonblocking, cases, bad);
    free(sb);
    free(rb);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: matrix BACKEND nonblocking(0|1)\n");
        return 2;
    }
    nonblocking = atoi(argv[2]);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1];
    o.timeout_ms = 60000;
    struct plx_comm *world = NULL, *half = NULL;
    int rc = plx_comm_init(&o, &world);
    if (rc) {
        fprintf(stderr, "init: %s\n", plx_last_error());
        return 1;
    }
    /* "auto" takes what it gets; "intra+inter" runs on inter with intra composed in. */
    const char *want = strchr(argv[1], '+') ? strchr(argv[1], '+') + 1 : argv[1];
    if (strcmp(argv[1], "auto") && strcmp(plx_comm_backend(world), want)) {
        fprintf(stderr, "runs on %s, not %s\n", plx_comm_backend(world), argv[1]);
        return 1;
    }
    P = plx_comm_size(world);
    long bad = matrix(world, 1);
    /* A split communicator (even and odd ranks) has its own segment. */
    int me = plx_comm_rank(world);
    if (bad == 0 && (rc = plx_comm_split(world, me % 2, me, &half)) != 0) {
        fprintf(stderr, "split: %s\n", plx_last_error());
        bad = -1;
    }
    if (bad == 0) {
        P = plx_comm_size(half);
        bad = matrix(half, 0);
        plx_comm_destroy(half);
    }
    plx_comm_destroy(world);
    return bad ? 1 : 0;
}
