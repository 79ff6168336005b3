/* train_mlp - train a small MLP data-parallel with any strategy of
 * plexus/strategy.h, and check the result.
 *
 * Model: x (D) -> tanh(W1 x + b1) (H) -> w2 . h + b2, mean squared error,
 * plain SGD, on a synthetic data set with a fixed seed. Each rank takes a
 * contiguous slice of the global batch and scales its gradient by P/N, so
 * averaging over ranks gives exactly the full-batch mean gradient.
 *
 * Backward runs layer by layer and hands each gradient on as soon as it is
 * computed (plx_ddp_ready, plx_fsdp_ireduce_grad), so communication overlaps
 * the rest of backward. --accum K splits each rank's slice into K
 * micro-batches: DDP runs the first K-1 in NO_SYNC, FSDP reduces each and
 * its gradient shards accumulate until plx_fsdp_zero_grad. --clip clips the
 * global gradient norm as torch.nn.utils.clip_grad_norm_. --bf16 (FSDP):
 * parameters gathered and gradients reduced in bf16 over f32 master shards.
 *
 * At the end every rank checks that (a) all ranks hold bit-identical weights
 * and (b) they match one process training on the whole batch in f32
 * (computed here too, with the same clipping) within a relative 1e-5: the
 * only difference is the order in which the per-sample gradients are summed
 * (micro-batches, ranks' partial sums, then the allreduce), which perturbs
 * f32 results by a few ulps per step. With --bf16 the bound is 1e-2 (see
 * BF16_TOL).
 *
 * --ranks N runs N ranks as threads (sim); otherwise each process is a rank
 * of a job started by plexus-run. fsdp-hybrid needs the node size: from
 * --local-size, else from LOCAL_WORLD_SIZE (set by plexus-run / torchrun);
 * with neither it refuses to run rather than treat the world as one node. */
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
static int steps = 20, nranks, local_size, accum = 1, bf16;
static double clip_norm; /* 0: no clipping */
static const char *node_size_from = "--local-size";
static const float lr = 0.05f;
static char world[64];

/* bf16 against the f32 single process, relative to the largest weight.
 * The compared weights are gathered in bf16, so they carry one rounding of
 * 2^-9 (2e-3) of their size; on top, every step computes with parameters
 * rounded to bf16 (2^-9 each) and reduces gradients rounded to bf16 with a
 * mean rounded once more, so each update is off by about 1e-2 of itself,
 * and over the run the weights by about 1e-2 of how far they moved (here
 * less than a third of their size). That bounds the difference near
 * 2e-3 + 3e-3; measured 2.5e-3 to 2.9e-3 (20 steps, 1 to 8 ranks, with and
 * without --accum / --clip). 1e-2 leaves a factor 3; a micro-batch dropped
 * from the accumulation shows 9e-2 (clipped) to 2e-1. */
#define BF16_TOL 1e-2

static const char usage[] =
    "usage: train_mlp [--strategy S] [--backend NAME] [--ranks N] [--steps S] [--local-size L]\n"
    "                 [--accum K] [--clip MAX_NORM] [--bf16] [--help]\n"
    "  --strategy    ddp-sync (default), ddp-overlap, fsdp-full, fsdp-grad-op, fsdp-hybrid, no-shard\n"
    "  --backend     the backend (default: the configuration's)\n"
    "  --ranks N     run N ranks as threads of this process (sim); else a rank of a plexus-run job\n"
    "  --steps S     optimizer steps (default 20)\n"
    "  --local-size  ranks per node for fsdp-hybrid (default: LOCAL_WORLD_SIZE; required without it)\n"
    "  --accum K     K micro-batches per step (DDP: NO_SYNC for the first K-1; FSDP: shards accumulate)\n"
    "  --clip X      clip the global gradient L2 norm to X (clip_grad_norm_)\n"
    "  --bf16        FSDP strategies: bf16 parameters and gradient reduction over f32 master shards\n"
    "Checks that all ranks end with equal weights, equal to one process training on the whole batch.\n";

/* bf16 <-> f32 (round to nearest even), for the gathered bf16 parameters. */
static uint16_t to_bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

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

/* Forward over samples [lo, hi): hidden activations, d loss / d out
 * scaled by `scale`, and the loss. */
static float forward(float *const p[NPARAM], int lo, int hi, float scale, float h[N][H], float dout[N])
{
    const float *W1 = p[0], *b1 = p[1], *w2 = p[2], *b2 = p[3];
    float loss = 0;
    for (int n = lo; n < hi; n++) {
        float out = b2[0];
        for (int j = 0; j < H; j++) {
            float a = b1[j];
            for (int d = 0; d < D; d++)
                a += W1[j * D + d] * X[n][d];
            h[n][j] = tanhf(a);
            out += w2[j] * h[n][j];
        }
        float err = out - Y[n];
        loss += err * err;
        dout[n] = 2 * err * scale;
    }
    return loss;
}

/* Backward, last layer first, adding into g; ready(arg, k) as soon as
 * parameter k's gradient is final, as autograd hooks fire. */
static int backward(float *const p[NPARAM], float *const g[NPARAM], int lo, int hi, float h[N][H],
                    const float dout[N], int (*ready)(void *arg, int k), void *arg)
{
    const float *w2 = p[2];
    int rc = 0;
    for (int n = lo; n < hi; n++) { /* layer 2: b2, w2 */
        g[3][0] += dout[n];
        for (int j = 0; j < H; j++)
            g[2][j] += dout[n] * h[n][j];
    }
    if (ready && ((rc = ready(arg, 3)) || (rc = ready(arg, 2))))
        return rc;
    for (int n = lo; n < hi; n++) /* layer 1: b1, W1 */
        for (int j = 0; j < H; j++) {
            float da = dout[n] * w2[j] * (1 - h[n][j] * h[n][j]);
            g[1][j] += da;
            for (int d = 0; d < D; d++)
                g[0][j * D + d] += da * X[n][d];
        }
    if (ready && ((rc = ready(arg, 1)) || (rc = ready(arg, 0))))
        return rc;
    return 0;
}

static void zero(float *const g[NPARAM])
{
    for (int k = 0; k < NPARAM; k++)
        memset(g[k], 0, sizes[k] * sizeof(float));
}

/* torch.nn.utils.clip_grad_norm_ over full gradients (DDP, the reference);
 * returns 1 if it scaled them. */
static int clip_full(float *const g[NPARAM])
{
    double sq = 0;
    for (int k = 0; k < NPARAM; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            sq += (double)g[k][i] * g[k][i];
    double coef = clip_norm / (sqrt(sq) + 1e-6);
    if (coef < 1)
        for (int k = 0; k < NPARAM; k++)
            for (size_t i = 0; i < sizes[k]; i++)
                g[k][i] = (float)(g[k][i] * coef);
    return coef < 1;
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

/* Gradient hooks: DDP marks the gradient ready; FSDP starts its reduction
 * (in bf16 after rounding it, with --bf16). */
struct hook {
    struct plx_ddp *ddp;
    struct plx_fsdp *fsdp;
    int *units;
    float *const *g;
    uint16_t *const *g16;
};

static int hook_ready(void *arg, int k)
{
    struct hook *h = arg;
    if (h->ddp)
        return plx_ddp_ready(h->ddp, k);
    if (!h->g16)
        return plx_fsdp_ireduce_grad(h->fsdp, h->units[k], h->g[k]);
    for (size_t i = 0; i < sizes[k]; i++)
        h->g16[k][i] = to_bf16(h->g[k][i]);
    return plx_fsdp_ireduce_grad(h->fsdp, h->units[k], h->g16[k]);
}

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
    uint16_t *p16[NPARAM] = {0}, *g16[NPARAM] = {0};
    static _Thread_local float h[N][H], dout[N];
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
            if (me == 0)
                printf("fsdp-hybrid: %d node(s) of %d ranks (from %s)\n", plx_mesh_nodes(mesh),
                       P / plx_mesh_nodes(mesh), node_size_from);
            o.mesh = mesh;
        }
        if (bf16) {
            o.param_dtype = PLX_BF16;
            o.reduce_dtype = PLX_BF16;
            for (int k = 0; k < NPARAM; k++)
                if (!(p16[k] = calloc(sizes[k], 2)) || !(g16[k] = calloc(sizes[k], 2)))
                    goto out;
        }
        TRY(plx_fsdp_create(c, &o, &fsdp));
        for (int k = 0; k < NPARAM; k++) /* f32 masters */
            TRY(plx_fsdp_add_unit(fsdp, w->p[k], sizes[k], PLX_F32, &units[k]));
    }
    struct hook hook = {ddp, fsdp, units, g.p, bf16 ? g16 : NULL};
    for (int s = 0; s < steps; s++) {
        float loss = 0;
        if (is_ddp) {
            int overlap = !strcmp(strategy, "ddp-overlap");
            zero(g.p);
            for (int m = 0; m < accum; m++) { /* micro-batch m of this rank's slice */
                int mlo = lo + (hi - lo) * m / accum, mhi = lo + (hi - lo) * (m + 1) / accum;
                TRY(plx_ddp_begin(ddp, m + 1 < accum ? PLX_DDP_NO_SYNC : overlap ? PLX_DDP_OVERLAP : PLX_DDP_SYNC));
                loss += forward(w->p, mlo, mhi, scale, h, dout);
                TRY(backward(w->p, g.p, mlo, mhi, h, dout, hook_ready, &hook));
                TRY(plx_ddp_finish(ddp));
            }
            if (clip_norm > 0)
                clip_full(g.p);
            for (int k = 0; k < NPARAM; k++)
                sgd(w->p[k], g.p[k], sizes[k]);
        } else {
            /* Gather every unit (prefetching the next), compute, reduce. */
            void *dst[NPARAM];
            for (int k = 0; k < NPARAM; k++)
                dst[k] = bf16 ? (void *)p16[k] : (void *)w->p[k];
            TRY(plx_fsdp_prefetch(fsdp, units[0], dst[0]));
            for (int k = 0; k < NPARAM; k++) {
                TRY(plx_fsdp_gather(fsdp, units[k], dst[k]));
                if (k + 1 < NPARAM)
                    TRY(plx_fsdp_prefetch(fsdp, units[k + 1], dst[k + 1]));
                if (bf16) /* compute with the bf16 values */
                    for (size_t i = 0; i < sizes[k]; i++)
                        w->p[k][i] = from_bf16(p16[k][i]);
            }
            for (int m = 0; m < accum; m++) {
                int mlo = lo + (hi - lo) * m / accum, mhi = lo + (hi - lo) * (m + 1) / accum;
                zero(g.p); /* the shards accumulate, not these */
                loss += forward(w->p, mlo, mhi, scale, h, dout);
                TRY(backward(w->p, g.p, mlo, mhi, h, dout, hook_ready, &hook));
                TRY(plx_fsdp_wait_grad(fsdp, -1)); /* g is borrowed until then */
            }
            if (clip_norm > 0)
                TRY(plx_fsdp_clip_grad_norm(fsdp, clip_norm, NULL));
            for (int k = 0; k < NPARAM; k++) {
                size_t n;
                float *shard = plx_fsdp_shard(fsdp, units[k], &n);
                sgd(shard, plx_fsdp_grad_shard(fsdp, units[k], NULL), n);
                TRY(plx_fsdp_regather(fsdp, units[k]));
            }
            TRY(plx_fsdp_zero_grad(fsdp, -1));
        }
        float total = 0;
        TRY(plx_allreduce(c, &loss, &total, 1, PLX_F32, PLX_SUM));
        if (me == 0)
            printf("step %2d loss %.6f\n", s, total / N);
    }
    if (fsdp) /* the final full weights */
        for (int k = 0; k < NPARAM; k++) {
            TRY(plx_fsdp_gather(fsdp, units[k], bf16 ? (void *)p16[k] : (void *)w->p[k]));
            for (size_t i = 0; bf16 && i < sizes[k]; i++)
                w->p[k][i] = from_bf16(p16[k][i]);
        }
    status = 0;
out:
    plx_ddp_destroy(ddp);
    plx_fsdp_destroy(fsdp);
    plx_mesh_destroy(mesh);
    for (int k = 0; k < NPARAM; k++) {
        free(p16[k]);
        free(g16[k]);
    }
    free_model(&g);
    return status;
}

static int check(struct plx_comm *c, struct model *w)
{
    int me = plx_comm_rank(c), bad = 0;
    struct model ref = {0}, g = {0};
    static _Thread_local float h[N][H], dout[N];
    if (alloc_model(&ref) || alloc_model(&g))
        return 1;
    init_params(ref.p);
    int clipped = 0;
    for (int s = 0; s < steps; s++) { /* one process, whole batch, f32 */
        zero(g.p);
        forward(ref.p, 0, N, 1.0f / N, h, dout);
        backward(ref.p, g.p, 0, N, h, dout, NULL, NULL);
        if (clip_norm > 0)
            clipped += clip_full(g.p);
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
        printf("%s on %d ranks (accum %d, clip %g: %d of %d steps clipped%s): weights equal on all ranks: %s; "
               "max |w - w_single| = %.3g (relative %.3g, bound %g)\n", strategy, plx_comm_size(c), accum, clip_norm,
               clipped, steps, bf16 ? ", bf16" : "", spread == 0 ? "yes" : "NO", maxdiff, rel, bf16 ? BF16_TOL : 1e-5);
    if (spread != 0 || rel > (bf16 ? BF16_TOL : 1e-5))
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
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--strategy") && v)
            strategy = argv[++i];
        else if (!strcmp(a, "--backend") && v)
            backend = argv[++i];
        else if (!strcmp(a, "--ranks") && v)
            nranks = atoi(argv[++i]);
        else if (!strcmp(a, "--steps") && v)
            steps = atoi(argv[++i]);
        else if (!strcmp(a, "--local-size") && v)
            local_size = atoi(argv[++i]);
        else if (!strcmp(a, "--accum") && v)
            accum = atoi(argv[++i]);
        else if (!strcmp(a, "--clip") && v)
            clip_norm = atof(argv[++i]);
        else if (!strcmp(a, "--bf16"))
            bf16 = 1;
        else {
            fprintf(stderr, "train_mlp: unknown or incomplete option '%s'\n%s", a, usage);
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
    if (accum < 1 || accum > N || steps < 0 || clip_norm < 0) {
        fprintf(stderr, "train_mlp: --accum must be 1..%d, --steps and --clip not negative\n", N);
        return 2;
    }
    if (bf16 && !strncmp(strategy, "ddp", 3)) {
        fprintf(stderr, "train_mlp: --bf16 is for the FSDP strategies (fsdp-*, no-shard)\n");
        return 2;
    }
    /* Hybrid sharding needs to know what a node is; running it as one node
     * because nothing said otherwise would silently be FULL_SHARD. */
    if (!strcmp(strategy, "fsdp-hybrid") && local_size <= 0) {
        const char *lws = getenv("LOCAL_WORLD_SIZE");
        if (!lws || atoi(lws) <= 0) {
            fprintf(stderr, "train_mlp: fsdp-hybrid needs the node size: pass --local-size L or run under a "
                            "launcher that sets LOCAL_WORLD_SIZE\n");
            return 2;
        }
        local_size = atoi(lws);
        node_size_from = "LOCAL_WORLD_SIZE";
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
