/* train_3d - train a small residual MLP with data x pipeline x tensor
 * parallelism (plexus/parallel.h) and check the result.
 *
 * Model: L = S * V residual blocks of width D, block k computing
 *   y = x + W2_k tanh(W1_k x + b1_k) + b2_k      (W1_k: H x D, W2_k: D x H)
 * and the loss 1/(2N) sum over the N samples of |y_L - t|^2, plain SGD.
 * Mesh (dp, pp, tp), row-major over the world:
 *   dp  each replica takes a contiguous N / dp of the batch, in M
 *       micro-batches; gradients are summed over replicas (each scaled by
 *       1/N already), so every replica steps with the full-batch gradient.
 *   pp  stage s holds blocks c * S + s for its V chunks and runs the chosen
 *       schedule with plx_pipe_run (activations of mbs x D floats).
 *   tp  each block is column-parallel (W1, b1 split by hidden unit) then
 *       row-parallel (W2 split by hidden unit), joined by Megatron's f
 *       (PLX_TP_COPY) and g (PLX_TP_REDUCE); a hidden size that tp does not
 *       divide is padded with zero units, which stay zero.
 * Every step prints the loss, each stage's bubble fraction and its peak of
 * stashed activations. At the end the full weights are assembled from the
 * shards and compared with one process training on the whole batch: every
 * replica must agree exactly, and the difference to the single process must
 * stay below 1e-5 of the largest weight. The two runs differ only in the
 * order f32 sums are taken (per micro-batch then across replicas, and the
 * hidden-unit sum split across tp ranks): each reordering moves a sum by a
 * few ulps (~1e-7 relative), and 10 steps of SGD at lr 0.1 on a contracting
 * problem keep that well under 1e-5 (measured: about 1e-7).
 *
 *   train_3d [--schedule gpipe|1f1b|interleaved] [--dp N] [--pp N] [--tp N]
 *            [--chunks V] [--micro-batches M] [--steps K] [--hidden H]
 *            [--ranks N] [--backend NAME] [--fail-at STAGE:MB]
 * --fail-at makes replica 0's stage STAGE fail in step 1 (with --tp 1):
 * after plx_pipe_run every rank joins one allreduce of "did a pipeline
 * fail, where", so all of them stop naming the stage.
 * --ranks N runs N ranks as threads (sim by default); otherwise each process
 * is a rank of a job started by plexus-run (dp * pp * tp must be its size). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plexus/parallel.h"

enum { D = 4, MBS = 2 }; /* width; samples per micro-batch */
static const char *backend;
static int kind = PLX_PIPE_1F1B, DP = 2, PP = 2, TP = 2, V = 1, M = 4, steps = 10, H = 8, nranks;
static int fail_stage = -1, fail_mb = -1; /* --fail-at: a forward that fails in step 1 */
static const float lr = 0.1f;
static char world_url[64];

static int L(void)
{
    return PP * V;
}

static int N(void)
{
    return DP * M * MBS;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* The data set and the initial full weights, identical everywhere. */
static float *X, *T;

static void make_data(void)
{
    unsigned s = 4242;
    X = malloc((size_t)N() * D * sizeof *X);
    T = malloc((size_t)N() * D * sizeof *T);
    for (int n = 0; n < N(); n++)
        for (int d = 0; d < D; d++) {
            X[n * D + d] = 2 * lcg(&s);
            T[n * D + d] = 0;
        }
    for (int n = 0; n < N(); n++)
        for (int d = 0; d < D; d++)
            T[n * D + d] = tanhf(X[n * D + (d + 1) % D] - X[n * D + d]) + 0.05f * lcg(&s);
}

/* The full weights of block k: W1 (H x D), b1 (H), W2 (D x H), b2 (D). */
struct block {
    float *W1, *b1, *W2, *b2;
};

static void block_alloc(struct block *b, size_t h)
{
    b->W1 = calloc(h * D, sizeof(float));
    b->b1 = calloc(h, sizeof(float));
    b->W2 = calloc(D * h, sizeof(float));
    b->b2 = calloc(D, sizeof(float));
}

static void block_free(struct block *b)
{
    free(b->W1);
    free(b->b1);
    free(b->W2);
    free(b->b2);
}

static void block_init(struct block *b, int k)
{
    unsigned s = 1000u + (unsigned)k * 77u;
    for (int i = 0; i < H * D; i++)
        b->W1[i] = lcg(&s);
    for (int i = 0; i < H; i++)
        b->b1[i] = 0.1f * lcg(&s);
    for (int i = 0; i < D * H; i++)
        b->W2[i] = 0.5f * lcg(&s);
    for (int i = 0; i < D; i++)
        b->b2[i] = 0.1f * lcg(&s);
}

/* ---- the single-process reference ------------------------------------- */

/* The tanh branch on rows samples: a (rows x h) = tanh(W1 x + b1), z = W2 a. */
static void branch_fwd(const struct block *b, size_t h, int rows, const float *x, float *a, float *z)
{
    for (int r = 0; r < rows; r++) {
        for (size_t j = 0; j < h; j++) {
            float s = b->b1[j];
            for (int d = 0; d < D; d++)
                s += b->W1[j * D + (size_t)d] * x[r * D + d];
            a[(size_t)r * h + j] = tanhf(s);
        }
        for (int d = 0; d < D; d++) {
            float acc = 0;
            for (size_t j = 0; j < h; j++)
                acc += b->W2[(size_t)d * h + j] * a[(size_t)r * h + j];
            z[r * D + d] = acc;
        }
    }
}

/* The whole block: y = x + W2 a + b2. */
static void block_fwd(const struct block *b, size_t h, int rows, const float *x, float *a, float *y)
{
    branch_fwd(b, h, rows, x, a, y);
    for (int i = 0; i < rows * D; i++)
        y[i] = x[i] + y[i] + b->b2[i % D];
}

/* Backward of the W2 a part: accumulate gradients into g, write the input
 * gradient of the tanh branch (without the residual) into dxp. */
static void block_bwd(const struct block *b, struct block *g, size_t h, int rows, const float *x, const float *a,
                      const float *dy, float *dxp)
{
    for (int r = 0; r < rows; r++) {
        for (int d = 0; d < D; d++) {
            g->b2[d] += dy[r * D + d];
            dxp[r * D + d] = 0;
        }
        for (size_t j = 0; j < h; j++) {
            float da = 0, act = a[(size_t)r * h + j];
            for (int d = 0; d < D; d++) {
                da += b->W2[(size_t)d * h + j] * dy[r * D + d];
                g->W2[(size_t)d * h + j] += dy[r * D + d] * act;
            }
            da *= 1 - act * act;
            g->b1[j] += da;
            for (int d = 0; d < D; d++) {
                g->W1[j * D + (size_t)d] += da * x[r * D + d];
                dxp[r * D + d] += b->W1[j * D + (size_t)d] * da;
            }
        }
    }
}

static void sgd(float *p, float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] -= lr * g[i];
        g[i] = 0;
    }
}

static void block_sgd(struct block *b, struct block *g, size_t h)
{
    sgd(b->W1, g->W1, h * D);
    sgd(b->b1, g->b1, h);
    sgd(b->W2, g->W2, D * h);
    sgd(b->b2, g->b2, D);
}

static void reference(struct block *ref)
{
    int n = N(), nb = L();
    struct block *g = calloc((size_t)nb, sizeof *g);
    float *xs = malloc((size_t)(nb + 1) * n * D * sizeof(float)), *as = malloc((size_t)nb * n * H * sizeof(float));
    float *dy = malloc((size_t)n * D * sizeof(float)), *dxp = malloc((size_t)n * D * sizeof(float));
    for (int k = 0; k < nb; k++) {
        block_alloc(&ref[k], (size_t)H);
        block_alloc(&g[k], (size_t)H);
        block_init(&ref[k], k);
    }
    for (int s = 0; s < steps; s++) {
        memcpy(xs, X, (size_t)n * D * sizeof(float));
        for (int k = 0; k < nb; k++)
            block_fwd(&ref[k], (size_t)H, n, xs + (size_t)k * n * D, as + (size_t)k * n * H,
                      xs + (size_t)(k + 1) * n * D);
        for (int i = 0; i < n * D; i++)
            dy[i] = (xs[(size_t)nb * n * D + (size_t)i] - T[i]) / (float)n;
        for (int k = nb - 1; k >= 0; k--) {
            block_bwd(&ref[k], &g[k], (size_t)H, n, xs + (size_t)k * n * D, as + (size_t)k * n * H, dy, dxp);
            for (int i = 0; i < n * D; i++)
                dy[i] += dxp[i];
        }
        for (int k = 0; k < nb; k++)
            block_sgd(&ref[k], &g[k], (size_t)H);
    }
    for (int k = 0; k < nb; k++)
        block_free(&g[k]);
    free(g);
    free(xs);
    free(as);
    free(dy);
    free(dxp);
}

/* ---- one rank of the 3-D job -------------------------------------------- */

struct stash { /* what backward of (chunk, mb) needs */
    float *x, *a, *dy;
};

struct rank {
    struct plx_comm *world, *dp, *pp, *tp;
    int me, dpi, ppi, tpi;
    size_t h; /* local hidden units (padded) */
    struct plx_tp_linear col, row;
    struct block *w, *g; /* per local chunk: shards */
    struct stash *st;    /* per (chunk, mb) */
    float loss;
    int step;
};

static int vstage(const struct rank *r, int chunk)
{
    return chunk * PP + r->ppi;
}

static int fwd_cb(void *user, int chunk, int mb, const void *in, void *out)
{
    struct rank *r = user;
    struct block *b = &r->w[chunk];
    struct stash *st = &r->st[chunk * M + mb];
    size_t h = r->h;
    int first = (r->dpi * M + mb) * MBS, rc;
    st->x = malloc(MBS * D * sizeof(float));
    st->a = malloc(MBS * h * sizeof(float));
    float zp[MBS * D], z[MBS * D], y[MBS * D];
    if (!st->x || !st->a)
        return PLX_ERR_NOMEM;
    /* f: identity forward (its backward sums the input gradient over tp) */
    if ((rc = plx_tp_forward(r->tp, PLX_TP_COPY, in ? in : X + (size_t)first * D, st->x, MBS * D, PLX_F32)))
        return rc;
    /* this rank's hidden units; g sums the partial outputs over tp */
    branch_fwd(b, h, MBS, st->x, st->a, zp);
    if ((rc = plx_tp_forward(r->tp, PLX_TP_REDUCE, zp, z, MBS * D, PLX_F32)))
        return rc;
    for (int i = 0; i < MBS * D; i++)
        y[i] = st->x[i] + z[i] + b->b2[i % D];
    /* --fail-at: replica 0's stage fails here (runs with --tp 1, see main). */
    if (r->step == 1 && r->dpi == 0 && r->ppi == fail_stage && mb == fail_mb && chunk == 0)
        return PLX_ERR_INTERNAL;
    if (out) {
        memcpy(out, y, sizeof y);
        return 0;
    }
    /* the last block: loss and its gradient, 1/(2N) sum |y - t|^2 */
    st->dy = malloc(MBS * D * sizeof(float));
    if (!st->dy)
        return PLX_ERR_NOMEM;
    for (int i = 0; i < MBS * D; i++) {
        float e = y[i] - T[(size_t)first * D + (size_t)i];
        r->loss += 0.5f * e * e;
        st->dy[i] = e / (float)N();
    }
    return 0;
}

static int bwd_cb(void *user, int chunk, int mb, const void *grad_out, void *grad_in)
{
    struct rank *r = user;
    struct stash *st = &r->st[chunk * M + mb];
    float dz[MBS * D], dxp[MBS * D], dx[MBS * D];
    const float *dy = grad_out ? grad_out : st->dy;
    int rc;
    /* g: identity backward; the row-parallel W2 and the column-parallel W1
     * shards take their gradients; f: the input gradient summed over tp. */
    if ((rc = plx_tp_backward(r->tp, PLX_TP_REDUCE, dy, dz, MBS * D, PLX_F32)))
        return rc;
    block_bwd(&r->w[chunk], &r->g[chunk], r->h, MBS, st->x, st->a, dz, dxp);
    if ((rc = plx_tp_backward(r->tp, PLX_TP_COPY, dxp, dx, MBS * D, PLX_F32)))
        return rc;
    if (grad_in)
        for (int i = 0; i < MBS * D; i++)
            ((float *)grad_in)[i] = dy[i] + dx[i]; /* the residual's gradient plus the branch's */
    free(st->x);
    free(st->a);
    free(st->dy);
    *st = (struct stash){0};
    return 0;
}

#define TRY(call)                                                                                           \
    do {                                                                                                    \
        int rc_ = (call);                                                                                   \
        if (rc_) {                                                                                          \
            fprintf(stderr, "train_3d: rank %d: %s: %s: %s\n", r->me, #call, plx_err_name(rc_), plx_last_error()); \
            goto out;                                                                                       \
        }                                                                                                   \
    } while (0)

/* Sum the gradients over the replicas: each is already scaled by 1/N. */
static int allreduce_grads(struct rank *r)
{
    for (int c = 0; c < V; c++) {
        struct block *g = &r->g[c];
        int rc = plx_allreduce(r->dp, g->W1, g->W1, r->h * D, PLX_F32, PLX_SUM);
        if (!rc)
            rc = plx_allreduce(r->dp, g->b1, g->b1, r->h, PLX_F32, PLX_SUM);
        if (!rc)
            rc = plx_allreduce(r->dp, g->W2, g->W2, D * r->h, PLX_F32, PLX_SUM);
        if (!rc)
            rc = plx_allreduce(r->dp, g->b2, g->b2, D, PLX_F32, PLX_SUM);
        if (rc)
            return rc;
    }
    return 0;
}

/* The full weights of every block on every rank: shards of dp replica 0
 * placed into zeroed full buffers (b2 from tp rank 0 only) and summed. */
static int assemble(struct rank *r, struct block *full)
{
    for (int k = 0; k < L(); k++) {
        block_alloc(&full[k], (size_t)H);
        int c = k / PP;
        if (r->dpi == 0 && k % PP == r->ppi) {
            plx_tp_linear_unshard(&r->col, r->w[c].W1, r->w[c].b1, full[k].W1, full[k].b1, PLX_F32);
            plx_tp_linear_unshard(&r->row, r->w[c].W2, NULL, full[k].W2, NULL, PLX_F32);
            if (r->tpi == 0)
                memcpy(full[k].b2, r->w[c].b2, D * sizeof(float));
        }
        float *parts[] = {full[k].W1, full[k].b1, full[k].W2, full[k].b2};
        size_t counts[] = {(size_t)H * D, (size_t)H, (size_t)D * H, D};
        for (int p = 0; p < 4; p++) {
            int rc = plx_allreduce(r->world, parts[p], parts[p], counts[p], PLX_F32, PLX_SUM);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Replicas must hold identical shards: max - min over dp is zero. */
static int replicas_agree(struct rank *r, int *same)
{
    *same = 1;
    for (int c = 0; c < V; c++) {
        float *parts[] = {r->w[c].W1, r->w[c].b1, r->w[c].W2, r->w[c].b2};
        size_t counts[] = {r->h * D, r->h, D * r->h, D};
        for (int p = 0; p < 4; p++) {
            float *hi = malloc(counts[p] * sizeof(float)), *lo = malloc(counts[p] * sizeof(float));
            int rc = plx_allreduce(r->dp, parts[p], hi, counts[p], PLX_F32, PLX_MAX);
            if (!rc)
                rc = plx_allreduce(r->dp, parts[p], lo, counts[p], PLX_F32, PLX_MIN);
            for (size_t i = 0; !rc && i < counts[p]; i++)
                *same &= hi[i] == lo[i];
            free(hi);
            free(lo);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int check(struct rank *r)
{
    int status = 1, same = 0, all_same = 0;
    struct block *full = calloc((size_t)L(), sizeof *full), *ref = calloc((size_t)L(), sizeof *ref);
    TRY(replicas_agree(r, &same));
    TRY(plx_allreduce(r->world, &same, &all_same, 1, PLX_I32, PLX_MIN));
    TRY(assemble(r, full));
    reference(ref);
    double maxdiff = 0, maxref = 0;
    for (int k = 0; k < L(); k++) {
        const float *a[] = {full[k].W1, full[k].b1, full[k].W2, full[k].b2},
                    *b[] = {ref[k].W1, ref[k].b1, ref[k].W2, ref[k].b2};
        size_t counts[] = {(size_t)H * D, (size_t)H, (size_t)D * H, D};
        for (int p = 0; p < 4; p++)
            for (size_t i = 0; i < counts[p]; i++) {
                maxdiff = fmax(maxdiff, fabs((double)a[p][i] - b[p][i]));
                maxref = fmax(maxref, fabs((double)b[p][i]));
            }
    }
    double rel = maxdiff / fmax(maxref, 1e-30);
    if (r->me == 0)
        printf("%s dp=%d pp=%d tp=%d chunks=%d micro-batches=%d: replicas equal: %s; max |w - w_single| = %.3g "
               "(relative %.3g, limit 1e-5)\n", plx_pipe_kind_name(kind), DP, PP, TP, V, M,
               all_same ? "yes" : "NO", maxdiff, rel);
    status = !all_same || !(rel <= 1e-5);
out:
    for (int k = 0; full && k < L(); k++)
        block_free(&full[k]);
    for (int k = 0; ref && k < L(); k++)
        block_free(&ref[k]);
    free(full);
    free(ref);
    return status;
}

static int train(struct plx_comm *world)
{
    struct rank rr = {.world = world, .me = plx_comm_rank(world)}, *r = &rr;
    struct plx_nd_mesh *mesh = NULL;
    struct plx_pipe_schedule *sched = NULL;
    int status = 1;
    const char *names[] = {"dp", "pp", "tp"};
    int sizes[] = {DP, PP, TP};
    TRY(plx_nd_mesh_create(world, 3, names, sizes, &mesh));
    r->dp = plx_nd_mesh_comm(mesh, 0);
    r->pp = plx_nd_mesh_comm(mesh, 1);
    r->tp = plx_nd_mesh_comm(mesh, 2);
    r->dpi = plx_nd_mesh_coord(mesh, 0);
    r->ppi = plx_nd_mesh_coord(mesh, 1);
    r->tpi = plx_nd_mesh_coord(mesh, 2);
    TRY(plx_tp_linear_init(&r->col, PLX_TP_COLUMN, D, (size_t)H, r->tpi, TP, PLX_TP_PAD));
    TRY(plx_tp_linear_init(&r->row, PLX_TP_ROW, (size_t)H, D, r->tpi, TP, PLX_TP_PAD));
    r->h = r->col.local_out;
    r->w = calloc((size_t)V, sizeof *r->w);
    r->g = calloc((size_t)V, sizeof *r->g);
    r->st = calloc((size_t)V * (size_t)M, sizeof *r->st);
    for (int c = 0; c < V; c++) {
        struct block full;
        block_alloc(&full, (size_t)H);
        block_init(&full, vstage(r, c));
        block_alloc(&r->w[c], r->h);
        block_alloc(&r->g[c], r->h);
        TRY(plx_tp_linear_shard(&r->col, full.W1, full.b1, r->w[c].W1, r->w[c].b1, PLX_F32));
        TRY(plx_tp_linear_shard(&r->row, full.W2, full.b2, r->w[c].W2, r->w[c].b2, PLX_F32));
        block_free(&full);
    }
    TRY(plx_pipe_schedule_create(kind, PP, M, V, &sched));
    TRY(plx_pipe_schedule_check(sched, 1, 1, NULL)); /* proven before it runs */
    struct plx_pipe_callbacks cb = {sizeof cb, r, fwd_cb, bwd_cb};
    struct plx_pipe_options o;
    plx_pipe_options_init(&o);
    o.act_count = MBS * D;
    o.timeout_ms = 30000;
    for (int s = 0; s < steps; s++) {
        struct plx_pipe_stats st = {.struct_size = sizeof st};
        r->loss = 0;
        r->step = s;
        double t0 = now_s();
        int rc = plx_pipe_run(r->pp, sched, &cb, &o, &st);
        if (rc) /* the pipeline communicator is aborted now; world, dp and tp still work */
            fprintf(stderr, "train_3d: rank %d: step %d: %s: %s\n", r->me, s, plx_err_name(rc), plx_last_error());
        /* Every rank learns whether some pipeline failed, and where: the
         * other replicas' pipelines ran to the end and know nothing yet. */
        int32_t mine_f[3] = {rc != 0, rc ? st.failed_stage + 1 : 0, rc ? st.failed_mb + 1 : 0}, any[3];
        TRY(plx_allreduce(world, mine_f, any, 3, PLX_I32, PLX_MAX));
        if (any[0]) {
            int ok = fail_stage >= 0 && any[1] - 1 == fail_stage && any[2] - 1 == fail_mb;
            printf("rank %d (dp %d, pp %d, tp %d): step %d: pipeline stage %d failed at micro-batch %d; stopping "
                   "after %.2f s%s\n", r->me, r->dpi, r->ppi, r->tpi, s, any[1] - 1, any[2] - 1, now_s() - t0,
                   fail_stage >= 0 ? (ok ? " (the failure --fail-at asked for)" : " (NOT the one asked for)") : "");
            status = ok && now_s() - t0 < 10 ? 0 : 1;
            goto out;
        }
        TRY(allreduce_grads(r));
        for (int c = 0; c < V; c++)
            block_sgd(&r->w[c], &r->g[c], r->h);
        /* Report: the loss from the last stage of tp rank 0 of every
         * replica; per stage bubble and peak from replica 0, tp rank 0. */
        float mine[1 + 2 * 16] = {0}, all[1 + 2 * 16];
        if (r->ppi == PP - 1 && r->tpi == 0)
            mine[0] = r->loss;
        if (r->dpi == 0 && r->tpi == 0 && r->ppi < 16) {
            mine[1 + r->ppi] = (float)st.bubble;
            mine[17 + r->ppi] = (float)st.peak_live;
        }
        TRY(plx_allreduce(world, mine, all, 33, PLX_F32, PLX_SUM));
        if (r->me == 0) {
            char line[512];
            size_t n = (size_t)snprintf(line, sizeof line, "step %2d loss %.6f bubble", s, all[0] / N());
            for (int p = 0; p < PP && p < 16; p++)
                n += (size_t)snprintf(line + n, sizeof line - n, "%s%.3f", p ? "/" : " ", all[1 + p]);
            n += (size_t)snprintf(line + n, sizeof line - n, " (ideal %.3f) peak activations",
                                  (double)(PP - 1) / (V * M + PP - 1));
            for (int p = 0; p < PP && p < 16; p++)
                n += (size_t)snprintf(line + n, sizeof line - n, "%s%d", p ? "/" : " ", (int)all[17 + p]);
            printf("%s\n", line);
        }
    }
    status = fail_stage >= 0 ? 1 : check(r); /* --fail-at: reaching here means no failure was seen */
out:
    for (int c = 0; r->w && c < V; c++) {
        block_free(&r->w[c]);
        block_free(&r->g[c]);
    }
    free(r->w);
    free(r->g);
    for (int k = 0; r->st && k < V * M; k++) { /* what a failed step left stashed */
        free(r->st[k].x);
        free(r->st[k].a);
        free(r->st[k].dy);
    }
    free(r->st);
    plx_pipe_schedule_destroy(sched);
    plx_nd_mesh_destroy(mesh);
    return status;
}

struct thread_arg {
    int rank, status;
};

static void *rank_main(void *p)
{
    struct thread_arg *t = p;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend ? backend : "sim";
    o.rank = t->rank;
    o.size = nranks;
    o.init = world_url;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "train_3d: rank %d: %s\n", t->rank, plx_last_error());
        t->status = 2;
        return NULL;
    }
    t->status = train(c);
    plx_comm_destroy(c);
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: train_3d [--schedule gpipe|1f1b|interleaved] [--dp N] [--pp N] [--tp N] [--chunks V]\n"
               "                [--micro-batches M] [--steps K] [--hidden H] [--ranks N] [--backend NAME]\n"
               "                [--fail-at STAGE:MB]\n"
               "Trains a residual MLP with data x pipeline x tensor parallelism (default 2 x 2 x 2, 1f1b;\n"
               "interleaved defaults to 2 chunks) and checks the weights against one process training on\n"
               "the whole batch. --ranks N runs N threads (sim); otherwise run it under plexus-run.\n"
               "--fail-at STAGE:MB (with --tp 1) makes replica 0's pipeline stage STAGE fail in the forward of\n"
               "micro-batch MB in step 1; every rank must then stop, naming it (exit status 0 when they all did).\n");
}

int main(int argc, char **argv)
{
    int chunks = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--schedule") && (kind = plx_pipe_kind_from_name(v)) < 0) {
            fprintf(stderr, "train_3d: unknown schedule '%s' (gpipe, 1f1b, interleaved)\n", v);
            return 2;
        } else if (!strcmp(a, "--schedule"))
            continue;
        int *dst = !strcmp(a, "--dp") ? &DP : !strcmp(a, "--pp") ? &PP : !strcmp(a, "--tp") ? &TP
                 : !strcmp(a, "--chunks") ? &chunks : !strcmp(a, "--micro-batches") ? &M
                 : !strcmp(a, "--steps") ? &steps : !strcmp(a, "--hidden") ? &H : !strcmp(a, "--ranks") ? &nranks
                                                                                : NULL;
        if (!strcmp(a, "--fail-at")) {
            if (sscanf(v, "%d:%d", &fail_stage, &fail_mb) != 2 || fail_stage < 0 || fail_mb < 0) {
                usage(stderr);
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--backend")) {
            backend = v;
            continue;
        }
        if (!dst || (*dst = atoi(v)) <= 0) {
            usage(stderr);
            return 2;
        }
    }
    V = kind == PLX_PIPE_INTERLEAVED ? (chunks ? chunks : 2) : 1;
    if (fail_stage >= 0 && TP != 1) {
        /* The tp ranks of a stage run tp collectives inside the callbacks,
         * and each learns of the failure from its own pipeline, so one may
         * stop while its tp peer is inside such a collective: that peer then
         * waits out the tp communicator's timeout, which this demo avoids. */
        fprintf(stderr, "train_3d: --fail-at needs --tp 1 (a stage's tp ranks learn of a failure at different "
                        "points; one may then wait in a tp collective until its timeout)\n");
        return 2;
    }
    if (PP > 16) {
        fprintf(stderr, "train_3d: at most 16 pipeline stages\n");
        return 2;
    }
    make_data();
    int status = 0;
    if (nranks > 0) {
        if (nranks != DP * PP * TP || nranks > 64) {
            fprintf(stderr, "train_3d: --ranks %d but dp x pp x tp = %d\n", nranks, DP * PP * TP);
            return 2;
        }
        snprintf(world_url, sizeof world_url, "mem://train3d-%d", (int)getpid());
        pthread_t th[64];
        struct thread_arg args[64];
        for (int i = 0; i < nranks; i++) {
            args[i] = (struct thread_arg){i, 0};
            pthread_create(&th[i], NULL, rank_main, &args[i]);
        }
        for (int i = 0; i < nranks; i++) {
            pthread_join(th[i], NULL);
            if (args[i].status > status)
                status = args[i].status;
        }
    } else {
        struct plx_comm_options o;
        plx_comm_options_init(&o);
        o.backend = backend;
        struct plx_comm *c;
        if (plx_comm_init(&o, &c)) {
            fprintf(stderr, "train_3d: %s\n", plx_last_error());
            return 2;
        }
        status = train(c);
        plx_comm_destroy(c);
        plx_finalize();
    }
    free(X);
    free(T);
    return status;
}
