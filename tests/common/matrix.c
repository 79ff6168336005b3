/* matrix.c - one case of the collective matrix, and the whole matrix over a
 * list of counts (matrix.h). */
#include "matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_values.h"

int matrix_is_reduction(int coll)
{
    return coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_REDUCE || coll == PLX_COLL_REDUCE_SCATTER;
}

int matrix_op_fits(int dt, int op)
{
    return op < PLX_BAND || dt < PLX_F16;
}

/* A bitwise op on a float type: every rank refuses it alike (no transfer,
 * so the communicator stays usable). Returns the number of wrong answers. */
static long refused(struct plx_comm *c, int coll, int dt, int op, char *sb, char *rb)
{
    int rc = coll == PLX_COLL_ALLREDUCE ? plx_allreduce(c, sb, rb, 1, dt, op)
             : coll == PLX_COLL_REDUCE  ? plx_reduce(c, sb, rb, 1, dt, op, 0)
                                        : plx_reduce_scatter(c, sb, rb, 1, dt, op);
    if (rc == PLX_ERR_INVALID_ARG)
        return 0;
    fprintf(stderr, "rank %d: %s(%s, %s) gave %s, want PLX_ERR_INVALID_ARG\n", plx_comm_rank(c), plx_coll_name(coll),
            plx_dtype_name(dt), plx_redop_name(op), plx_err_name(rc));
    return 1;
}

void matrix_sizes(int coll, size_t n, int P, size_t *s, size_t *r)
{
    *s = *r = n;
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_GATHER || coll == PLX_COLL_ALLTOALL)
        *r = n * (size_t)P;
    if (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER || coll == PLX_COLL_ALLTOALL)
        *s = n * (size_t)P;
}

static int start_blocking(struct plx_comm *c, int coll, const void *s, void *r, size_t n, int dt, int op, int root)
{
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

static int start_nonblocking(struct plx_comm *c, int coll, const void *s, void *r, size_t n, int dt, int op, int root)
{
    struct plx_work *w = NULL;
    int rc;
    switch (coll) {
    case PLX_COLL_ALLREDUCE: rc = plx_iallreduce(c, s, r, n, dt, op, NULL, &w); break;
    case PLX_COLL_BROADCAST: rc = plx_ibroadcast(c, r, n, dt, root, NULL, &w); break;
    case PLX_COLL_REDUCE: rc = plx_ireduce(c, s, r, n, dt, op, root, NULL, &w); break;
    case PLX_COLL_ALLGATHER: rc = plx_iallgather(c, s, r, n, dt, NULL, &w); break;
    case PLX_COLL_REDUCE_SCATTER: rc = plx_ireduce_scatter(c, s, r, n, dt, op, NULL, &w); break;
    case PLX_COLL_GATHER: rc = plx_igather(c, s, r, n, dt, root, NULL, &w); break;
    case PLX_COLL_SCATTER: rc = plx_iscatter(c, s, r, n, dt, root, NULL, &w); break;
    case PLX_COLL_ALLTOALL: rc = plx_ialltoall(c, s, r, n, dt, NULL, &w); break;
    default: rc = plx_ibarrier(c, NULL, &w); break;
    }
    if (rc)
        return rc;
    rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
    plx_work_free(w);
    return rc;
}

/* The value element i of this rank's result should hold. */
static double expected(int coll, size_t i, size_t n, int dt, int op, int me, int P)
{
    int root = P - 1;
    switch (coll) {
    case PLX_COLL_ALLREDUCE: case PLX_COLL_REDUCE: return reduce_ref(i, op, dt, P);
    case PLX_COLL_BROADCAST: return val(root, i, op, P);
    case PLX_COLL_ALLGATHER: case PLX_COLL_GATHER: return val((int)(i / n), i % n, op, P);
    case PLX_COLL_REDUCE_SCATTER: return reduce_ref((size_t)me * n + i, op, dt, P);
    case PLX_COLL_SCATTER: return val(root, (size_t)me * n + i, op, P);
    default: return val((int)(i / n), (size_t)me * n + i % n, op, P); /* alltoall */
    }
}

long matrix_case(struct plx_comm *c, const struct matrix_case *k, char *sb, char *rb)
{
    int coll = k->coll, dt = k->dtype, op = k->op, inplace = k->inplace;
    int me = plx_comm_rank(c), P = plx_comm_size(c), root = P - 1;
    size_t n = k->count, es = plx_dtype_size(dt), ns, nr;
    matrix_sizes(coll, n, P, &ns, &nr);
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
    int rc = k->nonblocking ? start_nonblocking(c, coll, s, r, n, dt, op, root)
                            : start_blocking(c, coll, s, r, n, dt, op, root);
    if (rc) {
        fprintf(stderr, "rank %d: %s %s %s n=%zu inplace=%d nonblocking=%d: %s: %s\n", me, plx_coll_name(coll),
                plx_dtype_name(dt), plx_redop_name(op), n, inplace, k->nonblocking, plx_err_name(rc),
                plx_last_error());
        return -1;
    }
    long wrong = 0;
    size_t out = coll == PLX_COLL_REDUCE ? (me == root ? n : 0)
                 : coll == PLX_COLL_GATHER ? (me == root ? nr : 0)
                 : coll == PLX_COLL_BARRIER ? 0
                 : (coll == PLX_COLL_REDUCE_SCATTER || coll == PLX_COLL_SCATTER) ? n : nr;
    for (size_t i = 0; i < out; i++) {
        double want = expected(coll, i, n, dt, op, me, P), got = get(r, i, dt);
        if (got != want && wrong++ < 3)
            fprintf(stderr, "rank %d: %s %s %s n=%zu inplace=%d nonblocking=%d: element %zu is %g, want %g\n", me,
                    plx_coll_name(coll), plx_dtype_name(dt), plx_redop_name(op), n, inplace, k->nonblocking, i, got,
                    want);
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

long matrix_run(struct plx_comm *c, int nonblocking, const size_t *counts, size_t ncounts, matrix_skip_fn *skip,
                void *arg, int *cases)
{
    size_t most = 0;
    for (size_t k = 0; k < ncounts; k++)
        most = counts[k] > most ? counts[k] : most;
    /* the largest dtype is 8 bytes; the check writes 8 bytes past the receive buffer */
    size_t cap = (most + 16) * (size_t)plx_comm_size(c) * 8;
    char *sb = malloc(cap), *rb = malloc(cap);
    long bad = 0;
    if (!sb || !rb) {
        fprintf(stderr, "matrix: out of memory for 2 x %zu bytes\n", cap);
        bad = -1;
        goto out;
    }
    for (int coll = 0; coll < PLX_COLL_SEND; coll++)
        for (int dt = 0; dt < PLX_DTYPE_COUNT; dt++)
            for (int op = 0; op < (matrix_is_reduction(coll) ? PLX_REDOP_COUNT : 1); op++)
                for (size_t k = 0; k < ncounts; k++) {
                    if (coll == PLX_COLL_BARRIER && (k || dt))
                        continue;
                    if (skip && skip(coll, dt, op, counts[k], arg))
                        continue;
                    if (!matrix_op_fits(dt, op)) {
                        bad += k ? 0 : refused(c, coll, dt, op, sb, rb);
                        continue;
                    }
                    for (int ip = 0; ip < 2; ip++) {
                        struct matrix_case one = {coll, dt, op, counts[k], ip, nonblocking};
                        long w = matrix_case(c, &one, sb, rb);
                        (*cases)++;
                        if (w < 0) {
                            bad = -1;
                            goto out;
                        }
                        bad += w;
                    }
                }
out:
    free(sb);
    free(rb);
    return bad;
}
