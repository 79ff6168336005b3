/* hier.c - hierarchical collectives: an intra-host backend (shm) composed
 * with an inter-host one (tcp, mpi) by the core, so neither plugin knows of
 * the other.
 *
 * The communicator itself runs on the inter-host backend (every collective
 * the hierarchy does not cover goes there, flat). Beside it the core builds
 * two children by split: `intra` (the ranks of this host, on the intra
 * backend; hosts told apart by core/common/hostid.h, as shm does) and
 * `cross` (one rank per host, those with the same local index, on the
 * inter backend). The core's executor runs the steps in issue order: a
 * blocking call in the calling thread when nothing is queued, a
 * nonblocking one on the executor's thread, so it returns once queued
 * (executor.c):
 *
 *   allreduce       intra reduce_scatter -> cross allreduce of the slice ->
 *                   intra allgather (the count % L tail: intra allreduce,
 *                   then cross allreduce)
 *   broadcast       cross broadcast among the root's local index -> intra
 *   allgather       intra allgather -> cross allgather of the host's part
 *   reduce_scatter  cross reduce_scatter (host chunks) -> intra reduce_scatter
 *   barrier         intra, cross, intra
 *
 * Every host must hold the same number of ranks (else no hierarchy: the
 * communicator stays flat, with a log line); allgather and reduce_scatter
 * also need ranks numbered host by host (rank = host * L + local), else they
 * run flat. AVG divides in each level (by L, then by the host count). The
 * steps use their children's default timeout. Selected by `backend =
 * INTRA+INTER` (e.g. shm+tcp) or by auto when the intra backend refuses a
 * communicator that spans hosts (comm.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "config.h"
#include "error.h"
#include "hier.h"
#include "hostid.h"
#include "log.h"

struct plx__hier {
    struct plx_comm *intra, *cross;
    int host, nhosts, local, nlocal;
    int contiguous;      /* rank == host * nlocal + local for every rank */
    int *host_of, *local_of;
    void *tmp;           /* reduce_scatter's cross result, kept for reuse */
    size_t tmp_bytes;
};

int plx__hier_select(const char *spec, struct plx__backend **inter, struct plx__backend **intra)
{
    *intra = NULL;
    const char *s = spec ? spec : plx__config_get("core", "backend");
    const char *plus = s ? strchr(s, '+') : NULL;
    if (!plus)
        return plx__loader_select(spec, inter);
    char in[128];
    snprintf(in, sizeof in, "%.*s", (int)(plus - s), s);
    int rc = plx__loader_select(in, intra);
    if (rc == 0)
        rc = plx__loader_select(plus + 1, inter);
    if (rc == 0 && (*intra)->caps.flags & PLX_CAP_MULTI_NODE)
        plx__log(PLX_LOG_INFO, "core", "backend '%s': %s spans hosts itself; composed as asked", s, (*intra)->name);
    return rc;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static void hier_free(struct plx__hier *h)
{
    if (!h)
        return;
    if (h->intra)
        plx_comm_destroy(h->intra);
    if (h->cross)
        plx_comm_destroy(h->cross);
    free(h->host_of);
    free(h->local_of);
    free(h->tmp);
    free(h);
}

int plx__hier_setup(struct plx_comm *c, struct plx__backend *intra_be)
{
    int P = c->size, rc;
    struct plx__hier *h = calloc(1, sizeof *h);
    uint64_t *ids = calloc((size_t)P, sizeof *ids);
    if (!h || !ids || !(h->host_of = calloc((size_t)P, sizeof(int))) ||
        !(h->local_of = calloc((size_t)P, sizeof(int)))) {
        free(ids);
        hier_free(h);
        return plx__err(PLX_ERR_NOMEM, "hierarchy on '%s': out of memory", c->name);
    }
    char id[256];
    plx_common_host_identity(id, sizeof id);
    uint64_t mine = fnv1a(id);
    if ((rc = plx_allgather(c, &mine, ids, 1, PLX_U64)) != 0)
        goto fail;
    int count[1024] = {0};
    h->contiguous = 1;
    for (int r = 0; r < P; r++) {
        int k = 0;
        while (k < r && ids[k] != ids[r])
            k++;
        h->host_of[r] = k == r ? h->nhosts++ : h->host_of[k];
        if (h->host_of[r] >= 1024) {
            rc = plx__err(PLX_ERR_UNSUPPORTED, "hierarchy on '%s': more than 1024 hosts", c->name);
            goto fail;
        }
        h->local_of[r] = count[h->host_of[r]]++;
    }
    h->nlocal = count[0];
    for (int k = 0; k < h->nhosts; k++)
        if (count[k] != h->nlocal) {
            rc = plx__err(PLX_ERR_UNSUPPORTED, "hierarchy on '%s': hosts hold different numbers of ranks "
                          "(host 0: %d, host %d: %d)", c->name, h->nlocal, k, count[k]);
            goto fail;
        }
    for (int r = 0; r < P; r++)
        h->contiguous &= r == h->host_of[r] * h->nlocal + h->local_of[r];
    h->host = h->host_of[c->rank];
    h->local = h->local_of[c->rank];
    if ((rc = plx__comm_split_on(c, h->host, c->rank, intra_be, &h->intra)) != 0 ||
        (rc = plx__comm_split_on(c, h->local, c->rank, c->be, &h->cross)) != 0)
        goto fail;
    free(ids);
    c->hier = h;
    plx__log(PLX_LOG_INFO, "core", "comm '%s': hierarchical, %d host(s) x %d rank(s): %s inside, %s across%s",
             c->name, h->nhosts, h->nlocal, intra_be->name, c->be->name,
             h->contiguous ? "" : " (ranks not numbered host by host: allgather and reduce_scatter run flat)");
    return 0;
fail:
    plx__err_prefix("hierarchy on '%s' (%s inside, %s across): ", c->name, intra_be->name, c->be->name);
    free(ids);
    hier_free(h);
    return rc;
}

int plx__hier_wants(const struct plx_comm *c, const struct plx_coll_args *a)
{
    const struct plx__hier *h = c->hier;
    if (!h || a->mem_kind != PLX_MEM_HOST || (a->flags & PLX__COLL_FLAG_STAGED))
        return 0;
    switch (a->coll) {
    case PLX_COLL_BARRIER: return 1;
    case PLX_COLL_ALLREDUCE:
    case PLX_COLL_BROADCAST: return a->count > 0;
    case PLX_COLL_ALLGATHER:
    case PLX_COLL_REDUCE_SCATTER: return a->count > 0 && h->contiguous;
    default: return 0;
    }
}

/* The cross rank of world rank r: its host's place among the hosts. */
static int cross_rank(const struct plx__hier *h, int r)
{
    int k = 0;
    for (int y = 0; y < r; y++)
        k += h->local_of[y] == h->local_of[r];
    return k;
}

#define STEP(call, what)                                                                                 \
    do {                                                                                                 \
        if ((rc = (call)) != 0) {                                                                        \
            step = (what);                                                                               \
            goto fail;                                                                                   \
        }                                                                                                \
    } while (0)

int plx__hier_run(struct plx_comm *c, const struct plx_coll_args *a)
{
    struct plx__hier *h = c->hier;
    size_t es = plx_dtype_size(a->dtype), n = a->count, L = (size_t)h->nlocal;
    const char *s = a->send;
    char *d = a->recv;
    const char *step = "";
    int rc = 0;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE: {
        size_t q = n / L, tail = n % L;
        if (q) {
            char *mine = d + (size_t)h->local * q * es;
            STEP(plx_reduce_scatter(h->intra, s, mine, q, a->dtype, a->op), "intra reduce_scatter");
            STEP(plx_allreduce(h->cross, mine, mine, q, a->dtype, a->op), "cross allreduce");
            STEP(plx_allgather(h->intra, mine, d, q, a->dtype), "intra allgather");
        }
        if (tail) {
            STEP(plx_allreduce(h->intra, s + L * q * es, d + L * q * es, tail, a->dtype, a->op), "intra allreduce");
            STEP(plx_allreduce(h->cross, d + L * q * es, d + L * q * es, tail, a->dtype, a->op), "cross allreduce");
        }
        return 0;
    }
    case PLX_COLL_BROADCAST: {
        int lr = h->local_of[a->root];
        if (h->local == lr)
            STEP(plx_broadcast(h->cross, d, n, a->dtype, cross_rank(h, a->root)), "cross broadcast");
        STEP(plx_broadcast(h->intra, d, n, a->dtype, lr), "intra broadcast");
        return 0;
    }
    case PLX_COLL_ALLGATHER: {
        char *part = d + (size_t)h->host * L * n * es;
        STEP(plx_allgather(h->intra, s, part, n, a->dtype), "intra allgather");
        STEP(plx_allgather(h->cross, part, d, L * n, a->dtype), "cross allgather");
        return 0;
    }
    case PLX_COLL_REDUCE_SCATTER: {
        size_t bytes = L * n * es;
        if (bytes > h->tmp_bytes) {
            void *p = realloc(h->tmp, bytes);
            if (!p)
                return plx__err(PLX_ERR_NOMEM, "hierarchical reduce_scatter on '%s': out of memory", c->name);
            h->tmp = p;
            h->tmp_bytes = bytes;
        }
        STEP(plx_reduce_scatter(h->cross, s, h->tmp, L * n, a->dtype, a->op), "cross reduce_scatter");
        STEP(plx_reduce_scatter(h->intra, h->tmp, d, n, a->dtype, a->op), "intra reduce_scatter");
        return 0;
    }
    default:
        STEP(plx_barrier(h->intra), "intra barrier");
        STEP(plx_barrier(h->cross), "cross barrier");
        STEP(plx_barrier(h->intra), "intra barrier");
        return 0;
    }
fail:
    plx__err_prefix("hierarchical %s on '%s', step %s: ", plx_coll_name(a->coll), c->name, step);
    return rc;
}

int plx__hier_run_failing(struct plx_comm *c, const struct plx_coll_args *a, char *errmsg, size_t errlen)
{
    int rc = plx__hier_run(c, a);
    if (rc) {
        snprintf(errmsg, errlen, "%s", plx_last_error());
        rc = plx__comm_fail(c, rc, errmsg, errlen);
    }
    return rc;
}

void plx__hier_abort(struct plx_comm *c)
{
    if (c->hier) {
        plx_comm_abort(c->hier->intra);
        plx_comm_abort(c->hier->cross);
    }
}

void plx__hier_destroy(struct plx_comm *c)
{
    hier_free(c->hier);
    c->hier = NULL;
}
