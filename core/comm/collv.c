/* collv.c - plx_alltoallv and plx_allgatherv: check counts and
 * displacements once (a bad one is named by rank and index), copy them into
 * a core-owned block the ABI 1.4 fields of plx_coll_args point at (collv.h),
 * and submit like the other collectives: natively in a plugin of minor 4+
 * that has them in its mask, else by the core's generic algorithm
 * (algo/alltoallv.c) over point-to-point. Whether the ranks agree on the
 * counts is found where the data moves: the generic algorithm carries each
 * block's count, a native plugin checks what it can (mpi: the received
 * sizes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collv.h"
#include "comm.h"
#include "error.h"

void plx__vspec_release(struct plx_coll_args *a)
{
    if (plx__coll_is_v(a->coll)) {
        free((void *)a->recv_counts); /* the start of the block */
        a->recv_counts = a->recv_displs = a->send_counts = a->send_displs = NULL;
    }
}

/* Copy counts and displacements (NULL displs: packed) into v's arrays and
 * check every block [displ, displ + count) fits the address space.
 * *extent: elements the buffer must hold. */
static int take(struct plx_comm *c, const char *what, const char *which, const size_t *counts,
                const size_t *displs, size_t es, size_t *cout, size_t *dout, size_t *extent)
{
    int P = c->size;
    size_t at = 0, end = 0;
    if (!counts)
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': rank %d: %s counts are NULL", what, c->name, c->rank,
                        which);
    for (int i = 0; i < P; i++) {
        size_t n = counts[i], d = displs ? displs[i] : at;
        if (d > SIZE_MAX / es || n > SIZE_MAX / es - d)
            return plx__err(PLX_ERR_INVALID_ARG,
                            "%s on '%s': rank %d: %s block %d (displacement %zu, count %zu) overflows the "
                            "address space", what, c->name, c->rank, which, i, d, n);
        cout[i] = n;
        dout[i] = d;
        at = d + n;
        if (n && at > end)
            end = at;
    }
    *extent = end;
    return 0;
}

/* Receive blocks of different sources must not overlap (their order of
 * arrival is not defined). Sorting would cost more than it saves for the
 * group sizes this runs on: P^2 / 2 comparisons of non-empty blocks. */
static int check_overlap(struct plx_comm *c, const char *what, const size_t *n, const size_t *d)
{
    for (int i = 0; i < c->size; i++)
        for (int j = i + 1; n[i] && j < c->size; j++)
            if (n[j] && d[i] < d[j] + n[j] && d[j] < d[i] + n[i])
                return plx__err(PLX_ERR_INVALID_ARG,
                                "%s on '%s': rank %d: receive blocks %d [%zu, +%zu) and %d [%zu, +%zu) overlap",
                                what, c->name, c->rank, i, d[i], n[i], j, d[j], n[j]);
    return 0;
}

static int collv(struct plx_comm *c, int coll, const void *send, const size_t *scounts, const size_t *sdispls,
                 size_t send_count, void *recv, const size_t *rcounts, const size_t *rdispls, int dtype,
                 const struct plx_op_options *o, struct plx_work **w)
{
    const char *what = plx_coll_name(coll);
    plx__err_clear();
    if (!c)
        return plx__err(PLX_ERR_INVALID_ARG, "%s: comm is NULL", what);
    if (dtype < 0 || dtype >= PLX_DTYPE_COUNT)
        return plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': invalid dtype %d", what, c->name, dtype);
    size_t P = (size_t)c->size, es = plx_dtype_size(dtype), sext = 0, rext = 0;
    int a2a = coll == PLX_COLL_ALLTOALLV;
    /* One block: receive counts, receive displacements, then (alltoallv)
     * send counts and send displacements. */
    size_t *arr = calloc(a2a ? 4 * P : 2 * P, sizeof *arr);
    if (!arr)
        return plx__err(PLX_ERR_NOMEM, "%s: out of memory", what);
    size_t *rc_ = arr, *rd = arr + P, *sc = a2a ? arr + 2 * P : NULL, *sd = a2a ? arr + 3 * P : NULL;
    int rc = take(c, what, "receive", rcounts, rdispls, es, rc_, rd, &rext);
    if (rc == 0 && a2a) {
        rc = send == recv ? take(c, what, "send", rcounts, rdispls, es, sc, sd, &sext)
                          : take(c, what, "send", scounts, sdispls, es, sc, sd, &sext);
        if (rc == 0 && sc[c->rank] != rc_[c->rank])
            rc = plx__err(PLX_ERR_INVALID_ARG,
                          "%s on '%s': rank %d sends %zu elements to rank %d, rank %d expects %zu from rank %d "
                          "(index %d, its own block)", what, c->name, c->rank, sc[c->rank], c->rank, c->rank,
                          rc_[c->rank], c->rank, c->rank);
    } else if (rc == 0) {
        if (send_count != rc_[c->rank])
            rc = plx__err(PLX_ERR_INVALID_ARG,
                          "%s on '%s': rank %d: send count %zu differs from receive count %zu at index %d (its "
                          "own block)", what, c->name, c->rank, send_count, rc_[c->rank], c->rank);
        else if (send_count > SIZE_MAX / es)
            rc = plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': rank %d: send count %zu overflows", what, c->name,
                          c->rank, send_count);
        sext = send_count;
    }
    if (rc == 0)
        rc = check_overlap(c, what, rc_, rd);
    if (rc == 0 && ((sext && !send) || (rext && !recv)))
        rc = plx__err(PLX_ERR_INVALID_ARG, "%s on '%s': rank %d: %s buffer is NULL with %zu elements", what,
                      c->name, c->rank, sext && !send ? "send" : "receive", sext && !send ? sext : rext);
    if (rc != 0) {
        free(arr);
        return rc;
    }
    /* count stays 0: ranks send different counts, and the fingerprint that
     * ranks compare (fingerprint.c) must not differ for that. */
    struct plx_coll_args a = {.struct_size = sizeof a, .coll = coll, .send = send, .recv = recv,
                              .count = 0, .dtype = dtype, .timeout_ms = -1,
                              .flags = w ? 0 : PLX_COLL_FLAG_BLOCKING, /* a native plugin may finish it in the call */
                              .send_counts = sc, .send_displs = sd, .recv_counts = rc_, .recv_displs = rd};
    /* The work owns arr once it exists; a blocking call waits on its own. */
    struct plx_work *tmp = NULL;
    if ((rc = plx__coll_submit(c, &a, o, &tmp)) != 0) {
        if (!tmp)
            free(arr);
        return rc;
    }
    if (w) {
        *w = tmp;
        return 0;
    }
    /* The backend (or the executor) enforces the op's timeout and names the
     * missing rank; this wait is a backstop a little later, as in coll.c. */
    int64_t t = o && PLX_HAS_FIELD(o, struct plx_op_options, timeout_ms) && o->timeout_ms >= 0 ? o->timeout_ms
                                                                                                : c->timeout_ms;
    rc = plx_work_wait(tmp, plx_coll_backstop_ms(t));
    plx_work_free(tmp);
    return rc;
}

PLX_API int plx_ialltoallv(struct plx_comm *c, const void *send, const size_t *send_counts,
                           const size_t *send_displs, void *recv, const size_t *recv_counts,
                           const size_t *recv_displs, int dtype, const struct plx_op_options *o,
                           struct plx_work **w)
{
    if (!w)
        return plx__err(PLX_ERR_INVALID_ARG, "ialltoallv: work is NULL");
    return collv(c, PLX_COLL_ALLTOALLV, send, send_counts, send_displs, 0, recv, recv_counts, recv_displs, dtype,
                 o, w);
}

PLX_API int plx_alltoallv(struct plx_comm *c, const void *send, const size_t *send_counts,
                          const size_t *send_displs, void *recv, const size_t *recv_counts,
                          const size_t *recv_displs, int dtype)
{
    return collv(c, PLX_COLL_ALLTOALLV, send, send_counts, send_displs, 0, recv, recv_counts, recv_displs, dtype,
                 NULL, NULL);
}

PLX_API int plx_iallgatherv(struct plx_comm *c, const void *send, size_t send_count, void *recv,
                            const size_t *recv_counts, const size_t *recv_displs, int dtype,
                            const struct plx_op_options *o, struct plx_work **w)
{
    if (!w)
        return plx__err(PLX_ERR_INVALID_ARG, "iallgatherv: work is NULL");
    return collv(c, PLX_COLL_ALLGATHERV, send, NULL, NULL, send_count, recv, recv_counts, recv_displs, dtype, o,
                 w);
}

PLX_API int plx_allgatherv(struct plx_comm *c, const void *send, size_t send_count, void *recv,
                           const size_t *recv_counts, const size_t *recv_displs, int dtype)
{
    return collv(c, PLX_COLL_ALLGATHERV, send, NULL, NULL, send_count, recv, recv_counts, recv_displs, dtype, NULL,
                 NULL);
}
