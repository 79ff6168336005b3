/* param_server - a parameter server over plexus RPC.
 *
 * Rank 0 owns the parameters of a linear model (y = w . x + b, mean
 * squared error). Every step each worker (ranks 1..P-1) pulls them through
 * a remote reference (rank 0 keeps a snapshot as an RRef value; the worker
 * fetches it with to_here and releases it), computes the gradient on its
 * slice of a fixed batch, and pushes it with rpc_async. When the last
 * worker's gradient of a step has arrived, rank 0 sums them in worker order
 * and takes an SGD step; a barrier on the world then starts the next step.
 *
 * At the end rank 0 checks that the weights equal, bit for bit, one process
 * training on the same batch with the same summation order, and that its
 * table of RRef values is empty after plx_rpc_shutdown.
 *
 *   param_server [--ranks N] [--steps S]      N sim ranks as threads
 *   plexus-run -n N param_server --backend tcp   one rank per process */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "plexus/rpc.h"

enum { D = 8, NP = D + 1, N = 96, MAXW = 64 };
static const float lr = 0.1f;
static int steps = 30, nranks;
static const char *backend;
static float X[N][D], Y[N];

static void make_data(void)
{
    unsigned s = 2024;
    for (int n = 0; n < N; n++) {
        float t = 0.3f;
        for (int d = 0; d < D; d++) {
            s = s * 1664525u + 1013904223u;
            X[n][d] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
            t += X[n][d] * (float)(d - 3) * 0.25f;
        }
        s = s * 1664525u + 1013904223u;
        Y[n] = t + 0.05f * ((float)((s >> 8) & 0xff) / 256.0f - 0.5f);
    }
}

/* Gradient of the mean loss over all N samples, restricted to [lo, hi). */
static float grad_slice(const float *p, int lo, int hi, float *g)
{
    float loss = 0;
    memset(g, 0, NP * sizeof *g);
    for (int n = lo; n < hi; n++) {
        float out = p[D];
        for (int d = 0; d < D; d++)
            out += p[d] * X[n][d];
        float err = out - Y[n], k = 2 * err / N;
        loss += err * err / N;
        for (int d = 0; d < D; d++)
            g[d] += k * X[n][d];
        g[D] += k;
    }
    return loss;
}

static void slice(int w, int W, int *lo, int *hi)
{
    *lo = N * w / W;
    *hi = N * (w + 1) / W;
}

/* ---- the server (rank 0) ---------------------------------------------------- */

struct server {
    pthread_mutex_t mu;
    float p[NP];
    float grads[MAXW][NP];
    int have[MAXW], nhave, W, step;
    float loss;
};

/* remote(): the owner keeps this snapshot as the RRef's value. */
static int h_snapshot(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)caller, (void)a, (void)len, (void)err, (void)cap;
    struct server *s = ctx;
    float *v = malloc(sizeof s->p);
    if (!v)
        return PLX_ERR_NOMEM;
    pthread_mutex_lock(&s->mu);
    memcpy(v, s->p, sizeof s->p);
    pthread_mutex_unlock(&s->mu);
    *res = v;
    *rl = sizeof s->p;
    return 0;
}

struct push {
    int32_t step, worker;
    float loss;
    float g[NP];
};

static int h_push(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)res, (void)rl;
    struct server *s = ctx;
    struct push m;
    if (len != sizeof m)
        return snprintf(err, cap, "push: %zu bytes, expected %zu", len, sizeof m), PLX_ERR_INVALID_ARG;
    memcpy(&m, a, sizeof m);
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (m.step != s->step || m.worker < 0 || m.worker >= s->W || s->have[m.worker]) {
        snprintf(err, cap, "push from rank %d: step %d worker %d, the server is at step %d", caller, m.step, m.worker,
                 s->step);
        rc = PLX_ERR_INVALID_ARG;
    } else {
        memcpy(s->grads[m.worker], m.g, sizeof m.g);
        s->have[m.worker] = 1;
        s->loss += m.loss;
        if (++s->nhave == s->W) { /* the step is complete: sum in worker order */
            for (int i = 0; i < NP; i++) {
                float g = 0;
                for (int w = 0; w < s->W; w++)
                    g += s->grads[w][i];
                s->p[i] -= lr * g;
            }
            memset(s->have, 0, sizeof s->have);
            s->nhave = 0;
            s->step++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* One process, the same arithmetic in the same order. */
static void local_training(int W, float p[NP], float *first, float *last)
{
    float g[MAXW][NP];
    memset(p, 0, NP * sizeof *p);
    for (int s = 0; s < steps; s++) {
        float loss = 0;
        for (int w = 0; w < W; w++) {
            int lo, hi;
            slice(w, W, &lo, &hi);
            loss += grad_slice(p, lo, hi, g[w]);
        }
        for (int i = 0; i < NP; i++) {
            float sum = 0;
            for (int w = 0; w < W; w++)
                sum += g[w][i];
            p[i] -= lr * sum;
        }
        if (s == 0)
            *first = loss;
        *last = loss;
    }
}

#define TRY(call)                                                                                    \
    do {                                                                                             \
        int rc_ = (call);                                                                            \
        if (rc_) {                                                                                   \
            fprintf(stderr, "param_server: rank %d: %s: %s\n", me, #call, plx_last_error());        \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

static int run(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c), W = P - 1;
    if (W < 1 || W > MAXW) {
        fprintf(stderr, "param_server: needs 2 to %d ranks\n", MAXW + 1);
        return 2;
    }
    struct server srv = {.mu = PTHREAD_MUTEX_INITIALIZER, .W = W};
    struct plx_rpc *rpc;
    TRY(plx_rpc_create(c, NULL, &rpc));
    if (me == 0) {
        TRY(plx_rpc_register(rpc, "snapshot", h_snapshot, &srv));
        TRY(plx_rpc_register(rpc, "push", h_push, &srv));
    }
    TRY(plx_barrier(c));
    for (int s = 0; s < steps; s++) {
        if (me > 0) {
            struct plx_rref *r;
            float *p = NULL;
            size_t n = 0;
            TRY(plx_rpc_remote(rpc, 0, "snapshot", NULL, 0, -1, &r));
            TRY(plx_rref_to_here(rpc, r, (void **)&p, &n, -1));
            TRY(plx_rref_release(rpc, r));
            if (n != NP * sizeof(float)) {
                fprintf(stderr, "param_server: rank %d: pulled %zu bytes\n", me, n);
                return 1;
            }
            struct push m = {.step = s, .worker = me - 1};
            int lo, hi;
            slice(me - 1, W, &lo, &hi);
            m.loss = grad_slice(p, lo, hi, m.g);
            free(p);
            struct plx_rpc_future *f;
            TRY(plx_rpc_async(rpc, 0, "push", &m, sizeof m, -1, &f));
            TRY(plx_rpc_wait(f, NULL, NULL));
        }
        TRY(plx_barrier(c)); /* every push of step s is applied */
        if (me == 0 && (s == 0 || s == steps - 1)) {
            pthread_mutex_lock(&srv.mu);
            printf("step %2d loss %.6f\n", s, srv.loss);
            srv.loss = 0;
            pthread_mutex_unlock(&srv.mu);
        } else if (me == 0) {
            pthread_mutex_lock(&srv.mu);
            srv.loss = 0;
            pthread_mutex_unlock(&srv.mu);
        }
    }
    TRY(plx_rpc_shutdown(rpc, 30000));
    int bad = 0;
    if (me == 0) {
        float ref[NP], first = 0, last = 0;
        local_training(W, ref, &first, &last);
        int same = !memcmp(ref, srv.p, sizeof ref);
        size_t left = plx_rpc_owned_count(rpc);
        printf("%d workers, %d steps: local training loss %.6f -> %.6f; server weights %s local training; "
               "%zu RRef values left on the owner\n",
               W, steps, first, last, same ? "bit-identical to" : "DIFFER from", left);
        /* Any number of steps must lower the loss; how far depends on how many. */
        bad = !same || left != 0 || (steps > 1 && !(last < first));
        if (bad)
            fprintf(stderr, "param_server: FAILED: %s\n",
                    !same ? "the server's weights differ from local training"
                    : left ? "RRef values were left on the owner"
                           : "training did not lower the loss");
    }
    plx_rpc_destroy(rpc);
    int total = 0;
    if (plx_allreduce(c, &bad, &total, 1, PLX_I32, PLX_SUM))
        return 1;
    return total != 0;
}

static char world[64];
struct targ {
    int rank, status;
};

static void *rank_main(void *p)
{
    struct targ *a = p;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend ? backend : "sim";
    o.rank = a->rank;
    o.size = nranks;
    o.init = world;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "param_server: rank %d: %s\n", a->rank, plx_last_error());
        a->status = 2;
        return NULL;
    }
    a->status = run(c);
    plx_comm_destroy(c);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            nranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else {
            fprintf(stderr, "usage: param_server [--ranks N] [--steps S] [--backend NAME]\n");
            return 2;
        }
    }
    make_data();
    if (nranks > 0) {
        if (nranks < 2 || nranks > MAXW + 1) {
            fprintf(stderr, "param_server: --ranks takes 2 to %d\n", MAXW + 1);
            return 2;
        }
        snprintf(world, sizeof world, "mem://ps-%d", (int)getpid());
        pthread_t th[MAXW + 1];
        struct targ a[MAXW + 1];
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
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = backend;
    struct plx_comm *c;
    if (plx_comm_init(&o, &c)) {
        fprintf(stderr, "param_server: %s\n", plx_last_error());
        return 2;
    }
    int st = run(c);
    plx_comm_destroy(c);
    plx_finalize();
    return st;
}
