/* oracle_rank - the plexus side of the PyTorch oracle (oracle.py): one rank
 * of a job started by plexus-run trains, through the public strategy API,
 * the models torch trains on the same initial weights and data, and writes
 * per-step losses and final weights as raw little-endian f32 files.
 *
 *   oracle_rank DIR [RUN...]   (default: every run below; --backend B before DIR)
 *
 * Models (torch's conventions: Linear weight is out x in):
 *   mlp:  x (D) -> Linear(D, H) -> tanh -> Linear(H, 1), MSE, SGD; every
 *         rank holds NB samples; loss per rank is the mean over its samples.
 *   bn1d: x (D) -> Linear(D, H) -> SyncBatchNorm(H) -> tanh -> Linear(H, 1);
 *   bn2d: x (C2 x 2 x 2) -> SyncBatchNorm2d(C2) -> flatten -> Linear(4 C2, 1);
 *         ranks hold BN_SIZES samples (one rank none); each rank's loss is
 *         its sum of squared errors times P / N so DDP's mean over ranks is
 *         the gradient of the whole batch's mean, as one torch process has.
 * Runs: ddp-sync, ddp-overlap-view (bucket views, small buckets), ddp-accum
 * (per step: NO_SYNC micro-batch, then a synchronised one), ddp-fp16,
 * ddp-bf16 (compress hooks), fsdp-full, fsdp-grad-op, no-shard, fsdp-hybrid
 * (2 nodes x 2), bn1d, bn2d, and fsdp-bf16 (FULL_SHARD with param_dtype bf16
 * over f32 masters; built only where strategy.h has FSDP param_dtype:
 * ORACLE_FSDP_MIXED). Files: DIR/plx-RUN-loss-rR.bin (steps x 2: the
 * losses of the step's one or two micro-batches), DIR/plx-RUN-NAME-rR.bin. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "plexus/strategy.h"

/* Sizes shared with oracle.py. */
enum { D = 6, H = 10, NB = 16, STEPS = 5, C2 = 3, S2 = 4, BN_N = 32 };
static const int BN_SIZES[4] = {10, 0, 7, 15};
static const float LR = 0.1f;

/* FSDP gradient accumulation (issue 15, FSDP part) adds plx_fsdp_zero_grad
 * and makes plx_fsdp_reduce_grad accumulate until it: weak, so this driver
 * builds and is right both before (reduce_grad overwrites) and after. */
extern int plx_fsdp_zero_grad(struct plx_fsdp *f, int unit) __attribute__((weak));

static const char *dir;
static int me, P;

#ifdef ORACLE_FSDP_MIXED
/* bf16 <-> f32, round to nearest even (finite values only here). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#endif

#define MAXP 8
struct params {
    int n;
    const char *name[MAXP];
    size_t count[MAXP];
    float *p[MAXP], *g[MAXP]; /* g: where backward writes (a bucket view or own buffer) */
    float *own[MAXP];
};

static int load(const char *name, float *buf, size_t count)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(buf, sizeof(float), count, f) : 0;
    if (f)
        fclose(f);
    if (got != count) {
        fprintf(stderr, "oracle_rank %d: %s: read %zu of %zu floats\n", me, path, got, count);
        return -1;
    }
    return 0;
}

static int save(const char *run, const char *name, const float *buf, size_t count)
{
    char path[512];
    snprintf(path, sizeof path, "%s/plx-%s-%s-r%d.bin", dir, run, name, me);
    FILE *f = fopen(path, "wb");
    size_t put = f ? fwrite(buf, sizeof(float), count, f) : 0;
    if (f && fclose(f))
        put = 0;
    if (put != count) {
        fprintf(stderr, "oracle_rank %d: cannot write %s\n", me, path);
        return -1;
    }
    return 0;
}

static int add_param(struct params *m, const char *name, size_t count)
{
    int k = m->n++;
    m->name[k] = name;
    m->count[k] = count;
    m->p[k] = calloc(count, sizeof(float));
    m->own[k] = calloc(count, sizeof(float));
    m->g[k] = m->own[k];
    return m->p[k] && m->own[k] && !load(name, m->p[k], count) ? 0 : -1;
}

static void free_params(struct params *m)
{
    for (int k = 0; k < m->n; k++) {
        free(m->p[k]);
        free(m->own[k]);
    }
}

/* ---- the MLP: forward and backward over rows [0, n) ------------------- */
/* Adds the gradient of scale * sum of squared errors to g; returns the sum. */
static float mlp_fwd_bwd(float *const p[4], float *const g[4], const float *x, const float *y, int n, float scale)
{
    const float *W1 = p[0], *b1 = p[1], *W2 = p[2], *b2 = p[3];
    float sse = 0, h[H];
    for (int i = 0; i < n; i++) {
        float out = b2[0];
        for (int j = 0; j < H; j++) {
            float a = b1[j];
            for (int d = 0; d < D; d++)
                a += W1[j * D + d] * x[i * D + d];
            h[j] = tanhf(a);
            out += W2[j] * h[j];
        }
        float e = out - y[i];
        sse += e * e;
        float dout = 2 * e * scale;
        g[3][0] += dout;
        for (int j = 0; j < H; j++) {
            g[2][j] += dout * h[j];
            float da = dout * W2[j] * (1 - h[j] * h[j]);
            g[1][j] += da;
            for (int d = 0; d < D; d++)
                g[0][j * D + d] += da * x[i * D + d];
        }
    }
    return sse;
}

#define TRY(call)                                                                                          \
    do {                                                                                                   \
        int rc_ = (call);                                                                                  \
        if (rc_) {                                                                                         \
            fprintf(stderr, "oracle_rank %d (%s): %s: %s: %s\n", me, run, #call, plx_err_name(rc_), plx_last_error()); \
            goto out;                                                                                      \
        }                                                                                                  \
    } while (0)

static void sgd(struct params *m)
{
    for (int k = 0; k < m->n; k++)
        for (size_t i = 0; i < m->count[k]; i++)
            m->p[k][i] -= LR * m->g[k][i];
}

static void zero_grads(struct params *m)
{
    for (int k = 0; k < m->n; k++)
        memset(m->g[k], 0, m->count[k] * sizeof(float));
}

static int save_all(const char *run, struct params *m, const float *loss)
{
    int bad = save(run, "loss", loss, STEPS * 2);
    for (int k = 0; k < m->n; k++)
        bad |= save(run, m->name[k], m->p[k], m->count[k]);
    return bad;
}

/* ---- DDP runs on the MLP ------------------------------------------------ */
static int run_ddp(struct plx_comm *c, const char *run)
{
    struct params m = {0};
    struct plx_ddp *ddp = NULL;
    int status = 1;
    float x[NB * D], y[NB], loss[STEPS * 2] = {0};
    if (add_param(&m, "W1", H * D) || add_param(&m, "b1", H) || add_param(&m, "W2", H) || add_param(&m, "b2", 1))
        goto out;
    {
        float *X = malloc((size_t)NB * P * D * sizeof(float)), *Y = malloc((size_t)NB * P * sizeof(float));
        int bad = !X || !Y || load("X", X, (size_t)NB * P * D) || load("Y", Y, (size_t)NB * P);
        if (!bad) {
            memcpy(x, X + (size_t)me * NB * D, sizeof x);
            memcpy(y, Y + (size_t)me * NB, sizeof y);
        }
        free(X);
        free(Y);
        if (bad)
            goto out;
    }
    int view = !strcmp(run, "ddp-overlap-view"), accum = !strcmp(run, "ddp-accum");
    struct plx_ddp_options o;
    plx_ddp_options_init(&o);
    if (view) {
        o.gradient_as_bucket_view = 1;
        o.bucket_cap_bytes = 200;
        o.first_bucket_bytes = 40;
    }
    TRY(plx_ddp_create(c, &o, &ddp));
    if (!strcmp(run, "ddp-fp16"))
        TRY(plx_ddp_register_builtin_hook(ddp, PLX_DDP_HOOK_FP16_COMPRESS));
    if (!strcmp(run, "ddp-bf16"))
        TRY(plx_ddp_register_builtin_hook(ddp, PLX_DDP_HOOK_BF16_COMPRESS));
    for (int k = 0; k < m.n; k++)
        TRY(plx_ddp_register(ddp, view ? NULL : m.g[k], m.count[k], PLX_F32, NULL));
    for (int k = 0; k < m.n; k++)
        if (!(m.g[k] = plx_ddp_grad_buffer(ddp, k)))
            TRY(PLX_ERR_INTERNAL);
    int dts[4] = {PLX_F32, PLX_F32, PLX_F32, PLX_F32};
    TRY(plx_broadcast_params(c, (void *const *)m.p, m.count, dts, m.n, 0));
    for (int s = 0; s < STEPS; s++) {
        zero_grads(&m); /* optimizer.zero_grad() */
        int micro = accum ? 2 : 1, rows = NB / micro;
        for (int u = 0; u < micro; u++) {
            /* loss = mean over the micro-batch; backward adds its gradient */
            float sse = mlp_fwd_bwd(m.p, m.g, x + u * rows * D, y + u * rows, rows, 1.0f / rows);
            loss[s * 2 + u] = sse / rows;
            TRY(plx_ddp_begin(ddp, u + 1 < micro ? PLX_DDP_NO_SYNC : view ? PLX_DDP_OVERLAP : PLX_DDP_SYNC));
            for (int k = m.n - 1; k >= 0; k--)
                TRY(plx_ddp_ready(ddp, k));
            TRY(plx_ddp_finish(ddp));
        }
        sgd(&m);
    }
    status = save_all(run, &m, loss);
out:
    plx_ddp_destroy(ddp);
    free_params(&m);
    return status;
}

/* ---- FSDP runs on the MLP ------------------------------------------------ */
static int run_fsdp(struct plx_comm *c, const char *run)
{
    struct params m = {0};
    struct plx_fsdp *f = NULL;
    struct plx_mesh *mesh = NULL;
    int status = 1, units[4], mixed = !strcmp(run, "fsdp-bf16");
    uint16_t *hp[4] = {0}, *hg[4] = {0}; /* fsdp-bf16: gathered parameters, gradients */
    float x[NB * D], y[NB], loss[STEPS * 2] = {0};
    if (add_param(&m, "W1", H * D) || add_param(&m, "b1", H) || add_param(&m, "W2", H) || add_param(&m, "b2", 1))
        goto out;
    {
        float *X = malloc((size_t)NB * P * D * sizeof(float)), *Y = malloc((size_t)NB * P * sizeof(float));
        int bad = !X || !Y || load("X", X, (size_t)NB * P * D) || load("Y", Y, (size_t)NB * P);
        if (!bad) {
            memcpy(x, X + (size_t)me * NB * D, sizeof x);
            memcpy(y, Y + (size_t)me * NB, sizeof y);
        }
        free(X);
        free(Y);
        if (bad)
            goto out;
    }
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.strategy = !strcmp(run, "fsdp-full")      ? PLX_FSDP_FULL_SHARD
                 : !strcmp(run, "fsdp-grad-op") ? PLX_FSDP_SHARD_GRAD_OP
                 : !strcmp(run, "no-shard")     ? PLX_FSDP_NO_SHARD
                                                : PLX_FSDP_HYBRID_SHARD;
    if (mixed) { /* FULL_SHARD, bf16 parameters and reduction over f32 masters */
#ifdef ORACLE_FSDP_MIXED
        o.strategy = PLX_FSDP_FULL_SHARD;
        o.param_dtype = PLX_BF16;
        for (int k = 0; k < m.n; k++)
            if (!(hp[k] = calloc(m.count[k], 2)) || !(hg[k] = calloc(m.count[k], 2)))
                goto out;
#else
        fprintf(stderr, "oracle_rank: fsdp-bf16 needs FSDP param_dtype (not in this build's strategy.h)\n");
        goto out;
#endif
    }
    if (o.strategy == PLX_FSDP_HYBRID_SHARD) {
        TRY(plx_mesh_create(c, 2, &mesh));
        o.mesh = mesh;
    }
    TRY(plx_fsdp_create(c, &o, &f));
    for (int k = 0; k < m.n; k++)
        TRY(plx_fsdp_add_unit(f, m.p[k], m.count[k], PLX_F32, &units[k]));
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < m.n; k++)
            TRY(plx_fsdp_gather(f, units[k], mixed ? (void *)hp[k] : m.p[k]));
#ifdef ORACLE_FSDP_MIXED
        for (int k = 0; k < m.n && mixed; k++) /* compute in f32 on the bf16 parameters */
            for (size_t i = 0; i < m.count[k]; i++)
                m.p[k][i] = from_bf16(hp[k][i]);
#endif
        zero_grads(&m);
        if (plx_fsdp_zero_grad)
            TRY(plx_fsdp_zero_grad(f, -1));
        float sse = mlp_fwd_bwd(m.p, m.g, x, y, NB, 1.0f / NB);
        loss[s * 2] = sse / NB;
#ifdef ORACLE_FSDP_MIXED
        for (int k = 0; k < m.n && mixed; k++) /* gradients leave backward in param_dtype */
            for (size_t i = 0; i < m.count[k]; i++)
                hg[k][i] = to_bf16(m.g[k][i]);
#endif
        for (int k = m.n - 1; k >= 0; k--)
            TRY(plx_fsdp_reduce_grad(f, units[k], mixed ? (void *)hg[k] : m.g[k]));
        for (int k = 0; k < m.n; k++) {
            size_t n;
            float *shard = plx_fsdp_shard(f, units[k], &n), *gs = plx_fsdp_grad_shard(f, units[k], NULL);
            for (size_t i = 0; i < n; i++)
                shard[i] -= LR * gs[i];
            TRY(plx_fsdp_regather(f, units[k]));
        }
    }
    for (int k = 0; k < m.n; k++) {
        if (!mixed) {
            TRY(plx_fsdp_gather(f, units[k], m.p[k]));
            continue;
        }
        /* the f32 masters: every rank's shard in place, zeros elsewhere, summed (exact) */
        size_t n;
        const float *shard = plx_fsdp_shard(f, units[k], &n);
        memset(m.p[k], 0, m.count[k] * sizeof(float));
        memcpy(m.p[k] + plx_fsdp_shard_offset(f, units[k]), shard, n * sizeof(float));
        TRY(plx_allreduce(c, m.p[k], m.p[k], m.count[k], PLX_F32, PLX_SUM));
    }
    status = save_all(run, &m, loss);
out:
    for (int k = 0; k < 4; k++) {
        free(hp[k]);
        free(hg[k]);
    }
    plx_fsdp_destroy(f);
    plx_mesh_destroy(mesh);
    free_params(&m);
    return status;
}

/* ---- SyncBatchNorm runs: uneven batches, DDP over every parameter -------- */
static int run_bn(struct plx_comm *c, const char *run)
{
    int two_d = !strcmp(run, "bn2d");
    int n = BN_SIZES[me % 4], lo = 0, status = 1;
    for (int r = 0; r < me; r++)
        lo += BN_SIZES[r % 4];
    size_t in = two_d ? C2 * S2 : D;
    struct params m = {0};
    struct plx_ddp *ddp = NULL;
    struct plx_syncbn *bn = NULL;
    float loss[STEPS * 2] = {0};
    float *x = malloc(((size_t)n * in + 1) * sizeof(float)), *y = malloc(((size_t)n + 1) * sizeof(float));
    float *X = malloc((size_t)BN_N * in * sizeof(float)), *Y = malloc(BN_N * sizeof(float));
    size_t wide = (size_t)n * (in > H ? in : H) + 1; /* activations: n x H (bn1d) or n x in (bn2d) */
    float *a = malloc(wide * sizeof(float)), *z = malloc(wide * sizeof(float)), *dz = malloc(wide * sizeof(float));
    if (!x || !y || !X || !Y || !a || !z || !dz)
        goto out;
    if (two_d ? (load("X2", X, (size_t)BN_N * in) || load("Y2", Y, BN_N))
              : (load("Xbn", X, (size_t)BN_N * in) || load("Ybn", Y, BN_N)))
        goto out;
    memcpy(x, X + (size_t)lo * in, (size_t)n * in * sizeof(float));
    memcpy(y, Y + lo, (size_t)n * sizeof(float));
    /* parameters in torch's order */
    if (two_d ? (add_param(&m, "bn2w", C2) || add_param(&m, "bn2b", C2) || add_param(&m, "W3", C2 * S2) ||
                 add_param(&m, "b3", 1))
              : (add_param(&m, "W1", H * D) || add_param(&m, "b1", H) || add_param(&m, "bnw", H) ||
                 add_param(&m, "bnb", H) || add_param(&m, "W2", H) || add_param(&m, "b2", 1)))
        goto out;
    TRY(plx_ddp_create(c, NULL, &ddp));
    for (int k = 0; k < m.n; k++)
        TRY(plx_ddp_register(ddp, m.g[k], m.count[k], PLX_F32, NULL));
    TRY(plx_syncbn_create(c, two_d ? C2 : H, NULL, &bn));
    float scale = (float)P / BN_N;
    for (int s = 0; s < STEPS; s++) {
        zero_grads(&m);
        float sse = 0;
        if (two_d) { /* z = BN2d(x); out = W3 . z + b3 */
            const float *W3 = m.p[2], *b3 = m.p[3];
            TRY(plx_syncbn_forward(bn, x, z, (size_t)n, S2, m.p[0], m.p[1], 1));
            for (int i = 0; i < n; i++) {
                float out = b3[0];
                for (size_t j = 0; j < in; j++)
                    out += W3[j] * z[i * in + j];
                float e = out - y[i], dout = 2 * e * scale;
                sse += e * e;
                m.g[3][0] += dout;
                for (size_t j = 0; j < in; j++) {
                    m.g[2][j] += dout * z[i * in + j];
                    dz[i * in + j] = dout * W3[j];
                }
            }
            TRY(plx_syncbn_backward(bn, x, dz, dz, (size_t)n, S2, m.p[0], m.g[0], m.g[1]));
        } else { /* a = W1 x + b1; z = BN(a); h = tanh z; out = W2 h + b2 */
            const float *W1 = m.p[0], *b1 = m.p[1], *W2 = m.p[4], *b2 = m.p[5];
            for (int i = 0; i < n; i++)
                for (int j = 0; j < H; j++) {
                    float v = b1[j];
                    for (int d = 0; d < D; d++)
                        v += W1[j * D + d] * x[i * D + d];
                    a[i * H + j] = v;
                }
            TRY(plx_syncbn_forward(bn, a, z, (size_t)n, 1, m.p[2], m.p[3], 1));
            for (int i = 0; i < n; i++) {
                float out = b2[0], h[H];
                for (int j = 0; j < H; j++) {
                    h[j] = tanhf(z[i * H + j]);
                    out += W2[j] * h[j];
                }
                float e = out - y[i], dout = 2 * e * scale;
                sse += e * e;
                m.g[5][0] += dout;
                for (int j = 0; j < H; j++) {
                    m.g[4][j] += dout * h[j];
                    dz[i * H + j] = dout * W2[j] * (1 - h[j] * h[j]);
                }
            }
            TRY(plx_syncbn_backward(bn, a, dz, dz, (size_t)n, 1, m.p[2], m.g[2], m.g[3]));
            for (int i = 0; i < n; i++) /* dz now holds d loss / d a */
                for (int j = 0; j < H; j++) {
                    m.g[1][j] += dz[i * H + j];
                    for (int d = 0; d < D; d++)
                        m.g[0][j * D + d] += dz[i * H + j] * x[i * D + d];
                }
        }
        loss[s * 2] = sse; /* this rank's sum; oracle.py divides the ranks' total by BN_N */
        TRY(plx_ddp_begin(ddp, PLX_DDP_SYNC));
        for (int k = m.n - 1; k >= 0; k--)
            TRY(plx_ddp_ready(ddp, k));
        TRY(plx_ddp_finish(ddp));
        sgd(&m);
    }
    status = save_all(run, &m, loss);
    status |= save(run, "running_mean", plx_syncbn_running_mean(bn), two_d ? C2 : H);
    status |= save(run, "running_var", plx_syncbn_running_var(bn), two_d ? C2 : H);
out:
    plx_syncbn_destroy(bn);
    plx_ddp_destroy(ddp);
    free_params(&m);
    free(x);
    free(y);
    free(X);
    free(Y);
    free(a);
    free(z);
    free(dz);
    return status;
}

static const char *const all_runs[] = {"ddp-sync", "ddp-overlap-view", "ddp-accum", "ddp-fp16", "ddp-bf16",
                                       "fsdp-full", "fsdp-grad-op", "no-shard", "fsdp-hybrid", "bn1d", "bn2d",
#ifdef ORACLE_FSDP_MIXED
                                       "fsdp-bf16"
#endif
};

int main(int argc, char **argv)
{
    const char *backend = NULL;
    int a = 1;
    if (a + 1 < argc && !strcmp(argv[a], "--backend")) {
        backend = argv[a + 1];
        a += 2;
    }
    if (a >= argc) {
        fprintf(stderr, "usage: oracle_rank [--backend B] DIR [RUN...]\n");
        return 2;
    }
    dir = argv[a++];
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    o.local_size = 2; /* fsdp-hybrid: 2 nodes x 2 */
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "oracle_rank: %s\n", plx_last_error());
        return 2;
    }
    me = plx_comm_rank(c);
    P = plx_comm_size(c);
    int status = 0;
    if (P != 4) {
        fprintf(stderr, "oracle_rank: needs 4 ranks, has %d\n", P);
        status = 2;
    }
    int nruns = a < argc ? argc - a : (int)(sizeof all_runs / sizeof all_runs[0]);
    for (int i = 0; i < nruns && !status; i++) {
        const char *run = a < argc ? argv[a + i] : all_runs[i];
        int rc = !strncmp(run, "ddp", 3) ? run_ddp(c, run)
                 : !strncmp(run, "bn", 2) ? run_bn(c, run)
                                          : run_fsdp(c, run);
        if (rc) {
            fprintf(stderr, "oracle_rank %d: run %s failed\n", me, run);
            status = 1;
        }
    }
    if (me == 0 && !status)
        printf("oracle_rank: %d runs written to %s (fsdp zero_grad %s)\n", nruns, dir,
               plx_fsdp_zero_grad ? "called" : "absent");
    plx_comm_destroy(c);
    plx_finalize();
    return status;
}
