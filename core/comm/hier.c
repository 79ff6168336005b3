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
 *                   then cross allreduce; a small one whole that way:
 *                   a step fewer for L - 1 times its bytes more across)
 *   broadcast       cross broadcast among the root's local index -> intra
 *   allgather       intra allgather -> cross allgather of the host's part
 *   reduce_scatter  cross reduce_scatter (host chunks) -> intra reduce_scatter
 *   barrier         intra, then cross (every local index: each cross
 *                   rank stands for a host whose ranks have all arrived);
 *                   with the call check on, the check alone (below)
 *
 * Every host must hold the same number of ranks (else no hierarchy: the
 * communicator stays flat, with a log line); allgather and reduce_scatter
 * also need ranks numbered host by host (rank = host * L + local), else they
 * run flat. AVG divides in each level (by L, then by the host count). The
 * steps use their children's default timeout. Selected by `backend =
 * INTRA+INTER` (e.g. shm+tcp) or by auto when the intra backend refuses a
 * communicator that spans hosts (comm.c).
 *
 * The steps are not the user's calls, so a mismatch between ranks would
 * surface as the steps' (or not at all: 8 against 6 elements on 3 ranks
 * run the same reduce_scatter). With [core] fingerprint on, the user's call
 * is checked first: an intra allreduce, then a cross one, of each word of
 * the fingerprint's least and greatest (the least of its complement) say
 * whether all the calls are the same, in as many rounds as an allreduce
 * of a few bytes takes; intra, then cross, it is a barrier too. Only
 * where they are not, an intra allgather of the fingerprints, then a
 * cross allgather of each host's verdict (its call,
 * or the first pair of its ranks that differ), name two calls that differ.
 * Every rank reads the same results, so every rank fails alike with
 * PLX_ERR_MISMATCH naming both calls. Where the cross child checks its
 * messages in-band (tcp), they carry the user's call instead of the
 * step's, and an allreduce, allgather or reduce_scatter, whose every rank
 * crosses hosts, skips the cross round: its own cross steps tell hosts
 * that differ apart (check_call). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "config.h"
#include "diag_hooks.h"
#include "error.h"
#include "hier.h"
#include "hostid.h"
#include "log.h"

struct plx__hier {
    struct plx_comm *intra, *cross;
    int host, nhosts, local, nlocal;
    int contiguous;      /* rank == host * nlocal + local for every rank */
    int *host_of, *local_of;
    int *cross_parent;   /* cross's ranks' ranks here (its in-band check names them) */
    size_t chunk_bytes;  /* [core] hier_chunk_bytes: a large allreduce's pipeline chunk (0: none) */
    void *tmp;           /* reduce_scatter's cross result, kept for reuse */
    size_t tmp_bytes;
    char name[80];       /* "intra+cross", what plx_comm_backend says */
};

int plx__hier_select(const struct plx_config *v, const char *spec, int place, struct plx__backend **inter,
                     struct plx__backend **intra, char *why, size_t wn)
{
    *intra = NULL;
    const char *s = spec ? spec : plx__config_get_in(v, "core", "backend", NULL);
    const char *plus = s ? strchr(s, '+') : NULL;
    if (!plus)
        return plx__loader_select_placed(v, spec, NULL, place, inter, why, wn);
    snprintf(why, wn, "composed as asked (%s)", s);
    char in[128];
    snprintf(in, sizeof in, "%.*s", (int)(plus - s), s);
    int rc = plx__loader_select(in, intra);
    if (rc == 0)
        rc = plx__loader_select(plus + 1, inter);
    if (rc == 0 && (*intra)->caps.flags & PLX_CAP_MULTI_NODE)
        plx__log(PLX_LOG_INFO, "core", "backend '%s': %s spans hosts itself; composed as asked", s, (*intra)->name);
    return rc;
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
    free(h->cross_parent);
    free(h->tmp);
    free(h);
}

int plx__hier_setup(struct plx_comm *c, struct plx__backend *intra_be)
{
    int P = c->size, rc;
    struct plx__hier *h = calloc(1, sizeof *h);
    uint64_t *ids = calloc(2 * (size_t)P, sizeof *ids); /* each rank's host, then its machine */
    if (!h || !ids || !(h->host_of = calloc((size_t)P, sizeof(int))) ||
        !(h->local_of = calloc((size_t)P, sizeof(int))) || !(h->cross_parent = calloc((size_t)P, sizeof(int)))) {
        free(ids);
        hier_free(h);
        return plx__err(PLX_ERR_NOMEM, "hierarchy on '%s': out of memory", c->name);
    }
    char id[256];
    const char *modelled = plx__config_get_in(c->config, "core", "host_identity", NULL);
    if (modelled && *modelled)
        snprintf(id, sizeof id, "modelled %s", modelled);
    else
        plx_common_host_identity(id, sizeof id);
    uint64_t mine[2] = {plx__str_digest(id), plx_common_machine_id()};
    if ((rc = plx_allgather(c, mine, ids, 2, PLX_U64)) != 0)
        goto fail;
    /* Hosts emulated on one machine (network namespaces, containers) share
     * its cores: the children's backends are told how many ranks do. */
    c->machine_ranks = 0;
    for (int r = 0; r < P; r++)
        c->machine_ranks += mine[1] && ids[2 * r + 1] == mine[1];
    int count[1024] = {0};
    h->contiguous = 1;
    for (int r = 0; r < P; r++) {
        int k = 0;
        while (k < r && ids[2 * k] != ids[2 * r])
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
    int64_t chunk = 0;
    if ((rc = plx__config_int_in(c->config, "core", "hier_chunk_bytes", 4 << 20, &chunk)) != 0)
        goto fail;
    h->chunk_bytes = chunk > 0 ? (size_t)chunk : 0;
    h->host = h->host_of[c->rank];
    h->local = h->local_of[c->rank];
    if ((rc = plx__comm_split_on(c, h->host, c->rank, intra_be, &h->intra)) != 0 ||
        (rc = plx__comm_split_on(c, h->local, c->rank, c->be, &h->cross)) != 0)
        goto fail;
    for (int r = 0, k = 0; r < P; r++) /* split keeps the order of the key, c's rank */
        if (h->local_of[r] == h->local)
            h->cross_parent[k++] = r;
    h->cross->parent_rank = h->cross_parent;
    free(ids);
    snprintf(h->name, sizeof h->name, "%s+%s", intra_be->name, c->be->name);
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

/* A fingerprint as u64 words for an allgather; a host's verdict is two of
 * them with their world ranks (rank b = NONE: the host agrees). */
enum { FPW = 4, VERDICT = 2 * FPW + 2 };
#define NONE UINT64_MAX

static void fp_put(const struct plx__fp *f, uint64_t *w)
{
    w[0] = f->seq;
    w[1] = f->count;
    w[2] = (uint64_t)(uint32_t)f->coll << 32 | (uint32_t)f->dtype;
    w[3] = (uint64_t)(uint32_t)f->op << 32 | (uint32_t)f->root;
}

static struct plx__fp fp_get(const uint64_t *w)
{
    return (struct plx__fp){.seq = w[0], .count = w[1], .coll = (int32_t)(uint32_t)(w[2] >> 32),
                            .dtype = (int32_t)(uint32_t)w[2], .op = (int32_t)(uint32_t)(w[3] >> 32),
                            .root = (int32_t)(uint32_t)w[3]};
}

/* The world rank of local index j on host k. */
static int world_rank(const struct plx_comm *c, const struct plx__hier *h, int k, int j)
{
    for (int r = 0; r < c->size; r++)
        if (h->host_of[r] == k && h->local_of[r] == j)
            return r;
    return -1;
}

static int mismatch(const uint64_t *v, char *msg, size_t len)
{
    struct plx__fp a = fp_get(v), b = fp_get(v + FPW + 1);
    plx__fp_mismatch_msg(&a, (int)v[FPW], &b, (int)v[2 * FPW + 1], msg, len);
    return plx__err(PLX_ERR_MISMATCH, "%s", msg);
}

/* 0 if every rank makes the call fp; PLX_ERR_MISMATCH naming two calls
 * that differ (the same pair on every rank), or a step's error. */
static int name_mismatch(struct plx_comm *c, const struct plx__fp *fp, int hosts_too, const char **step)
{
    struct plx__hier *h = c->hier;
    int L = h->nlocal, H = h->nhosts, rc = 0;
    uint64_t *loc = calloc((size_t)L * FPW + (size_t)(H + 1) * VERDICT, sizeof *loc);
    if (!loc)
        return plx__err(PLX_ERR_NOMEM, "hierarchical call check on '%s': out of memory", c->name);
    uint64_t *mine = loc + (size_t)L * FPW, *all = mine + VERDICT;
    h->cross->stands_for = NULL; /* hosts' verdicts differ by design: the allgather is the check now */
    fp_put(fp, mine);
    mine[FPW] = (uint64_t)world_rank(c, h, h->host, 0);
    mine[2 * FPW + 1] = NONE;
    if (L > 1) {
        uint64_t w[FPW];
        fp_put(fp, w);
        *step = "call check (intra)";
        if ((rc = plx_allgather(h->intra, w, loc, FPW, PLX_U64)) != 0)
            goto out;
        memcpy(mine, loc, FPW * sizeof *loc); /* local index 0's call stands for the host */
        for (int j = 1; j < L; j++)
            if (memcmp(loc, loc + (size_t)j * FPW, FPW * sizeof *loc)) {
                memcpy(mine + FPW + 1, loc + (size_t)j * FPW, FPW * sizeof *loc);
                mine[2 * FPW + 1] = (uint64_t)world_rank(c, h, h->host, j);
                break;
            }
    }
    int hosts = hosts_too ? H : 1;
    if (hosts > 1) {
        *step = "call check (cross)";
        if ((rc = plx_allgather(h->cross, mine, all, VERDICT, PLX_U64)) != 0)
            goto out;
    } else {
        all = mine; /* this host's verdict is all there is */
    }
    char msg[400];
    for (int k = 0; k < hosts; k++)
        if (all[(size_t)k * VERDICT + 2 * FPW + 1] != NONE) {
            rc = mismatch(all + (size_t)k * VERDICT, msg, sizeof msg);
            /* Only this host's ranks know; the other hosts' are in (or
             * on their way to) the cross step, whose waits find it here. */
            if (!hosts_too && H > 1)
                plx__diag_publish(h->cross, msg);
            goto out;
        }
    for (int k = 1; k < hosts; k++)
        if (memcmp(all, all + (size_t)k * VERDICT, FPW * sizeof *all)) {
            uint64_t v[VERDICT];
            memcpy(v, all, (FPW + 1) * sizeof *v);
            memcpy(v + FPW + 1, all + (size_t)k * VERDICT, (FPW + 1) * sizeof *v);
            rc = mismatch(v, msg, sizeof msg);
            goto out;
        }
out:
    free(loc);
    return rc;
}

/* Whether the cross child runs coll on the core's generic algorithms with
 * the in-band check on: its messages then compare the user's call (a
 * native collective checks nothing). */
static int cross_inband(const struct plx__hier *h, int coll, int dtype, int op)
{
    return h->nhosts > 1 && (plx__diag_checks(h->cross) & PLX__DIAG_INBAND) &&
           plx_comm_native(h->cross, coll, dtype, op) == 0;
}

/* Whether a's own cross steps can stand for the check across hosts: every
 * rank runs one before its cross steps can differ (not a broadcast's,
 * which only the root's local index runs), checked in-band. */
static int steps_check_cross(const struct plx__hier *h, const struct plx_coll_args *a)
{
    return (a->coll == PLX_COLL_ALLREDUCE || a->coll == PLX_COLL_ALLGATHER || a->coll == PLX_COLL_REDUCE_SCATTER) &&
           cross_inband(h, a->coll, a->dtype, a->op);
}

static int words_differ(const uint64_t *w)
{
    for (int i = 0; i < FPW; i++)
        if (w[i] != ~w[FPW + i])
            return 1;
    return 0;
}

/* Whether every rank makes the call fp: each word's least and, as the
 * least of its complement, its greatest, over the host, then over the
 * hosts (the cross children each span every host, and each host's ranks
 * hold the same least and greatest, so every rank gets the same answer);
 * where they differ, name_mismatch names two calls.
 *
 * Where the cross child checks in-band, its messages carry the user's
 * call (plx__hier_run), so hosts whose calls differ fail in their first
 * cross message, and the check across hosts is a's own cross steps where
 * they can be (steps_check_cross): the intra round alone comes first. A
 * host whose ranks differ then fails without a word across (its ranks'
 * steps may differ): it names them and publishes that in the cross
 * children, where the other hosts' waits find it. With a cross backend
 * that runs the check natively, every host runs both rounds, so that
 * every rank reaches the same verdict. */
static int check_call(struct plx_comm *c, const struct plx__fp *fp, const struct plx_coll_args *a,
                      const char **step)
{
    struct plx__hier *h = c->hier;
    int inband = cross_inband(h, PLX_COLL_ALLREDUCE, PLX_U64, PLX_MIN);
    int cross = h->nhosts > 1 && !(inband && steps_check_cross(h, a));
    uint64_t w[2 * FPW];
    fp_put(fp, w);
    for (int i = 0; i < FPW; i++)
        w[FPW + i] = ~w[i];
    int rc = 0;
    if (h->nlocal > 1) {
        *step = "call check (intra)";
        if ((rc = plx_allreduce(h->intra, w, w, 2 * FPW, PLX_U64, PLX_MIN)) != 0)
            return rc;
        if (inband && words_differ(w))
            return name_mismatch(c, fp, 0, step);
    }
    if (cross) {
        *step = "call check (cross)";
        if ((rc = plx_allreduce(h->cross, w, w, 2 * FPW, PLX_U64, PLX_MIN)) != 0)
            return rc;
    }
    return words_differ(w) ? name_mismatch(c, fp, 1, step) : 0;
}

/* An allreduce whose L - 1 extra copies across (every local rank's cross
 * allreduce of the whole) come to at most this many bytes runs in two
 * steps, not three: a step costs more than they do, under 10 us on a
 * 1 Gbit/s link. Not much more: beyond the burst a shaper or a busy NIC
 * lets through, the extra copies queue on the link. */
#define HIER_TWO_STEP_EXTRA_BYTES 1024u

#define STEP(call, what)                                                                                 \
    do {                                                                                                 \
        if ((rc = (call)) != 0) {                                                                        \
            step = (what);                                                                               \
            goto fail;                                                                                   \
        }                                                                                                \
    } while (0)

static int run_steps(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp);

/* Waits for (and frees) the cross allreduces still in flight, keeping the
 * first error's message. After an error that breaks the communicator (a
 * lost rank, a timeout) it revokes both children first: the steps in flight
 * then fail now, not one timeout after another. */
static int drain(struct plx_comm *c, struct plx_work **w, int n, int rc)
{
    char first[1024] = ""; /* the size of the thread's error message (error.c) */
    int in_flight = 0;
    for (int i = 0; i < n; i++)
        in_flight |= w[i] != NULL;
    if (rc)
        snprintf(first, sizeof first, "%s", plx_last_error());
    if (in_flight && plx__breaks_comm(rc))
        plx__hier_revoke(c);
    for (int i = 0; i < n; i++)
        if (w[i]) {
            int r = plx_work_wait(w[i], plx_coll_backstop_ms(c->hier->cross->timeout_ms));
            rc = rc ? rc : r;
            plx_work_free(w[i]);
            w[i] = NULL;
        }
    return first[0] ? plx__err(rc, "%s", first) : rc;
}

/* The end of chunk (off, qk): wait for its cross allreduce (*w), then
 * gather the chunk within the host. The wait is the step's backstop: the
 * step's own timeout comes first and names the rank it waited for. */
static int finish_chunk(struct plx__hier *h, const struct plx_coll_args *a, struct plx_work **w, size_t off,
                        size_t qk, const char **step)
{
    size_t es = plx_dtype_size(a->dtype), L = (size_t)h->nlocal;
    char *chunk = (char *)a->recv + L * off * es;
    *step = "cross allreduce";
    int rc = plx_work_wait(*w, plx_coll_backstop_ms(h->cross->timeout_ms));
    if (rc)
        return rc; /* drain waits for it, after revoking */
    plx_work_free(*w);
    *w = NULL;
    *step = "intra allgather";
    return plx_allgather(h->intra, chunk + (size_t)h->local * qk * es, chunk, qk, a->dtype);
}

/* A large allreduce's three steps (intra reduce_scatter, cross allreduce,
 * intra allgather) over contiguous chunks of the first L * q elements,
 * pipelined: chunk k's cross allreduce runs on the cross child's executor
 * while this thread reduces chunk k + 1 and gathers chunk k - 1 within the
 * host, so the host's memory work and the network's overlap instead of
 * adding up. At most two cross allreduces are in flight; every one is
 * waited for before this returns, whatever failed. */
static int allreduce_chunked(struct plx_comm *c, const struct plx_coll_args *a, size_t q, size_t chunk_q,
                             const char **step)
{
    struct plx__hier *h = c->hier;
    size_t es = plx_dtype_size(a->dtype), L = (size_t)h->nlocal;
    struct plx_work *w[2] = {NULL, NULL};
    size_t prev_off = 0, prev_q = 0;
    int rc = 0, k = 0;
    for (size_t off = 0; off < q && rc == 0; off += chunk_q, k++) {
        size_t qk = q - off < chunk_q ? q - off : chunk_q, base = L * off * es;
        char *mine = (char *)a->recv + base + (size_t)h->local * qk * es;
        *step = "intra reduce_scatter";
        if ((rc = plx_reduce_scatter(h->intra, (const char *)a->send + base, mine, qk, a->dtype, a->op)) != 0)
            break;
        *step = "cross allreduce";
        if ((rc = plx_iallreduce(h->cross, mine, mine, qk, a->dtype, a->op, NULL, &w[k & 1])) != 0)
            break;
        if (k > 0)
            rc = finish_chunk(h, a, &w[(k - 1) & 1], prev_off, prev_q, step);
        prev_off = off;
        prev_q = qk;
    }
    if (rc == 0)
        rc = finish_chunk(h, a, &w[(k - 1) & 1], prev_off, prev_q, step);
    return drain(c, w, 2, rc);
}

int plx__hier_run(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp)
{
    /* The cross child's in-band check compares the user's call, not its
     * step's: hosts whose calls differ are told so in their first cross
     * message (naming both calls), whatever steps their counts chose. */
    c->hier->cross->stands_for = fp;
    int rc = run_steps(c, a, fp);
    c->hier->cross->stands_for = NULL;
    return rc;
}

static int run_steps(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp)
{
    struct plx__hier *h = c->hier;
    size_t es = plx_dtype_size(a->dtype), n = a->count, L = (size_t)h->nlocal;
    const char *s = a->send;
    char *d = a->recv;
    const char *step = "";
    int rc = 0;
    int check = (plx__diag_checks(c) & PLX__DIAG_INBAND) && (h->nlocal > 1 || h->nhosts > 1);
    if (check && (rc = check_call(c, fp, a, &step)) != 0)
        goto fail;
    /* The check's intra, then cross, allreduce (a barrier's cross steps
     * never stand for it) already waited for every rank: each cross
     * result stands on every host's, each of which stood on all its
     * ranks' (a barrier's own steps, with an answer). */
    if (check && a->coll == PLX_COLL_BARRIER)
        return 0;
    switch (a->coll) {
    case PLX_COLL_ALLREDUCE: {
        size_t q = n / L, tail = n % L;
        if (n * es * (L - 1) <= HIER_TWO_STEP_EXTRA_BYTES) {
            q = 0;
            tail = n;
        }
        /* Not where ranks are in one process (sim): its coroutine ranks
         * cannot hand a step to an executor thread. */
        size_t chunk_q = h->chunk_bytes / (L * es);
        if (q && chunk_q && q >= 2 * chunk_q && h->nhosts > 1 && L > 1 &&
            !(h->cross->caps.flags & PLX_CAP_IN_PROCESS)) {
            if ((rc = allreduce_chunked(c, a, q, chunk_q, &step)) != 0)
                goto fail;
        } else if (q) {
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
        return 0;
    }
fail:
    plx__err_prefix("hierarchical %s on '%s', step %s: ", plx_coll_name(a->coll), c->name, step);
    return rc;
}

int plx__hier_run_failing(struct plx_comm *c, const struct plx_coll_args *a, const struct plx__fp *fp, char *errmsg,
                          size_t errlen)
{
    int rc = plx__hier_run(c, a, fp);
    if (rc) {
        snprintf(errmsg, errlen, "%s", plx_last_error());
        /* A rank lost in one child leaves the ranks of other hosts blocked
         * in the other child, which sees nothing wrong: revoke both, so
         * every rank of c fails now, not at its timeout. */
        if (rc == PLX_ERR_PEER_LOST || rc == PLX_ERR_REVOKED)
            plx__hier_revoke(c);
        rc = plx__comm_fail(c, rc, errmsg, errlen);
    }
    return rc;
}

int plx__hier_revoke(struct plx_comm *c)
{
    int rc = 0;
    if (c->hier) {
        if (c->hier->intra->be->ops.comm_revoke)
            rc = plx_comm_revoke(c->hier->intra);
        if (c->hier->cross->be->ops.comm_revoke) {
            int r2 = plx_comm_revoke(c->hier->cross);
            rc = rc ? rc : r2;
        }
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

struct plx__backend *plx__hier_intra_backend(const struct plx_comm *c)
{
    return c->hier ? c->hier->intra->be : NULL;
}

const char *plx__hier_name(const struct plx_comm *c)
{
    return c->hier ? c->hier->name : NULL;
}
