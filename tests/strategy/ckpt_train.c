/* ckpt_train - training resumed from a checkpoint continues as if it had
 * never stopped.
 *
 * Model: y = w2 . tanh(W1 x + b1) + b2, mean squared error, SGD with
 * momentum (the optimizer state is checkpointed with the parameters), FSDP
 * FULL_SHARD, each rank a contiguous slice of a fixed batch.
 *
 *   ckpt_train same DIR [--ranks N]
 *       trains STEPS steps uninterrupted, then again: HALF steps, an
 *       asynchronous save, every strategy object destroyed, a fresh FSDP
 *       from other initial values, a load, the remaining steps. Every loss
 *       after the resume must equal the uninterrupted run's bit for bit.
 *   ckpt_train save DIR   /   ckpt_train resume DIR
 *       the two halves in separate jobs (so of any world sizes); resume
 *       checks each loss against one process training the whole batch
 *       (relative 1e-5: the world sizes sum gradients in different orders).
 * --ranks N: sim threads; otherwise a rank of a plexus-run job. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/checkpoint.h"
#include "plexus/strategy.h"

enum { D = 6, H = 10, N = 48, NP = 4, STEPS = 12, HALF = 6 };
static const size_t sizes[NP] = {H * D, H, H, 1};
static const char *const pnames[NP] = {"W1", "b1", "w2", "b2"};
static const char *const mnames[NP] = {"W1.momentum", "b1.momentum", "w2.momentum", "b2.momentum"};
static const float lr = 0.05f, beta = 0.9f;
static float X[N][D], Y[N];
static const char *mode, *dir;

static float lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void make_data(void)
{
    unsigned s = 4242;
    for (int n = 0; n < N; n++) {
        float t = 0;
        for (int d = 0; d < D; d++)
            t += (X[n][d] = 2 * lcg(&s)) * (float)(d % 3 - 1);
        Y[n] = tanhf(t) + 0.1f * lcg(&s);
    }
}

static void init_params(float *p[NP], unsigned seed)
{
    for (int k = 0; k < NP; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            p[k][i] = lcg(&seed) * 0.5f;
}

/* Loss over [lo, hi); gradients scaled by scale into g. */
static float fwd_bwd(float *const p[NP], float *const g[NP], int lo, int hi, float scale)
{
    for (int k = 0; k < NP; k++)
        memset(g[k], 0, sizes[k] * sizeof(float));
    float loss = 0, h[H];
    for (int n = lo; n < hi; n++) {
        float out = p[3][0];
        for (int j = 0; j < H; j++) {
            float a = p[1][j];
            for (int d = 0; d < D; d++)
                a += p[0][j * D + d] * X[n][d];
            out += p[2][j] * (h[j] = tanhf(a));
        }
        float err = out - Y[n], dout = 2 * err * scale;
        loss += err * err;
        g[3][0] += dout;
        for (int j = 0; j < H; j++) {
            g[2][j] += dout * h[j];
            float da = dout * p[2][j] * (1 - h[j] * h[j]);
            g[1][j] += da;
            for (int d = 0; d < D; d++)
                g[0][j * D + d] += da * X[n][d];
        }
    }
    return loss;
}

static void step_update(float *p, float *m, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = beta * m[i] + g[i];
        p[i] -= lr * m[i];
    }
}

/* One process, whole batch: the reference losses. */
static void reference(float losses[STEPS])
{
    float *p[NP], *g[NP], *m[NP];
    for (int k = 0; k < NP; k++) {
        p[k] = calloc(sizes[k], sizeof(float));
        g[k] = calloc(sizes[k], sizeof(float));
        m[k] = calloc(sizes[k], sizeof(float));
    }
    init_params(p, 777);
    for (int s = 0; s < STEPS; s++) {
        losses[s] = fwd_bwd(p, g, 0, N, 1.0f / N) / N;
        for (int k = 0; k < NP; k++)
            step_update(p[k], m[k], g[k], sizes[k]);
    }
    for (int k = 0; k < NP; k++)
        free(p[k]), free(g[k]), free(m[k]);
}

struct trainer {
    struct plx_comm *c;
    struct plx_fsdp *f;
    float *full[NP], *g[NP], *mom[NP];
    int64_t step;
};

static int trainer_init(struct trainer *t, struct plx_comm *c, unsigned seed)
{
    memset(t, 0, sizeof *t);
    t->c = c;
    struct plx_fsdp_options o;
    plx_fsdp_options_init(&o);
    o.strategy = PLX_FSDP_FULL_SHARD;
    int rc = plx_fsdp_create(c, &o, &t->f);
    for (int k = 0; k < NP; k++) {
        t->full[k] = calloc(sizes[k], sizeof(float));
        t->g[k] = calloc(sizes[k], sizeof(float));
        t->mom[k] = calloc(sizes[k], sizeof(float)); /* a shard needs at most this */
    }
    init_params(t->full, seed);
    for (int k = 0; k < NP && !rc; k++)
        rc = plx_fsdp_add_unit(t->f, t->full[k], sizes[k], PLX_F32, NULL);
    return rc;
}

static void trainer_finish(struct trainer *t)
{
    plx_fsdp_destroy(t->f);
    for (int k = 0; k < NP; k++)
        free(t->full[k]), free(t->g[k]), free(t->mom[k]);
}

/* Parameters, momentum (sharded like them) and the step counter. */
static int trainer_items(struct trainer *t, int save, struct plx_ckpt_item it[2 * NP + 1])
{
    int dts[NP] = {PLX_F32, PLX_F32, PLX_F32, PLX_F32};
    int rc = plx_ckpt_fsdp_items(t->f, NP, pnames, sizes, dts, NULL, NULL, it);
    for (int k = 0; k < NP; k++) {
        it[NP + k] = it[k];
        it[NP + k].name = mnames[k];
        it[NP + k].data = t->mom[k];
    }
    const char *sn[1] = {"step"};
    void *sb[1] = {&t->step};
    size_t one = 1;
    int i64 = PLX_I64;
    if (!rc)
        rc = plx_ckpt_replicated_items(t->c, save, 1, sn, sb, &one, &i64, NULL, NULL, &it[2 * NP]);
    return rc;
}

static int train_steps(struct trainer *t, int until, float *losses)
{
    int me = plx_comm_rank(t->c), P = plx_comm_size(t->c);
    int lo = N * me / P, hi = N * (me + 1) / P;
    for (; t->step < until; t->step++) {
        int rc = 0;
        for (int k = 0; k < NP && !rc; k++)
            rc = plx_fsdp_gather(t->f, k, t->full[k]);
        float loss = fwd_bwd(t->full, t->g, lo, hi, (float)P / N), total = 0;
        if (!rc)
            rc = plx_fsdp_zero_grad(t->f, -1); /* reduce_grad accumulates, as PyTorch */
        for (int k = NP - 1; k >= 0 && !rc; k--)
            rc = plx_fsdp_reduce_grad(t->f, k, t->g[k]);
        for (int k = 0; k < NP && !rc; k++) {
            size_t n;
            float *shard = plx_fsdp_shard(t->f, k, &n);
            step_update(shard, t->mom[k], plx_fsdp_grad_shard(t->f, k, NULL), n);
        }
        if (!rc)
            rc = plx_allreduce(t->c, &loss, &total, 1, PLX_F32, PLX_SUM);
        if (rc)
            return rc;
        losses[t->step] = total / N;
    }
    return 0;
}

#define TRY(call)                                                                                   \
    do {                                                                                            \
        int rc_ = (call);                                                                           \
        if (rc_) {                                                                                  \
            fprintf(stderr, "rank %d: %s: %s: %s\n", me, #call, plx_err_name(rc_), plx_last_error()); \
            return 1;                                                                               \
        }                                                                                           \
    } while (0)

static int run(struct plx_comm *c)
{
    int me = plx_comm_rank(c), bad = 0;
    float a[STEPS] = {0}, b[STEPS] = {0}, ref[STEPS];
    struct trainer t;
    struct plx_ckpt_item it[2 * NP + 1];
    if (!strcmp(mode, "same")) {
        TRY(trainer_init(&t, c, 777));
        TRY(train_steps(&t, STEPS, a));
        trainer_finish(&t);
        TRY(trainer_init(&t, c, 777));
        TRY(train_steps(&t, HALF, b));
        TRY(trainer_items(&t, 1, it));
        struct plx_ckpt_job *job;
        TRY(plx_ckpt_save_async(c, dir, it, 2 * NP + 1, NULL, &job));
        TRY(plx_ckpt_wait(job, 60000));
        trainer_finish(&t);
        TRY(trainer_init(&t, c, 999)); /* other values: the load must replace them */
        t.step = -1;
        TRY(trainer_items(&t, 0, it));
        TRY(plx_ckpt_load(c, dir, it, 2 * NP + 1, NULL));
        if (t.step != HALF)
            fprintf(stderr, "rank %d: loaded step %lld, saved %d\n", me, (long long)t.step, HALF), bad++;
        TRY(train_steps(&t, STEPS, b));
        trainer_finish(&t);
        for (int s = HALF; s < STEPS; s++) {
            if (me == 0)
                printf("step %2d: uninterrupted %.9g, resumed %.9g\n", s, a[s], b[s]);
            if (memcmp(&a[s], &b[s], sizeof a[s]))
                bad++;
        }
    } else if (!strcmp(mode, "save")) {
        TRY(trainer_init(&t, c, 777));
        TRY(train_steps(&t, HALF, a));
        TRY(trainer_items(&t, 1, it));
        TRY(plx_ckpt_save(c, dir, it, 2 * NP + 1, NULL));
        trainer_finish(&t);
    } else {
        reference(ref);
        TRY(trainer_init(&t, c, 999));
        TRY(trainer_items(&t, 0, it));
        TRY(plx_ckpt_load(c, dir, it, 2 * NP + 1, NULL));
        TRY(train_steps(&t, STEPS, b));
        trainer_finish(&t);
        for (int s = HALF; s < STEPS; s++) {
            double rel = fabs((double)b[s] - ref[s]) / fmax(fabs((double)ref[s]), 1e-30);
            if (me == 0)
                printf("step %2d: one process %.9g, resumed on %d ranks %.9g (relative %.2g)\n", s, ref[s],
                       plx_comm_size(c), b[s], rel);
            if (rel > 1e-5)
                bad++;
        }
    }
    int total = 0;
    if (plx_allreduce(c, &bad, &total, 1, PLX_I32, PLX_SUM))
        return 1;
    if (me == 0)
        printf("%s: %s\n", mode, total ? "FAIL: the losses differ" : "ok");
    return total != 0;
}

static int nranks;
static char world[64];
struct targ {
    int rank, status;
};

static void *rank_main(void *p)
{
    struct targ *a = p;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.rank = a->rank;
    o.size = nranks;
    o.init = world;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        a->status = 2;
        return NULL;
    }
    a->status = run(c);
    plx_comm_destroy(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    mode = argv[1];
    dir = argv[2];
    if (argc == 5 && !strcmp(argv[3], "--ranks"))
        nranks = atoi(argv[4]);
    make_data();
    if (nranks > 0 && nranks <= 16) {
        snprintf(world, sizeof world, "mem://ckpt-train-%d", (int)getpid());
        pthread_t th[16];
        struct targ a[16];
        for (int i = 0; i < nranks; i++) {
            a[i] = (struct targ){i, 0};
            pthread_create(&th[i], NULL, rank_main, &a[i]);
        }
        int st = 0;
        for (int i = 0; i < nranks; i++) {
            pthread_join(th[i], NULL);
            st = a[i].status > st ? a[i].status : st;
        }
        return st;
    }
    struct plx_comm *c;
    if (plx_comm_init(NULL, &c)) {
        fprintf(stderr, "ckpt_train: %s\n", plx_last_error());
        return 2;
    }
    int st = run(c);
    plx_comm_destroy(c);
    plx_finalize();
    return st;
}
