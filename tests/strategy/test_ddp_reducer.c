/* DDP as PyTorch's reducer: bucket layout (one open bucket per dtype, a
 * bucket closes once it reaches its cap, a small first bucket), gradients
 * as views into their bucket (zero copy) and re-pointed between steps,
 * unused parameters counting as zero, NO_SYNC accumulation, the fp16/bf16
 * compression hooks and a user hook, and several threads of one rank
 * marking gradients ready at once. Ranks are sim threads.
 *
 * usage: test_ddp_reducer P [CASE]   (CASE: layout view unused accum hooks threads; default all) */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/strategy.h"
#include "ranks.h"

static int failures;

/* Small integers: exact in f32 and bf16, sums exact too. */
static float val(int g, size_t i, int rank, int step)
{
    return (float)((g * 13 + (int)i * 3 + rank * 5 + step * 7) % 23) - 11;
}

static uint16_t to_bf16(float f) /* exact for the small integers used here */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static struct plx_ddp *make(struct plx_comm *c, size_t cap, size_t first, int view, int average)
{
    struct plx_ddp_options o;
    plx_ddp_options_init(&o);
    if (cap)
        o.bucket_cap_bytes = cap;
    if (first)
        o.first_bucket_bytes = first;
    o.gradient_as_bucket_view = view;
    o.average = average;
    struct plx_ddp *d = NULL;
    CHECK(plx_ddp_create(c, &o, &d) == 0);
    return d;
}

/* Bucket b holds exactly the gradients want[0..n-1], in that order. */
static int bucket_is(struct plx_ddp *d, int b, const int *want, int n)
{
    int got[64];
    int m = plx_ddp_bucket_grads(d, b, got, 64);
    if (m != n) {
        fprintf(stderr, "bucket %d has %d gradients, want %d\n", b, m, n);
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "bucket %d member %d is gradient %d, want %d\n", b, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

/* ---- layout ---------------------------------------------------------- */
static int case_layout(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    /* Interleaved f32 / bf16: one open bucket per dtype, so two buckets
     * (not one per dtype switch). Reverse order: 5 (bf16) opens bucket 0. */
    {
        struct plx_ddp *d = make(c, 0, 0, 0, 0);
        float f[3][100];
        uint16_t h[3][100];
        for (int k = 0; k < 6; k++)
            CHECK(plx_ddp_register(d, k % 2 ? (void *)h[k / 2] : (void *)f[k / 2], 100, k % 2 ? PLX_BF16 : PLX_F32,
                                   NULL) == 0);
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < 100; i++) {
                f[k][i] = val(2 * k, i, me, 0);
                h[k][i] = to_bf16(val(2 * k + 1, i, me, 0));
            }
        CHECK(plx_ddp_begin(d, PLX_DDP_OVERLAP) == 0);
        for (int k = 5; k >= 0; k--)
            CHECK(plx_ddp_ready(d, k) == 0);
        CHECK(plx_ddp_finish(d) == 0);
        CHECK(plx_ddp_bucket_count(d) == 2);
        CHECK(bucket_is(d, 0, (int[]){5, 3, 1}, 3));
        CHECK(bucket_is(d, 1, (int[]){4, 2, 0}, 3));
        int wrong = 0;
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < 100; i++) {
                float wf = 0, wh = 0;
                for (int r = 0; r < P; r++) {
                    wf += val(2 * k, i, r, 0);
                    wh += val(2 * k + 1, i, r, 0);
                }
                wrong += f[k][i] != wf || from_bf16(h[k][i]) != wh;
            }
        CHECK(wrong == 0);
        plx_ddp_destroy(d);
    }
    /* The gradient that crosses the cap stays in its bucket: cap 10 floats,
     * counts {7, 3, 12, 1}: reverse 1 + 12 = 13 >= 10 closes {3, 2}; 3 + 7
     * = 10 closes {1, 0}. (Opening a new bucket before crossing gives 3.) */
    {
        struct plx_ddp *d = make(c, 40, 0, 0, 0);
        float g[4][12];
        const size_t n[4] = {7, 3, 12, 1};
        for (int k = 0; k < 4; k++)
            CHECK(plx_ddp_register(d, g[k], n[k], PLX_F32, NULL) == 0);
        CHECK(plx_ddp_grad_buffer(d, 0) == g[0]); /* fixes the layout */
        CHECK(plx_ddp_bucket_count(d) == 2);
        CHECK(bucket_is(d, 0, (int[]){3, 2}, 2));
        CHECK(bucket_is(d, 1, (int[]){1, 0}, 2));
        float extra[1];
        CHECK(plx_ddp_register(d, extra, 1, PLX_F32, NULL) == PLX_ERR_INVALID_USAGE);
        plx_ddp_destroy(d);
    }
    /* first_bucket_bytes: six gradients of 10 floats, first cap 40 bytes,
     * cap 80: {5}, {4, 3}, {2, 1}, {0}. */
    {
        struct plx_ddp *d = make(c, 80, 40, 0, 0);
        float g[6][10];
        for (int k = 0; k < 6; k++)
            CHECK(plx_ddp_register(d, g[k], 10, PLX_F32, NULL) == 0);
        CHECK(plx_ddp_grad_buffer(d, 0) != NULL);
        CHECK(plx_ddp_bucket_count(d) == 4);
        CHECK(bucket_is(d, 0, (int[]){5}, 1));
        CHECK(bucket_is(d, 1, (int[]){4, 3}, 2));
        CHECK(bucket_is(d, 3, (int[]){0}, 1));
        plx_ddp_destroy(d);
    }
    /* The default first bucket is 1 MiB under the 25 MiB cap: three
     * gradients of 1.2 MB give {2}, {1, 0}. */
    {
        struct plx_ddp *d = make(c, 0, 0, 0, 1);
        enum { BIG = 300000 };
        float *g[3];
        for (int k = 0; k < 3; k++) {
            g[k] = malloc(BIG * sizeof(float));
            for (size_t i = 0; i < BIG; i++)
                g[k][i] = val(k, i, me, 1);
            CHECK(plx_ddp_register(d, g[k], BIG, PLX_F32, NULL) == 0);
        }
        CHECK(plx_ddp_begin(d, PLX_DDP_OVERLAP) == 0);
        for (int k = 2; k >= 0; k--)
            CHECK(plx_ddp_ready(d, k) == 0);
        CHECK(plx_ddp_finish(d) == 0);
        CHECK(plx_ddp_bucket_count(d) == 2);
        CHECK(bucket_is(d, 0, (int[]){2}, 1));
        CHECK(bucket_is(d, 1, (int[]){1, 0}, 2));
        int wrong = 0;
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < BIG; i += 997) {
                float w = 0;
                for (int r = 0; r < P; r++)
                    w += val(k, i, r, 1);
                wrong += fabsf(g[k][i] - w / P) > 1e-6f * fabsf(w);
            }
        CHECK(wrong == 0);
        for (int k = 0; k < 3; k++)
            free(g[k]);
        plx_ddp_destroy(d);
    }
    return 0;
}

/* ---- gradient as bucket view, re-pointing ----------------------------- */
enum { NV = 5 };
static const size_t vcount[NV] = {5, 300, 17, 1000, 3};

/* Fills gradient k (at p) for step s, runs a step, checks every gradient
 * holds the mean at where[k]. */
static int view_step(struct plx_ddp *d, float *const *where, int me, int P, int step, int mode)
{
    for (int k = 0; k < NV; k++)
        for (size_t i = 0; i < vcount[k]; i++)
            where[k][i] = val(k, i, me, step);
    CHECK(plx_ddp_begin(d, mode) == 0);
    for (int k = NV - 1; k >= 0; k--)
        CHECK(plx_ddp_ready(d, k) == 0);
    CHECK(plx_ddp_finish(d) == 0);
    int wrong = 0;
    for (int k = 0; k < NV; k++)
        for (size_t i = 0; i < vcount[k]; i++) {
            float w = 0;
            for (int r = 0; r < P; r++)
                w += val(k, i, r, step);
            wrong += fabsf(where[k][i] - w / P) > 1e-6f * fabsf(w);
        }
    if (wrong)
        fprintf(stderr, "rank %d step %d: %d wrong elements\n", me, step, wrong);
    return wrong == 0;
}

static int case_view(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    /* cap 1200 bytes: {4, 3}, {2, 1}, {0}: buckets of several gradients and one alone. */
    struct plx_ddp *d = make(c, 1200, 0, 1, 1);
    float seeded[17];
    for (int i = 0; i < 17; i++)
        seeded[i] = 42;
    for (int k = 0; k < NV; k++)
        CHECK(plx_ddp_register(d, k == 2 ? seeded : NULL, vcount[k], PLX_F32, NULL) == 0);
    float *where[NV];
    for (int k = 0; k < NV; k++)
        where[k] = plx_ddp_grad_buffer(d, k);
    for (int k = 0; k < NV; k++)
        CHECK(where[k] != NULL);
    if (failures)
        return 1;
    CHECK(where[2][0] == 42 && where[2][16] == 42); /* initial contents copied in */
    CHECK(where[2] != seeded);
    /* Members of one bucket are adjacent in its flat storage, in bucket order. */
    for (int b = 0; b < plx_ddp_bucket_count(d); b++) {
        int m[NV], n = plx_ddp_bucket_grads(d, b, m, NV);
        for (int j = 0; j + 1 < n; j++)
            CHECK(where[m[j + 1]] == where[m[j]] + vcount[m[j]]);
    }
    CHECK(view_step(d, where, me, P, 0, PLX_DDP_OVERLAP));
    CHECK(view_step(d, where, me, P, 1, PLX_DDP_SYNC));
    for (int k = 0; k < NV; k++)
        CHECK(plx_ddp_grad_buffer(d, k) == where[k]); /* storage stays put */
    CHECK(seeded[0] == 42); /* the registered buffer is not used any more */
    /* Re-point gradient 3 out of its bucket, then back. */
    float *mine = calloc(vcount[3], sizeof(float));
    float *slot3 = where[3];
    CHECK(plx_ddp_set_grad(d, 3, mine) == 0);
    CHECK(plx_ddp_grad_buffer(d, 3) == mine);
    where[3] = mine;
    CHECK(view_step(d, where, me, P, 2, PLX_DDP_OVERLAP));
    CHECK(plx_ddp_set_grad(d, 3, NULL) == 0);
    CHECK(plx_ddp_grad_buffer(d, 3) == slot3);
    where[3] = slot3;
    CHECK(view_step(d, where, me, P, 3, PLX_DDP_OVERLAP));
    CHECK(plx_ddp_begin(d, PLX_DDP_SYNC) == 0);
    CHECK(plx_ddp_set_grad(d, 3, mine) == PLX_ERR_INVALID_USAGE); /* not inside a step */
    for (int k = 0; k < NV; k++)
        CHECK(plx_ddp_ready(d, k) == 0);
    CHECK(plx_ddp_finish(d) == 0);
    plx_ddp_destroy(d);

    /* Without a bucket view: re-pointing moves where results land. */
    d = make(c, 1200, 0, 0, 1);
    float *own[NV], *other = calloc(vcount[1], sizeof(float));
    for (int k = 0; k < NV; k++) {
        own[k] = calloc(vcount[k], sizeof(float));
        CHECK(plx_ddp_register(d, own[k], vcount[k], PLX_F32, NULL) == 0);
    }
    CHECK(view_step(d, own, me, P, 4, PLX_DDP_OVERLAP));
    CHECK(plx_ddp_set_grad(d, 1, NULL) == PLX_ERR_INVALID_USAGE);
    CHECK(plx_ddp_set_grad(d, 1, other) == 0);
    own[1][0] = -1234;
    float *moved[NV] = {own[0], other, own[2], own[3], own[4]};
    CHECK(view_step(d, moved, me, P, 5, PLX_DDP_OVERLAP));
    CHECK(own[1][0] == -1234); /* the old buffer is left alone */
    plx_ddp_destroy(d);
    for (int k = 0; k < NV; k++)
        free(own[k]);
    free(other);
    free(mine);
    return 0;
}

/* ---- unused parameters ------------------------------------------------ */
static int case_unused(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    for (int view = 0; view < 2; view++) {
        /* Gradient 1 is unused on odd ranks, gradient 2 on every rank. */
        struct plx_ddp *d = make(c, 64, 0, view, 0);
        float g[3][20];
        float *p[3];
        for (int k = 0; k < 3; k++)
            CHECK(plx_ddp_register(d, g[k], 20, PLX_F32, NULL) == 0);
        for (int k = 0; k < 3; k++)
            p[k] = plx_ddp_grad_buffer(d, k);
        for (int step = 0; step < 2; step++) {
            for (int k = 0; k < 3; k++)
                for (size_t i = 0; i < 20; i++)
                    p[k][i] = (k == 2 || (k == 1 && me % 2)) ? 1e30f : val(k, i, me, step); /* garbage if unused */
            CHECK(plx_ddp_begin(d, PLX_DDP_OVERLAP) == 0);
            CHECK(plx_ddp_mark_unused(d, 2) == 0);
            if (me % 2)
                CHECK(plx_ddp_mark_unused(d, 1) == 0);
            else
                CHECK(plx_ddp_ready(d, 1) == 0);
            CHECK(plx_ddp_ready(d, 0) == 0);
            CHECK(plx_ddp_finish(d) == 0);
            int wrong = 0;
            for (size_t i = 0; i < 20; i++) {
                float w0 = 0, w1 = 0;
                for (int r = 0; r < P; r++) {
                    w0 += val(0, i, r, step);
                    w1 += r % 2 ? 0 : val(1, i, r, step);
                }
                wrong += p[0][i] != w0 || p[1][i] != w1 || p[2][i] != 0;
            }
            if (wrong)
                fprintf(stderr, "unused (view %d) rank %d step %d: %d wrong\n", view, me, step, wrong);
            CHECK(wrong == 0);
        }
        /* What a NO_SYNC step accumulated still counts when the synchronised
         * step leaves the gradient unused (PyTorch copies the defined grad). */
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < 20; i++)
                p[k][i] = val(k, i, me, 5);
        CHECK(plx_ddp_begin(d, PLX_DDP_NO_SYNC) == 0);
        for (int k = 0; k < 3; k++)
            CHECK(plx_ddp_ready(d, k) == 0);
        CHECK(plx_ddp_finish(d) == 0);
        CHECK(plx_ddp_begin(d, PLX_DDP_SYNC) == 0);
        for (int k = 0; k < 3; k++)
            CHECK((k == 1 ? plx_ddp_mark_unused(d, k) : plx_ddp_ready(d, k)) == 0);
        CHECK(plx_ddp_mark_unused(d, 1) == PLX_ERR_INVALID_USAGE);
        CHECK(plx_ddp_finish(d) == 0);
        int wrong = 0;
        for (size_t i = 0; i < 20; i++) {
            float w = 0;
            for (int r = 0; r < P; r++)
                w += val(1, i, r, 5);
            wrong += p[1][i] != w;
        }
        CHECK(wrong == 0);
        plx_ddp_destroy(d);
    }
    return 0;
}

/* ---- accumulation: two NO_SYNC micro-batches, then a synchronised one -- */
static int case_accum(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    for (int view = 0; view < 2; view++)
        for (int mode = PLX_DDP_SYNC; mode <= PLX_DDP_OVERLAP; mode++) {
            struct plx_ddp *d = make(c, 1200, 0, view, 1);
            float *own[NV], *p[NV];
            for (int k = 0; k < NV; k++) {
                own[k] = calloc(vcount[k], sizeof(float));
                CHECK(plx_ddp_register(d, own[k], vcount[k], PLX_F32, NULL) == 0);
            }
            for (int k = 0; k < NV; k++)
                p[k] = plx_ddp_grad_buffer(d, k);
            for (int micro = 0; micro < 3; micro++) {
                for (int k = 0; k < NV; k++)
                    for (size_t i = 0; i < vcount[k]; i++)
                        p[k][i] += val(k, i, me, micro); /* backward accumulates */
                CHECK(plx_ddp_begin(d, micro < 2 ? PLX_DDP_NO_SYNC : mode) == 0);
                for (int k = NV - 1; k >= 0; k--)
                    CHECK(plx_ddp_ready(d, k) == 0);
                CHECK(plx_ddp_finish(d) == 0);
                if (micro == 0)
                    CHECK(p[1][0] == val(1, 0, me, 0)); /* NO_SYNC leaves it alone */
            }
            int wrong = 0;
            for (int k = 0; k < NV; k++)
                for (size_t i = 0; i < vcount[k]; i++) {
                    float w = 0;
                    for (int r = 0; r < P; r++)
                        w += val(k, i, r, 0) + val(k, i, r, 1) + val(k, i, r, 2);
                    wrong += fabsf(p[k][i] - w / P) > 1e-6f * fabsf(w);
                }
            CHECK(wrong == 0);
            plx_ddp_destroy(d);
            for (int k = 0; k < NV; k++)
                free(own[k]);
        }
    return 0;
}

/* ---- communication hooks ---------------------------------------------- */
struct counting {
    int calls[16], finishes[16], order[16], n;
};

static int count_start(void *state, const struct plx_ddp_bucket *b, struct plx_work **work)
{
    struct counting *s = state;
    s->calls[b->index]++;
    s->order[s->n++] = b->index;
    return plx_iallreduce(b->comm, b->data, b->data, b->count, b->dtype, PLX_SUM, NULL, work);
}

static int count_finish(void *state, const struct plx_ddp_bucket *b)
{
    struct counting *s = state;
    s->finishes[b->index]++;
    float *f = b->data; /* the hook owns averaging: SUM then divide */
    for (size_t i = 0; i < b->count; i++)
        f[i] /= (float)plx_comm_size(b->comm);
    return 0;
}

static int case_hooks(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    /* 16-bit compression: values not representable in 16 bits, some large
     * enough (40000 on every rank) that summing before dividing would
     * overflow f16 (max 65504). Bound per element: each rank's x/P is
     * rounded once (relative u), every partial sum once more: at most
     * (P + 1) u sum|x_r|/P. */
    for (int which = PLX_DDP_HOOK_FP16_COMPRESS; which <= PLX_DDP_HOOK_BF16_COMPRESS; which++)
        for (int view = 0; view < 2; view++) {
            double u = which == PLX_DDP_HOOK_FP16_COMPRESS ? 1.0 / 2048 : 1.0 / 256;
            struct plx_ddp *d = make(c, 400, 0, view, 1);
            CHECK(plx_ddp_register_builtin_hook(d, which) == 0);
            enum { NH = 3, LEN = 250 };
            float own[NH][LEN], *p[NH];
            for (int k = 0; k < NH; k++)
                CHECK(plx_ddp_register(d, own[k], LEN, PLX_F32, NULL) == 0);
            for (int k = 0; k < NH; k++)
                p[k] = plx_ddp_grad_buffer(d, k);
            for (int step = 0; step < 2; step++) {
                for (int k = 0; k < NH; k++)
                    for (size_t i = 0; i < LEN; i++)
                        p[k][i] = i == 7 ? 40000.0f : (val(k, i, me, step) + 0.1234567f) * 0.37f;
                CHECK(plx_ddp_begin(d, step ? PLX_DDP_SYNC : PLX_DDP_OVERLAP) == 0);
                for (int k = NH - 1; k >= 0; k--)
                    CHECK(plx_ddp_ready(d, k) == 0);
                CHECK(plx_ddp_finish(d) == 0);
                int wrong = 0, inexact = 0;
                double worst = 0;
                for (int k = 0; k < NH; k++)
                    for (size_t i = 0; i < LEN; i++) {
                        double w = 0, a = 0;
                        for (int r = 0; r < P; r++) {
                            double x = i == 7 ? 40000.0f : (val(k, i, r, step) + 0.1234567f) * 0.37f;
                            w += x;
                            a += fabs(x);
                        }
                        w /= P;
                        double err = fabs(p[k][i] - w), tol = (P + 1) * u * a / P + 1e-30;
                        wrong += !(err <= tol);
                        inexact += err > 1e-6 * a / P;
                        worst = fmax(worst, err / tol);
                    }
                if (wrong)
                    fprintf(stderr, "hook %d view %d rank %d: %d elements outside the bound (worst %.2f x)\n", which,
                            view, me, wrong, worst);
                CHECK(wrong == 0);
                CHECK(inexact > 0); /* the gradients really went through 16 bits */
            }
            CHECK(plx_ddp_register_builtin_hook(d, which) == PLX_ERR_INVALID_USAGE); /* after the first step */
            plx_ddp_destroy(d);
        }
    /* A user hook: called once per bucket per synchronised step, in bucket
     * order, never in NO_SYNC; its finish runs after the work. */
    struct counting s = {0};
    struct plx_ddp *d = make(c, 1200, 0, 0, 1);
    struct plx_ddp_comm_hook h = {sizeof h, &s, count_start, count_finish};
    CHECK(plx_ddp_register_comm_hook(d, &h) == 0);
    float *own[NV];
    for (int k = 0; k < NV; k++) {
        own[k] = calloc(vcount[k], sizeof(float));
        CHECK(plx_ddp_register(d, own[k], vcount[k], PLX_F32, NULL) == 0);
    }
    CHECK(view_step(d, own, me, P, 0, PLX_DDP_OVERLAP));
    CHECK(plx_ddp_begin(d, PLX_DDP_NO_SYNC) == 0);
    for (int k = 0; k < NV; k++)
        CHECK(plx_ddp_ready(d, k) == 0);
    CHECK(plx_ddp_finish(d) == 0);
    CHECK(view_step(d, own, me, P, 1, PLX_DDP_SYNC));
    int nb = plx_ddp_bucket_count(d);
    CHECK(nb == 3);
    for (int b = 0; b < nb; b++)
        CHECK(s.calls[b] == 2 && s.finishes[b] == 2);
    CHECK(s.n == 2 * nb);
    for (int i = 0; i < s.n; i++)
        CHECK(s.order[i] == i % nb);
    plx_ddp_destroy(d);
    for (int k = 0; k < NV; k++)
        free(own[k]);
    return 0;
}

/* ---- several threads of one rank marking gradients ---------------------- */
enum { NT = 4, NG = 64, TSTEPS = 20 };

struct marker {
    struct plx_ddp *d;
    pthread_barrier_t *go;
    int t, rc;
};

static void *mark_some(void *p)
{
    struct marker *m = p;
    pthread_barrier_wait(m->go);
    for (int k = NG - 1 - m->t; k >= 0; k -= NT) /* thread t: gradients t, t + NT, ... from the back */
        if (plx_ddp_ready(m->d, k))
            m->rc = 1;
    return NULL;
}

static int case_threads(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    struct plx_ddp *d = make(c, 64, 0, 0, 0); /* many small buckets */
    float *g[NG];
    for (int k = 0; k < NG; k++) {
        g[k] = malloc((size_t)(k % 7 + 1) * 4 * sizeof(float));
        CHECK(plx_ddp_register(d, g[k], (size_t)(k % 7 + 1) * 4, PLX_F32, NULL) == 0);
    }
    for (int step = 0; step < TSTEPS; step++) {
        for (int k = 0; k < NG; k++)
            for (size_t i = 0; i < (size_t)(k % 7 + 1) * 4; i++)
                g[k][i] = val(k, i, me, step);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, NT);
        struct marker m[NT];
        pthread_t th[NT];
        CHECK(plx_ddp_begin(d, PLX_DDP_OVERLAP) == 0);
        for (int t = 0; t < NT; t++) {
            m[t] = (struct marker){d, &go, t, 0};
            pthread_create(&th[t], NULL, mark_some, &m[t]);
        }
        for (int t = 0; t < NT; t++) {
            pthread_join(th[t], NULL);
            CHECK(m[t].rc == 0);
        }
        pthread_barrier_destroy(&go);
        CHECK(plx_ddp_finish(d) == 0);
        int wrong = 0;
        for (int k = 0; k < NG; k++)
            for (size_t i = 0; i < (size_t)(k % 7 + 1) * 4; i++) {
                float w = 0;
                for (int r = 0; r < P; r++)
                    w += val(k, i, r, step);
                wrong += g[k][i] != w;
            }
        if (wrong)
            fprintf(stderr, "threads: rank %d step %d: %d wrong\n", me, step, wrong);
        CHECK(wrong == 0);
    }
    plx_ddp_destroy(d);
    for (int k = 0; k < NG; k++)
        free(g[k]);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(struct plx_comm *);
} cases[] = {
    {"layout", case_layout}, {"view", case_view},   {"unused", case_unused},
    {"accum", case_accum},   {"hooks", case_hooks}, {"threads", case_threads},
};
static const char *only;

static int rank_fn(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    if (rc)
        return 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!only || !strcmp(only, cases[i].name)) {
            int before = failures;
            cases[i].fn(ctx->comm);
            if (ctx->rank == 0)
                printf("%-8s %s\n", cases[i].name, failures == before ? "ok" : "FAILED");
        }
    return failures != 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_ddp_reducer P [layout|view|unused|accum|hooks|threads]\n");
        return 2;
    }
    only = argc > 2 ? argv[2] : NULL;
    return run_ranks(atoi(argv[1]), "sim", NULL, 30000, rank_fn, NULL) || failures;
}
