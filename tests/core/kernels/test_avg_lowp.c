/* AVG of f16 and bf16 where the sum overflows but the mean does not: f16
 * values near 65504 and bf16 values near its (and f32's) maximum on every
 * rank, plus small values that must keep their low bits. Every reducing
 * collective (allreduce, reduce to the first and last rank, reduce_scatter),
 * blocking and nonblocking, in place and not, must give the mean rounded to
 * nearest: never inf.
 *
 * usage: test_avg_lowp --threads P [--generic]   (sim ranks as threads;
 *                      --generic: the core's algorithms over sim's p2p)
 *        test_avg_lowp --backend B               (one process rank) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"

static int failures;

/* Conversions written here, not taken from the core, so the check is independent. */
static double from16(uint16_t h, int dtype)
{
    if (dtype == PLX_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

/* The gap between the 16-bit neighbours around v (v finite, positive). */
static double ulp16(double v, int dtype)
{
    int e;
    frexp(v, &e); /* v = f * 2^e, f in [0.5, 1) */
    int mant = dtype == PLX_BF16 ? 8 : 11;
    if (dtype == PLX_F16 && e - 1 < -14)
        return ldexp(1, -24);
    return ldexp(1, e - mant);
}

/* Element i on rank r: large values (the sum overflows), small ones (must
 * not be lost to the pre-division), as 16-bit bit patterns. */
static uint16_t value(int dtype, int r, size_t i)
{
    unsigned k = (unsigned)(r * 3 + (int)i) % 20;
    if (i % 4 == 3) /* (r + 1) * 2^-20: an f16 subnormal, a bf16 normal */
        return dtype == PLX_F16 ? (uint16_t)(16 * (r + 1)) : 0;
    if (dtype == PLX_F16)
        return (uint16_t)(0x7bff - k); /* 65504 and the 19 values below it */
    return (uint16_t)(0x7f7f - k);     /* bf16's largest finite values */
}

static uint16_t small_bf16(int r)
{
    float f = ldexpf((float)(r + 1), -20);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static double mean(int dtype, int P, size_t i)
{
    double s = 0;
    for (int r = 0; r < P; r++)
        s += from16(dtype == PLX_BF16 && i % 4 == 3 ? small_bf16(r) : value(dtype, r, i), dtype);
    return s / P;
}

static uint16_t input(int dtype, int r, size_t i)
{
    return dtype == PLX_BF16 && i % 4 == 3 ? small_bf16(r) : value(dtype, r, i);
}

/* got[i] for i in [0, n) holds the mean of elements first + i. */
static int check(const char *what, int dtype, int P, const uint16_t *got, size_t first, size_t n)
{
    int wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double want = mean(dtype, P, first + i), v = from16(got[i], dtype);
        if (!isfinite(v) || fabs(v - want) > ulp16(want, dtype) / 2) {
            if (wrong++ < 3)
                fprintf(stderr, "%s %s P=%d element %zu: got %g, want %g\n", what, plx_dtype_name(dtype), P,
                        first + i, v, want);
        }
    }
    return wrong;
}

static int run_rank(struct plx_comm *c)
{
    int me = plx_comm_rank(c), P = plx_comm_size(c);
    const size_t n = 1031; /* odd, not a multiple of P */
    uint16_t *send = malloc(n * P * 2), *recv = malloc(n * P * 2);
    static const int dtypes[] = {PLX_F16, PLX_BF16};
    for (int d = 0; d < 2; d++) {
        int dt = dtypes[d];
        for (int nb = 0; nb < 2; nb++)
            for (int inplace = 0; inplace < 2; inplace++) {
                char what[64];
                /* allreduce */
                for (size_t i = 0; i < n; i++)
                    send[i] = input(dt, me, i);
                void *out = inplace ? send : recv;
                struct plx_work *w = NULL;
                int rc = nb ? plx_iallreduce(c, send, out, n, dt, PLX_AVG, NULL, &w)
                            : plx_allreduce(c, send, out, n, dt, PLX_AVG);
                if (nb && rc == 0) {
                    rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
                    plx_work_free(w);
                }
                snprintf(what, sizeof what, "%sallreduce%s", nb ? "i" : "", inplace ? " in place" : "");
                CHECK(rc == 0);
                CHECK(check(what, dt, P, out, 0, n) == 0);
                /* reduce to the first and the last rank */
                for (int root = 0; root < P; root += P > 1 ? P - 1 : 1) {
                    for (size_t i = 0; i < n; i++)
                        send[i] = input(dt, me, i);
                    rc = nb ? plx_ireduce(c, send, out, n, dt, PLX_AVG, root, NULL, &w)
                            : plx_reduce(c, send, out, n, dt, PLX_AVG, root);
                    if (nb && rc == 0) {
                        rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
                        plx_work_free(w);
                    }
                    snprintf(what, sizeof what, "%sreduce root %d%s", nb ? "i" : "", root, inplace ? " in place" : "");
                    CHECK(rc == 0);
                    if (me == root)
                        CHECK(check(what, dt, P, out, 0, n) == 0);
                }
                /* reduce_scatter: block r of the P blocks; in place the block stays where it is */
                for (size_t i = 0; i < n * P; i++)
                    send[i] = input(dt, me, i);
                uint16_t *rs = inplace ? send + n * (size_t)me : recv;
                rc = nb ? plx_ireduce_scatter(c, send, rs, n, dt, PLX_AVG, NULL, &w)
                        : plx_reduce_scatter(c, send, rs, n, dt, PLX_AVG);
                if (nb && rc == 0) {
                    rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
                    plx_work_free(w);
                }
                snprintf(what, sizeof what, "%sreduce_scatter%s", nb ? "i" : "", inplace ? " in place" : "");
                CHECK(rc == 0);
                CHECK(check(what, dt, P, rs, n * (size_t)me, n) == 0);
            }
    }
    /* Two in flight at once: each has its own f32 copy (the communicator
     * keeps one between calls), and both round into their own buffers. */
    for (size_t i = 0; i < n; i++) {
        send[i] = input(PLX_F16, me, i);
        recv[i] = input(PLX_F16, me, n - 1 - i);
    }
    struct plx_work *w1 = NULL, *w2 = NULL;
    CHECK(plx_iallreduce(c, send, send, n, PLX_F16, PLX_AVG, NULL, &w1) == 0);
    CHECK(plx_iallreduce(c, recv, recv, n - 5, PLX_F16, PLX_AVG, NULL, &w2) == 0);
    CHECK(plx_work_wait(w2, PLX_TIMEOUT_DEFAULT) == 0);
    CHECK(plx_work_wait(w1, PLX_TIMEOUT_DEFAULT) == 0);
    plx_work_free(w1);
    plx_work_free(w2);
    CHECK(check("iallreduce, first of two in flight", PLX_F16, P, send, 0, n) == 0);
    int wrong = 0;
    for (size_t i = 0; i < n - 5; i++) {
        double want = mean(PLX_F16, P, n - 1 - i);
        wrong += fabs(from16(recv[i], PLX_F16) - want) > ulp16(want, PLX_F16) / 2;
    }
    CHECKF(wrong == 0, "iallreduce, second of two in flight: %d wrong", wrong);
    free(send);
    free(recv);
    if (me == 0 && !failures)
        printf("f16/bf16 AVG on %d ranks: the mean everywhere, no overflow\n", P);
    return failures != 0;
}

static int thread_rank(struct rank_ctx *ctx, int rc)
{
    CHECK(rc == 0);
    return rc ? 1 : run_rank(ctx->comm);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--threads")) {
        static const char *const generic[] = {"sim.native_collectives=false", NULL};
        int g = argc > 3 && !strcmp(argv[3], "--generic");
        return run_ranks(atoi(argv[2]), "sim", g ? generic : NULL, 30000, thread_rank, NULL) || failures;
    }
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
        plx_finalize(); /* MPI backends end MPI here */
        return rc;
    }
    fprintf(stderr, "usage: test_avg_lowp --threads P [--generic] | --backend NAME\n");
    return 2;
}
