/* syncbn.c - batch normalisation synchronised over a communicator
 * (PyTorch's SyncBatchNorm) on flat n x C x spatial f32 buffers.
 *
 * Statistics are accumulated in double. Each rank contributes (count, mean,
 * M2) per channel, computed in two passes; one allgather brings every
 * rank's triple and every rank merges them in rank order with Chan's
 * formula, so all ranks get bit-identical statistics and no cancellation
 * of a sum of squares. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/strategy.h"

struct plx_syncbn {
    struct plx_comm *comm;
    size_t C;
    struct plx_syncbn_options opt;
    float *running_mean, *running_var;
    double *mean, *invstd; /* of the last training forward */
    double total;          /* values per channel in the world at that forward */
    int have_stats;
    double *local, *all;   /* C x 3 of this rank; P x C x 3 gathered */
    double *sums;          /* backward: 2 C */
};

PLX_API void plx_syncbn_options_init(struct plx_syncbn_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->eps = 1e-5;
    o->momentum = 0.1;
}

PLX_API int plx_syncbn_create(struct plx_comm *comm, size_t channels, const struct plx_syncbn_options *o,
                              struct plx_syncbn **out)
{
    if (!comm || !out || channels == 0)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_syncbn_create: comm or out NULL, or 0 channels");
    struct plx_syncbn *bn = calloc(1, sizeof *bn);
    if (!bn)
        return plx_set_error(PLX_ERR_NOMEM, "plx_syncbn_create: out of memory");
    bn->comm = comm;
    bn->C = channels;
    plx_syncbn_options_init(&bn->opt);
    if (o) {
        if (PLX_HAS_FIELD(o, struct plx_syncbn_options, eps))
            bn->opt.eps = o->eps;
        if (PLX_HAS_FIELD(o, struct plx_syncbn_options, momentum))
            bn->opt.momentum = o->momentum;
    }
    size_t P = (size_t)plx_comm_size(comm);
    bn->running_mean = calloc(channels, sizeof(float));
    bn->running_var = malloc(channels * sizeof(float));
    bn->mean = calloc(channels, sizeof(double));
    bn->invstd = calloc(channels, sizeof(double));
    bn->local = calloc(channels * 3, sizeof(double));
    bn->all = calloc(channels * 3 * P, sizeof(double));
    bn->sums = calloc(channels * 2, sizeof(double));
    if (!bn->running_mean || !bn->running_var || !bn->mean || !bn->invstd || !bn->local || !bn->all || !bn->sums) {
        plx_syncbn_destroy(bn);
        return plx_set_error(PLX_ERR_NOMEM, "plx_syncbn_create: out of memory for %zu channels", channels);
    }
    for (size_t c = 0; c < channels; c++)
        bn->running_var[c] = 1;
    *out = bn;
    return 0;
}

PLX_API void plx_syncbn_destroy(struct plx_syncbn *bn)
{
    if (!bn)
        return;
    free(bn->running_mean);
    free(bn->running_var);
    free(bn->mean);
    free(bn->invstd);
    free(bn->local);
    free(bn->all);
    free(bn->sums);
    free(bn);
}

PLX_API float *plx_syncbn_running_mean(struct plx_syncbn *bn)
{
    return bn ? bn->running_mean : NULL;
}

PLX_API float *plx_syncbn_running_var(struct plx_syncbn *bn)
{
    return bn ? bn->running_var : NULL;
}

/* This rank's (count, mean, M2) per channel, two passes. */
static void local_stats(struct plx_syncbn *bn, const float *x, size_t n, size_t S)
{
    size_t C = bn->C;
    for (size_t c = 0; c < C; c++) {
        double sum = 0, m2 = 0;
        for (size_t i = 0; i < n; i++)
            for (const float *p = x + (i * C + c) * S, *e = p + S; p < e; p++)
                sum += *p;
        double cnt = (double)(n * S), mean = cnt > 0 ? sum / cnt : 0;
        for (size_t i = 0; i < n; i++)
            for (const float *p = x + (i * C + c) * S, *e = p + S; p < e; p++)
                m2 += (*p - mean) * (*p - mean);
        bn->local[3 * c] = cnt;
        bn->local[3 * c + 1] = mean;
        bn->local[3 * c + 2] = m2;
    }
}

/* Chan et al.: merge (nb, mb, M2b) into (n, m, M2), in rank order. */
static void merge(double *n, double *m, double *M2, double nb, double mb, double M2b)
{
    if (nb == 0)
        return;
    double tot = *n + nb, delta = mb - *m;
    *m += delta * nb / tot;
    *M2 += M2b + delta * delta * *n * nb / tot;
    *n = tot;
}

static void normalise(const struct plx_syncbn *bn, const float *x, float *y, size_t n, size_t S, const double *mean,
                      const double *invstd, const float *weight, const float *bias)
{
    size_t C = bn->C;
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < C; c++) {
            double w = weight ? weight[c] : 1, b = bias ? bias[c] : 0, m = mean[c], is = invstd[c];
            const float *p = x + (i * C + c) * S;
            float *q = y + (i * C + c) * S;
            for (size_t s = 0; s < S; s++)
                q[s] = (float)((p[s] - m) * is * w + b);
        }
}

PLX_API int plx_syncbn_forward(struct plx_syncbn *bn, const float *x, float *y, size_t n, size_t spatial,
                               const float *weight, const float *bias, int training)
{
    if (!bn || (n && spatial && (!x || !y)) || spatial == 0)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_syncbn_forward: bad buffers (x %p, y %p, spatial %zu)",
                        (const void *)x, (void *)y, spatial);
    size_t C = bn->C;
    if (!training) { /* the backward scratch holds the running statistics; a training forward's are kept */
        double *mean = bn->sums, *invstd = bn->sums + C;
        for (size_t c = 0; c < C; c++) {
            mean[c] = bn->running_mean[c];
            invstd[c] = 1 / sqrt((double)bn->running_var[c] + bn->opt.eps);
        }
        normalise(bn, x, y, n, spatial, mean, invstd, weight, bias);
        return 0;
    }
    local_stats(bn, x, n, spatial);
    int rc = plx_allgather(bn->comm, bn->local, bn->all, C * 3, PLX_F64);
    if (rc)
        return rc;
    int P = plx_comm_size(bn->comm);
    double total = 0;
    for (size_t c = 0; c < C; c++) {
        double cnt = 0, mean = 0, m2 = 0;
        for (int r = 0; r < P; r++) {
            const double *t = bn->all + ((size_t)r * C + c) * 3;
            merge(&cnt, &mean, &m2, t[0], t[1], t[2]);
        }
        total = cnt;
        if (cnt <= 1) {
            bn->have_stats = 0;
            return plx_set_error(PLX_ERR_INVALID_ARG,
                            "plx_syncbn_forward: expected more than 1 value per channel in the world, got %.0f", cnt);
        }
        bn->mean[c] = mean;
        bn->invstd[c] = 1 / sqrt(m2 / cnt + bn->opt.eps);
        double mom = bn->opt.momentum;
        bn->running_mean[c] = (float)((1 - mom) * bn->running_mean[c] + mom * mean);
        bn->running_var[c] = (float)((1 - mom) * bn->running_var[c] + mom * (m2 / (cnt - 1)));
    }
    bn->total = total;
    bn->have_stats = 1;
    normalise(bn, x, y, n, spatial, bn->mean, bn->invstd, weight, bias);
    return 0;
}

PLX_API int plx_syncbn_backward(struct plx_syncbn *bn, const float *x, const float *dy, float *dx, size_t n,
                                size_t spatial, const float *weight, float *dweight, float *dbias)
{
    if (!bn || (n && spatial && (!x || !dy || !dx)) || spatial == 0)
        return plx_set_error(PLX_ERR_INVALID_ARG, "plx_syncbn_backward: bad buffers");
    if (!bn->have_stats)
        return plx_set_error(PLX_ERR_INVALID_USAGE, "plx_syncbn_backward: no training forward to go back through");
    size_t C = bn->C, S = spatial;
    double *sdy = bn->sums, *sdyx = bn->sums + C;
    for (size_t c = 0; c < C; c++) {
        double a = 0, b = 0, m = bn->mean[c], is = bn->invstd[c];
        for (size_t i = 0; i < n; i++) {
            const float *p = x + (i * C + c) * S, *g = dy + (i * C + c) * S;
            for (size_t s = 0; s < S; s++) {
                a += g[s];
                b += g[s] * (p[s] - m) * is;
            }
        }
        sdy[c] = a;
        sdyx[c] = b;
        if (dbias)
            dbias[c] = (float)a;
        if (dweight)
            dweight[c] = (float)b;
    }
    int rc = plx_allreduce(bn->comm, bn->sums, bn->sums, 2 * C, PLX_F64, PLX_SUM);
    if (rc)
        return rc;
    double N = bn->total;
    for (size_t c = 0; c < C; c++) {
        double w = weight ? weight[c] : 1, m = bn->mean[c], is = bn->invstd[c];
        double mdy = sdy[c] / N, mdyx = sdyx[c] / N;
        for (size_t i = 0; i < n; i++) {
            const float *p = x + (i * C + c) * S, *g = dy + (i * C + c) * S;
            float *q = dx + (i * C + c) * S;
            for (size_t s = 0; s < S; s++)
                q[s] = (float)(w * is * (g[s] - mdy - (p[s] - m) * is * mdyx));
        }
    }
    return 0;
}
