/* DDP OVERLAP with gradients marked ready in a different random order on
 * every rank and step: buckets of unequal sizes must still pair up by
 * bucket order, so every gradient holds the exact sum (integer values in
 * f32) of every rank's gradient. Launching buckets in completion order
 * pairs bucket k on one rank with bucket j on another: wrong sums, or a
 * transport error when their sizes differ.
 *
 * usage: test_ddp_order --threads P   (sim ranks as threads)
 *        test_ddp_order --backend B   (one process rank; plexus-run starts them) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/strategy.h"
#include "ranks.h"

static int failures;

enum { NGRAD = 9, STEPS = 6 };
/* Unequal sizes; with a 1 KiB cap they make buckets of different lengths. */
static const size_t counts[NGRAD] = {5, 300, 17, 1000, 2, 64, 129, 7, 250};

static float grad_val(int g, size_t i, int rank, int step)
{
    return (float)((g * 31 + (int)i + rank * 7 + step * 3) % 50);
}

/* xorshift: a different order on every rank and step, reproducible. */
static unsigned next_rand(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static int run_rank(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    struct plx_ddp_options o;
    plx_ddp_options_init(&o);
    o.bucket_cap_bytes = 1024;
    o.average = 0;
    struct plx_ddp *d = NULL;
    CHECK(plx_ddp_create(c, &o, &d) == 0);
    if (!d)
        return 1;
    float *g[NGRAD];
    int idx[NGRAD];
    for (int k = 0; k < NGRAD; k++) {
        g[k] = malloc(counts[k] * sizeof(float));
        CHECK(plx_ddp_register(d, g[k], counts[k], PLX_F32, &idx[k]) == 0);
    }
    unsigned seed = 0x9e3779b9u * (unsigned)(me + 1);
    for (int step = 0; step < STEPS; step++) {
        for (int k = 0; k < NGRAD; k++)
            for (size_t i = 0; i < counts[k]; i++)
                g[k][i] = grad_val(k, i, me, step);
        int order[NGRAD];
        for (int k = 0; k < NGRAD; k++)
            order[k] = k;
        for (int k = NGRAD - 1; k > 0; k--) {
            int j = (int)(next_rand(&seed) % (unsigned)(k + 1)), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        CHECK(plx_ddp_begin(d, PLX_DDP_OVERLAP) == 0);
        for (int k = 0; k < NGRAD; k++)
            CHECK(plx_ddp_ready(d, idx[order[k]]) == 0);
        CHECK(plx_ddp_finish(d) == 0);
        int wrong = 0;
        for (int k = 0; k < NGRAD; k++)
            for (size_t i = 0; i < counts[k]; i++) {
                float want = 0;
                for (int r = 0; r < P; r++)
                    want += grad_val(k, i, r, step);
                wrong += g[k][i] != want;
            }
        if (wrong)
            fprintf(stderr, "rank %d step %d: %d wrong gradient elements\n", me, step, wrong);
        CHECK(wrong == 0);
    }
    if (me == 0)
        printf("%d buckets, %d steps, random ready order per rank: sums exact\n", plx_ddp_bucket_count(d), STEPS);
    plx_ddp_destroy(d);
    for (int k = 0; k < NGRAD; k++)
        free(g[k]);
    return failures != 0;
}

static int thread_rank(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    return rc ? 1 : run_rank(ctx->comm);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--threads"))
        return run_ranks(atoi(argv[2]), "sim", NULL, 30000, thread_rank, NULL) || failures;
    if (argc == 3 && !strcmp(argv[1], "--backend")) {
        struct plx_comm_options o;
        plx_comm_options_init(&o);
        o.backend = argv[2];
        o.timeout_ms = 30000;
        struct plx_comm *c;
        if (plx_comm_init(&o, &c)) {
            fprintf(stderr, "init: %s\n", plx_last_error());
            return 1;
        }
        int rc = run_rank(c);
        plx_comm_destroy(c);
        return rc;
    }
    fprintf(stderr, "usage: test_ddp_order --threads P | --backend NAME\n");
    return 2;
}
