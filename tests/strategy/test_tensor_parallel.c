/* Tensor parallelism on P sim ranks.
 *   split:   for every n <= 40 and parts <= 6 the parts cover 0 .. n once;
 *            EVEN refuses exactly the sizes that do not divide.
 *   adjoint: each operator's backward is its forward's adjoint:
 *            sum_r <F(x)_r, y_r> == sum_r <x_r, B(y)_r> (a replicated
 *            tensor counted once), and F/B compute
 *            what they promise (copy, sum, concatenation, shard of the sum).
 *   mlp:     a column-parallel -> tanh -> row-parallel block, forward and
 *            backward (output, input gradient, every weight gradient)
 *            equals the unsharded computation, for hidden sizes that divide
 *            P and one that does not (padded; refused without padding).
 * usage: test_tensor_parallel P */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/parallel.h"
#include "ranks.h"

static int failures, P;

static void splits(void)
{
    for (size_t n = 0; n <= 40; n++)
        for (int parts = 1; parts <= 6; parts++) {
            size_t next = 0, padded = 0;
            for (int i = 0; i < parts; i++) {
                struct plx_tp_range r;
                CHECK(plx_tp_split(n, parts, i, PLX_TP_PAD, &r) == 0);
                CHECK(r.count <= r.padded && (r.count == 0 || r.offset == next));
                CHECK(i == 0 || r.padded == padded);
                padded = r.padded;
                next = r.offset + r.count;
                int even = plx_tp_split(n, parts, i, PLX_TP_EVEN, &r);
                CHECK(n % (size_t)parts ? even == PLX_ERR_INVALID_ARG : even == 0 && r.count == r.padded);
            }
            CHECK(next == n && padded * (size_t)parts >= n && (padded == 0 || (padded - 1) * (size_t)parts < n));
        }
    struct plx_tp_range r;
    CHECK(plx_tp_split(10, 4, 0, PLX_TP_EVEN, &r) == PLX_ERR_INVALID_ARG);
    CHECK(strstr(plx_last_error(), "does not split evenly") != NULL);
}

/* Rank r's input element i for an operator test. */
static double xval(int r, size_t i)
{
    return (double)((int)(i * 7 + (size_t)r * 5) % 11) - 5.0;
}

static double yval(int r, size_t i)
{
    return (double)((int)(i * 3 + (size_t)r * 7) % 13) - 6.0;
}

static int adjoint(struct plx_comm *tp, int me)
{
    const size_t n = 5; /* one rank's shard for the sequence pair; the whole tensor for copy/reduce */
    size_t full = n * (size_t)P;
    double *x = calloc(full, sizeof *x), *fx = calloc(full, sizeof *fx), *y = calloc(full, sizeof *y),
           *by = calloc(full, sizeof *by);
    for (int op = PLX_TP_COPY; op <= PLX_TP_SCATTER_SEQ; op++) {
        /* in/out sizes of the forward */
        size_t nin = op == PLX_TP_SCATTER_SEQ ? full : n, nout = op == PLX_TP_GATHER_SEQ ? full : n;
        /* A replicated side (COPY's input, REDUCE's output) is one tensor
         * held by every rank: the same values, counted once below. */
        for (size_t i = 0; i < nin; i++)
            x[i] = xval(op == PLX_TP_COPY ? 0 : me, i);
        for (size_t i = 0; i < nout; i++)
            y[i] = yval(op == PLX_TP_REDUCE ? 0 : me, i);
        CHECK(plx_tp_forward(tp, op, x, fx, op == PLX_TP_SCATTER_SEQ ? n : nin, PLX_F64) == 0);
        CHECK(plx_tp_backward(tp, op, y, by, op == PLX_TP_GATHER_SEQ ? n : nout, PLX_F64) == 0);
        /* what the forward promises */
        int right = 1;
        for (size_t i = 0; i < nout; i++) {
            double want = 0;
            if (op == PLX_TP_COPY)
                want = xval(0, i);
            else if (op == PLX_TP_REDUCE)
                for (int r = 0; r < P; r++)
                    want += xval(r, i);
            else if (op == PLX_TP_GATHER_SEQ)
                want = xval((int)(i / n), i % n);
            else
                for (int r = 0; r < P; r++)
                    want += xval(r, (size_t)me * n + i);
            right &= fx[i] == want;
        }
        CHECK(right);
        double lhs = 0, rhs = 0, sums[2];
        for (size_t i = 0; i < nout; i++)
            lhs += fx[i] * y[i];
        for (size_t i = 0; i < nin; i++)
            rhs += x[i] * by[i];
        double mine[2] = {op == PLX_TP_REDUCE && me ? 0 : lhs, op == PLX_TP_COPY && me ? 0 : rhs};
        CHECK(plx_allreduce(tp, mine, sums, 2, PLX_F64, PLX_SUM) == 0);
        if (sums[0] != sums[1]) {
            fprintf(stderr, "operator %d: <F x, y> = %g but <x, B y> = %g\n", op, sums[0], sums[1]);
            failures++;
        }
    }
    /* in place works too */
    for (size_t i = 0; i < n; i++)
        x[i] = xval(me, i);
    CHECK(plx_tp_backward(tp, PLX_TP_COPY, x, x, n, PLX_F64) == 0);
    double want = 0;
    for (int r = 0; r < P; r++)
        want += xval(r, 0);
    CHECK(x[0] == want);
    free(x);
    free(fx);
    free(y);
    free(by);
    return 0;
}

enum { B = 3, D = 5, DO = 4 };

static float wval(int k, size_t i)
{
    return (float)((int)((i * 37 + (size_t)k * 11) % 19) - 9) / 16.0f;
}

struct grads {
    float z[B * DO], dx[B * D], *dW1, *db1, *dW2, db2[DO];
};

/* The unsharded block: z = W2 tanh(W1 x + b1) + b2, loss = sum(z * c). */
static void reference(size_t H, const float *x, const float *W1, const float *b1, const float *W2, const float *b2,
                      const float *c, struct grads *g)
{
    float *h = calloc((size_t)B * H, sizeof *h);
    memset(g->dx, 0, sizeof g->dx);
    memset(g->db2, 0, sizeof g->db2);
    memset(g->dW1, 0, H * D * sizeof(float));
    memset(g->db1, 0, H * sizeof(float));
    memset(g->dW2, 0, DO * H * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (size_t j = 0; j < H; j++) {
            float a = b1[j];
            for (int d = 0; d < D; d++)
                a += W1[j * D + (size_t)d] * x[b * D + d];
            h[(size_t)b * H + j] = tanhf(a);
        }
        for (int o = 0; o < DO; o++) {
            float z = b2[o];
            for (size_t j = 0; j < H; j++)
                z += W2[(size_t)o * H + j] * h[(size_t)b * H + j];
            g->z[b * DO + o] = z;
            g->db2[o] += c[b * DO + o];
        }
        for (size_t j = 0; j < H; j++) {
            float dh = 0;
            for (int o = 0; o < DO; o++) {
                dh += W2[(size_t)o * H + j] * c[b * DO + o];
                g->dW2[(size_t)o * H + j] += c[b * DO + o] * h[(size_t)b * H + j];
            }
            float da = dh * (1 - h[(size_t)b * H + j] * h[(size_t)b * H + j]);
            g->db1[j] += da;
            for (int d = 0; d < D; d++) {
                g->dW1[j * D + (size_t)d] += da * x[b * D + d];
                g->dx[b * D + d] += W1[j * D + (size_t)d] * da;
            }
        }
    }
    free(h);
}

static int close_to(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) /* sums in a different order: a few ulps of values near 1 */
        if (fabsf(a[i] - b[i]) > 1e-5f * (1 + fabsf(b[i])))
            return 0;
    return 1;
}

static void mlp(struct plx_comm *tp, int me, size_t H)
{
    float x[B * D], c[B * DO], b2[DO];
    float *W1 = malloc(H * D * 4), *b1 = malloc(H * 4), *W2 = malloc(DO * H * 4);
    struct grads ref = {.dW1 = calloc(H * D, 4), .db1 = calloc(H, 4), .dW2 = calloc(DO * H, 4)};
    struct grads par = {.dW1 = calloc(H * D, 4), .db1 = calloc(H, 4), .dW2 = calloc(DO * H, 4)};
    for (size_t i = 0; i < B * D; i++)
        x[i] = wval(0, i);
    for (size_t i = 0; i < B * DO; i++)
        c[i] = wval(5, i);
    for (size_t i = 0; i < H * D; i++)
        W1[i] = wval(1, i);
    for (size_t i = 0; i < H; i++)
        b1[i] = wval(2, i);
    for (size_t i = 0; i < DO * H; i++)
        W2[i] = wval(3, i);
    for (size_t i = 0; i < DO; i++)
        b2[i] = wval(4, i);
    reference(H, x, W1, b1, W2, b2, c, &ref);

    struct plx_tp_linear col, row;
    int mode = H % (size_t)P ? PLX_TP_PAD : PLX_TP_EVEN;
    if (H % (size_t)P) { /* refused without padding, with the reason */
        CHECK(plx_tp_linear_init(&col, PLX_TP_COLUMN, D, H, me, P, PLX_TP_EVEN) == PLX_ERR_INVALID_ARG);
        CHECK(strstr(plx_last_error(), "column-parallel") && strstr(plx_last_error(), "evenly"));
        if (me == 0)
            printf("refused: %s\n", plx_last_error());
    }
    CHECK(plx_tp_linear_init(&col, PLX_TP_COLUMN, D, H, me, P, mode) == 0);
    CHECK(plx_tp_linear_init(&row, PLX_TP_ROW, H, DO, me, P, mode) == 0);
    size_t h = col.local_out; /* padded local hidden */
    CHECK(row.local_in == h && col.local_in == D && row.local_out == DO);
    float *w1 = malloc(h * D * 4), *bb1 = malloc(h * 4), *w2 = malloc(DO * h * 4), bb2[DO];
    CHECK(plx_tp_linear_shard(&col, W1, b1, w1, bb1, PLX_F32) == 0);
    CHECK(plx_tp_linear_shard(&row, W2, b2, w2, bb2, PLX_F32) == 0);

    /* forward: f (identity), column linear + tanh, row linear, g (sum), + b2 */
    float xin[B * D], *a = calloc((size_t)B * h, 4), zp[B * DO];
    CHECK(plx_tp_forward(tp, PLX_TP_COPY, x, xin, B * D, PLX_F32) == 0);
    for (int b = 0; b < B; b++) {
        for (size_t j = 0; j < h; j++) {
            float s = bb1[j];
            for (int d = 0; d < D; d++)
                s += w1[j * D + (size_t)d] * xin[b * D + d];
            a[(size_t)b * h + j] = tanhf(s);
        }
        for (int o = 0; o < DO; o++) {
            float s = 0;
            for (size_t j = 0; j < h; j++)
                s += w2[(size_t)o * h + j] * a[(size_t)b * h + j];
            zp[b * DO + o] = s;
        }
    }
    CHECK(plx_tp_forward(tp, PLX_TP_REDUCE, zp, par.z, B * DO, PLX_F32) == 0);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < DO; o++)
            par.z[b * DO + o] += bb2[o];
    CHECK(close_to(par.z, ref.z, B * DO));

    /* backward: g^T (identity), row then column backward, f^T (sum) */
    float dz[B * DO], dxp[B * D] = {0}, *dw1 = calloc(h * D, 4), *db1 = calloc(h, 4), *dw2 = calloc(DO * h, 4);
    CHECK(plx_tp_backward(tp, PLX_TP_REDUCE, c, dz, B * DO, PLX_F32) == 0);
    for (int b = 0; b < B; b++)
        for (size_t j = 0; j < h; j++) {
            float dh = 0, act = a[(size_t)b * h + j];
            for (int o = 0; o < DO; o++) {
                dh += w2[(size_t)o * h + j] * dz[b * DO + o];
                dw2[(size_t)o * h + j] += dz[b * DO + o] * act;
            }
            float da = dh * (1 - act * act);
            db1[j] += da;
            for (int d = 0; d < D; d++) {
                dw1[j * D + (size_t)d] += da * xin[b * D + d];
                dxp[b * D + d] += w1[j * D + (size_t)d] * da;
            }
        }
    CHECK(plx_tp_backward(tp, PLX_TP_COPY, dxp, par.dx, B * D, PLX_F32) == 0);
    CHECK(close_to(par.dx, ref.dx, B * D));
    /* Every rank's shard of the weight gradients, placed into full buffers
     * (zero elsewhere) and summed over ranks: the full gradients. */
    CHECK(plx_tp_linear_unshard(&col, dw1, db1, par.dW1, par.db1, PLX_F32) == 0);
    CHECK(plx_tp_linear_unshard(&row, dw2, NULL, par.dW2, NULL, PLX_F32) == 0);
    CHECK(plx_allreduce(tp, par.dW1, par.dW1, H * D, PLX_F32, PLX_SUM) == 0);
    CHECK(plx_allreduce(tp, par.db1, par.db1, H, PLX_F32, PLX_SUM) == 0);
    CHECK(plx_allreduce(tp, par.dW2, par.dW2, DO * H, PLX_F32, PLX_SUM) == 0);
    CHECK(close_to(par.dW1, ref.dW1, H * D));
    CHECK(close_to(par.db1, ref.db1, H));
    CHECK(close_to(par.dW2, ref.dW2, DO * H));
    if (me == 0)
        printf("mlp P=%d hidden=%zu (local %zu%s): forward and backward equal the unsharded block\n", P, H, h,
               mode == PLX_TP_PAD ? ", padded" : "");
    free(W1), free(b1), free(W2), free(w1), free(bb1), free(w2), free(a), free(dw1), free(db1), free(dw2);
    free(ref.dW1), free(ref.db1), free(ref.dW2), free(par.dW1), free(par.db1), free(par.dW2);
}

static int body(struct rank_ctx *ctx, int init_status)
{
    if (init_status)
        return 1;
    adjoint(ctx->comm, ctx->rank);
    mlp(ctx->comm, ctx->rank, 8);
    mlp(ctx->comm, ctx->rank, 6); /* not a multiple of 4 */
    mlp(ctx->comm, ctx->rank, 5); /* not a multiple of 2 or 4 */
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    P = argc > 1 ? atoi(argv[1]) : 2;
    splits();
    int rc = run_ranks(P, "sim", NULL, 30000, body, NULL);
    if (rc || failures)
        fprintf(stderr, "tensor_parallel P=%d: %d checks failed\n", P, failures);
    return rc || failures ? 1 : 0;
}
