/* train_mlp - train a small MLP data-parallel with any strategy of
 * plexus/strategy.h, and check the result.
 *
 * Model: x (D) -> tanh(W1 x + b1) (H) -> w2 . h + b2, mean squared error,
 * plain SGD, on a synthetic data set with a fixed seed. Each rank takes a
 * contiguous slice of the global batch and scales its gradient by P/N, so
 * averaging over ranks gives exactly the full-batch mean gradient.
 *
 * At the end every rank checks that (a) all ranks hold bit-identical weights
 * and (b) they match one process training on the whole batch (computed here
 * too) within a relative 1e-5: the only difference is the order in which the
 * per-sample gradients are summed (ranks' partial sums, then the allreduce),
 * which perturbs f32 results by a few ulps per step.
 *
 *   train_mlp --strategy ddp-sync|ddp-overlap|fsdp-full|fsdp-grad-op|fsdp-hybrid|no-shard
 *             [--backend NAME] [--ranks N] [--steps S] [--local-size L]
 * --ranks N runs N ranks as threads (sim); otherwise each process is a rank
 * of a job started by plexus-run. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "plexus/strategy.h"

enum { D = 8, H = 16, N = 64, NPARAM = 4 };
static const size_t sizes[NPARAM] = {H * D, H, H, 1}; /* W1, b1, w2, b2 */
static const char *strategy = "ddp-sync", *backend;
static int steps = 20, nranks, local_size;
static const float lr = 0.05f;
static char world[64];

struct model {
    float *p[NPARAM];
};

/* Deterministic data and initial weights, identical everywhere. */
static float lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static float X[N][D], Y[N];

static void make_data(void)
{
    unsigned s = 12345;
    for (int n = 0; n < N; n++) {
        float t = 0;
        for (int d = 0; d < D; d++) {
            X[n][d] = lcg(&s) * 2;
            t += X[n][d] * (float)(d % 3 - 1);
        }
        Y[n] = tanhf(t) + 0.1f * lcg(&s);
    }
}

static void init_params(float *p[NPARAM])
{
    unsigned s = 777;
    for (int k = 0; k < NPARAM; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            p[k][i] = lcg(&s) * 0.5f;
}

/* Loss over samples [lo, hi) and gradients scaled by `scale` into g. */
static float forward_backward(float *const p[NPARAM], float *const g[NPARAM], int lo, int hi, float scale)
{
    const float *W1 = p[0], *b1 = p[1], *w2 = p[2], *b2 = p[3];
    for (int k = 0; k < NPARAM; k++)
        memset(g[k], 0, sizes[k] * sizeof(float));
    float loss = 0, h[H];
    for (int n = lo; n < hi; n++) {
        float out = b2[0];
        for (int j = 0; j < H; j++) {
            float a = b1[j];
            for (int d = 0; d < D; d++)
                a += W1[j * D + d] * X[n][d];
            h[j] = tanhf(a);
            out += w2[j] * h[j];
        }
        float err = out - Y[n];
        loss += err * err;
        float dout = 2 * err * scale;
        g[3][0] += dout;
        for (int j = 0; j < H; j++) {
            g[2][j] += dout * h[j];
            float da = dout * w2[j] * (1 - h[j] * h[j]);
            g[1][j] += da;
            for (int d = 0; d < D; d++)
                g[0][j * D + d] += da * X[n][d];
        }
    }
    return loss;
}

static void sgd(float *p, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] -= lr * g[i];
}

static int alloc_model(struct model *m)
{
    for (int k = 0; k < NPARAM; k++)
        if (!(m->p[k] = calloc(sizes[k], sizeof(float))))
            return -1;
    return 0;
}

static void free_model(struct model *m)
{
    for (int k = 0; k < NPARAM; k++)
        free(m->p[k]);
}

#define TRY(call)                                                                               \
    do {                                                                                        \
        int rc_ = (call);                                                                       \
        if (rc_) {                                                                              \
            fprintf(stderr, "train_mlp: rank %d: %s: %s: %s\n", me, #call, plx_err_name(rc_), plx_last_error()); \
            goto out;                                                                           \
        }                                                                                       \
    } while (0)

/* Train with the chosen strategy; final full weights in w. */
static int train(struct plx_comm *c, struct model *w)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c), status = 1;
    int lo = (int)((long)N * me / P), hi = (int)((long)N * (me + 1) / P);
    float scale = (float)P / N; /* averaging over ranks then gives the mean over N */
    struct model g = {0};
    struct plx_ddp *ddp = NULL;
    struct plx_fsdp *fsdp = NULL;
    struct plx_mesh *mesh = NULL;
    int units[NPARAM];
    if (alloc_model(&g))
        return 1;
    init_params(w->p);
    int is_ddp = !strncmp(strategy, "ddp", 3);
    if (is_ddp) {
        struct plx_ddp_options o;
        plx_ddp_options_init(&o);
        o.bucket_cap_bytes = 256; /* several buckets even for this small model */
        TRY(plx_ddp_create(c, &o, &ddp));
        for (int k = 0; k < NPARAM; k++)
            TRY(plx_ddp_register(ddp, g.p[k], sizes[k], PLX_F32, NULL));
        int dts[NPARAM] = {PLX_F32, PLX_F32, PLX_F32, PLX_F32};
        TRY(plx_broadcast_params(c, (void *const *)w->p, sizes, dts, NPARAM, 0));
    } else {
        struct plx_fsdp_options o;
        plx_fsdp_options_init(&o);
        o.strategy = !strcmp(strategy, "fsdp-full")      ? PLX_FSDP_FULL_SHARD
                     : !strcmp(strategy, "fsdp-grad-op") ? PLX_FSDP_SHARD_GRAD_OP
                     : !strcmp(strategy, "no-shard")     ? PLX_FSDP_NO_SHARD
                                                         : PLX_FSDP_HYBRID_SHARD;
        if (o.strategy == PLX_FSDP_HYBRID_SHARD) {
            TRY(plx_mesh_create(c, local_size, &mesh));
            o.mesh = mesh;
        }
        TRY(plx_fsdp_create(c, &o, &fsdp));
        for (int k = 0; k < NPARAM; k++)
            TRY(plx_fsdp_add_unit(fsdp, w->p[k], sizes[k], PLX_F32, &units[k]));
    }
    for (int s = 0; s < steps; s++) {
        float loss;
        if (is_ddp) {
            int overlap = !strcmp(strategy, "ddp-overlap");
            TRY(plx_ddp_begin(ddp, overlap ? PLX_DDP_OVERLAP : PLX_DDP_SYNC));
            loss = forward_backward(w->p, g.p, lo, hi, scale);
            for (int k = NPARAM - 1; k >= 0; k--) /* backward order: last layer first */
                TRY(plx_ddp_ready(ddp, k));
            TRY(plx_ddp_finish(ddp));
            for (int k = 0; k < NPARAM; k++)
                sgd(w->p[k], g.p[k], sizes[k]);
        } else {
            /* Gather every unit (prefetching the next), compute, reduce-scatter. */
            TRY(plx_fsdp_prefetch(fsdp, units[0], w->p[0]));
            for (int k = 0; k < NPARAM; k++) {
                TRY(plx_fsdp_gather(fsdp, units[k], w->p[k]));
                if (k + 1 < NPARAM)
                    TRY(plx_fsdp_prefetch(fsdp, units[k + 1], w->p[k + 1]));
            }
            loss = forward_backward(w->p, g.p, lo, hi, scale);
            for (int k = NPARAM - 1; k >= 0; k--)
                TRY(plx_fsdp_reduce_grad(fsdp, units[k], g.p[k]));
            for (int k = 0; k < NPARAM; k++) {
                size_t n;
                float *shard = plx_fsdp_shard(fsdp, units[k], &n);
                sgd(shard, plx_fsdp_grad_shard(fsdp, units[k], NULL), n);
                TRY(plx_fsdp_regather(fsdp, units[k]));
            }
        }
        float total = 0;
        TRY(plx_allreduce(c, &loss, &total, 1, PLX_F32, PLX_SUM));
        if (me == 0)
            printf("step %2d loss %.6f\n", s, total / N);
    }
    if (fsdp) /* the final full weights */
        for (int k = 0; k < NPARAM; k++)
            TRY(plx_fsdp_gather(fsdp, units[k], w->p[k]));
    status = 0;
out:
    plx_ddp_destroy(ddp);
    plx_fsdp_destroy(fsdp);
    plx_mesh_destroy(mesh);
    free_model(&g);
    return status;
}

static int check(struct plx_comm *c, struct model *w)
{
    int me = plx_comm_rank(c), bad = 0;
    struct model ref = {0}, g = {0};
    if (alloc_model(&ref) || alloc_model(&g))
        return 1;
    init_params(ref.p);
    for (int s = 0; s < steps; s++) {
        forward_backward(ref.p, g.p, 0, N, 1.0f / N);
        for (int k = 0; k < NPARAM; k++)
            sgd(ref.p[k], g.p[k], sizes[k]);
    }
    double maxdiff = 0, maxref = 0, spread = 0;
    for (int k = 0; k < NPARAM; k++) {
        float *hi = malloc(sizes[k] * sizeof(float)), *lo = malloc(sizes[k] * sizeof(float));
        int rc = plx_allreduce(c, w->p[k], hi, sizes[k], PLX_F32, PLX_MAX);
        if (!rc)
            rc = plx_allreduce(c, w->p[k], lo, sizes[k], PLX_F32, PLX_MIN);
        if (rc) {
            fprintf(stderr, "train_mlp: rank %d: check: %s\n", me, plx_last_error());
            bad = 1;
        }
        for (size_t i = 0; i < sizes[k] && !rc; i++) {
            spread = fmax(spread, (double)hi[i] - lo[i]);
            maxdiff = fmax(maxdiff, fabs((double)w->p[k][i] - ref.p[k][i]));
            maxref = fmax(maxref, fabs((double)ref.p[k][i]));
        }
        free(hi);
        free(lo);
    }
    double rel = maxdiff / fmax(maxref, 1e-30);
    if (me == 0)
        printf("%s on %d ranks: weights equal on all ranks: %s; max |w - w_single| = %.3g (relative %.3g)\n", strategy,
               plx_comm_size(c), spread == 0 ? "yes" : "NO", maxdiff, rel);
    if (spread != 0 || rel > 1e-5)
        bad = 1;
    free_model(&ref);
    free_model(&g);
    return bad;
}

static int run(struct plx_comm *c)
{
    struct model w = {0};
    if (alloc_model(&w))
        return 1;
    int rc = train(c, &w);
    if (!rc)
        rc = check(c, &w);
    free_model(&w);
    return rc;
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
    o.local_size = local_size > 0 ? local_size : -1;
    o.init = world;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "train_mlp: rank %d: %s\n", t->rank, plx_last_error());
        t->status = 2;
        return NULL;
    }
    t->status = run(c);
    plx_comm_destroy(c);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--strategy") && v)
            strategy = argv[++i];
        else if (!strcmp(a, "--backend") && v)
            backend = argv[++i];
        else if (!strcmp(a, "--ranks") && v)
            nranks = atoi(argv[++i]);
        else if (!strcmp(a, "--steps") && v)
            steps = atoi(argv[++i]);
        else if (!strcmp(a, "--local-size") && v)
            local_size = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: train_mlp --strategy ddp-sync|ddp-overlap|fsdp-full|fsdp-grad-op|fsdp-hybrid|"
                            "no-shard [--backend NAME] [--ranks N] [--steps S] [--local-size L]\n");
            return 2;
        }
    }
    const char *known[] = {"ddp-sync", "ddp-overlap", "fsdp-full", "fsdp-grad-op", "fsdp-hybrid", "no-shard"};
    int ok = 0;
    for (int k = 0; k < 6; k++)
        ok |= !strcmp(strategy, known[k]);
    if (!ok) {
        fprintf(stderr, "train_mlp: unknown strategy '%s'\n", strategy);
        return 2;
    }
    make_data();
    if (nranks > 0) {
        snprintf(world, sizeof world, "mem://train-%d", (int)getpid());
        pthread_t th[64];
        struct thread_arg args[64];
        if (nranks > 64)
            return 2;
        for (int i = 0; i < nranks; i++) {
            args[i] = (struct thread_arg){i, 0};
            pthread_create(&th[i], NULL, rank_main, &args[i]);
        }
        int status = 0;
        for (int i = 0; i < nranks; i++) {
            pthread_join(th[i], NULL);
            if (args[i].status > status)
                status = args[i].status;
        }
        return status;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.local_size = local_size > 0 ? local_size : -1;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "train_mlp: %s\n", plx_last_error());
        return 2;
    }
    int status = run(c);
    plx_comm_destroy(c);
    plx_finalize();
    return status;
}
