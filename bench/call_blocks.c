/* call_blocks - what plexus adds to a small allreduce, measured within one
 * job: blocks of back-to-back allreduces through plexus's plain call
 * (plx_allreduce), a prepared one (plx_prepared_run) and, built with
 * WITH_MPI, MPI's own MPI_Allreduce, in a rotating order in every round.
 * Runs of separate jobs differ by more than these costs on a small VM
 * (where the ranks land, which phase they lock into), so the figure that
 * counts is each round's ratio to the first method's block of that round.
 *
 * With MPI (mpi_overhead_blocks_*): plexus starts MPI (the plugin then runs
 * on MPI_COMM_WORLD itself, as a program of plexus alone would), and this
 * program calls the same library's MPI_Allreduce on MPI_COMM_WORLD too;
 * plx_finalize ends MPI. Without (call_blocks): any backend, under
 * plexus-run.
 *
 * usage: call_blocks BACKEND BYTES [ITERS_PER_BLOCK [ROUNDS]]
 * prints one line per method: median us per operation (slowest rank's
 * block), the quartiles, and the median of the rounds' ratios to the first
 * method (MPI's where there is one, else the plain call). */
#ifdef WITH_MPI
#ifdef MPI_LOOP_ABI
#include <mpi_abi.h>
#else
#include <mpi.h>
#endif
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

#ifdef WITH_MPI
enum { METHODS = 3 };
static const char *const names[METHODS] = {"MPI_Allreduce", "plx_allreduce", "plx_prepared_run"};
#define FIRST 0
#else
enum { METHODS = 2 };
static const char *const names[METHODS] = {"plx_allreduce", "plx_prepared_run"};
#define FIRST 1 /* method numbers as with MPI: 1 plain, 2 prepared */
#endif

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[(int)(q * (n - 1) + 0.5)];
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "call_blocks: %s: %s: %s\n", what, plx_err_name(rc), plx_last_error());
    exit(1);
}

/* One block of iters calls of method m (0 MPI, 1 plain, 2 prepared); us
 * per call on this rank. */
static double block(int m, struct plx_comm *c, struct plx_prepared *p, float *s, float *r, int n, int iters)
{
    int rc = plx_barrier(c);
    double t0 = now_us();
    for (int i = 0; i < iters && !rc; i++) {
#ifdef WITH_MPI
        if (m == 0) {
            rc = MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            continue;
        }
#endif
        rc = m == 1 ? plx_allreduce(c, s, r, (size_t)n, PLX_F32, PLX_SUM) : plx_prepared_run(p);
    }
    if (rc)
        die(names[m - FIRST], rc);
    return (now_us() - t0) / iters;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: call_blocks BACKEND BYTES [ITERS_PER_BLOCK [ROUNDS]]\n");
        return 2;
    }
    size_t bytes = (size_t)atol(argv[2]);
    int iters = argc > 3 ? atoi(argv[3]) : 2000, rounds = argc > 4 ? atoi(argv[4]) : 30, n = (int)(bytes / 4);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1];
    struct plx_comm *c;
    int rc = plx_comm_init(&o, &c);
    if (rc)
        die("plx_comm_init", rc);
    float *s = calloc(bytes / 4 + 1, 4), *r = calloc(bytes / 4 + 1, 4);
    double *t = calloc((size_t)rounds * METHODS, sizeof *t), *worst = calloc((size_t)rounds * METHODS, sizeof *t);
    struct plx_prepared *p = NULL;
    if (!s || !r || !t || !worst || iters < 1 || rounds < 1)
        die("out of memory (or ITERS/ROUNDS < 1)", PLX_ERR_NOMEM);
    if ((rc = plx_coll_prepare(c, PLX_COLL_ALLREDUCE, s, r, (size_t)n, PLX_F32, PLX_SUM, 0, NULL, &p)) != 0)
        die("plx_coll_prepare", rc);
    for (int m = 0; m < METHODS; m++) /* warm-up */
        block(m + FIRST, c, p, s, r, n, iters / 10 + 1);
    for (int k = 0; k < rounds; k++)
        for (int j = 0; j < METHODS; j++) {
            int m = (j + k) % METHODS; /* each method first in as many rounds */
            t[k * METHODS + m] = block(m + FIRST, c, p, s, r, n, iters);
        }
    if ((rc = plx_allreduce(c, t, worst, (size_t)rounds * METHODS, PLX_F64, PLX_MAX)) != 0)
        die("gathering the times", rc);
    int me = plx_comm_rank(c);
    double *v = calloc((size_t)rounds, sizeof *v), *ratio = calloc((size_t)rounds, sizeof *ratio);
    for (int m = 0; me == 0 && v && ratio && m < METHODS; m++) {
        for (int k = 0; k < rounds; k++) {
            v[k] = worst[k * METHODS + m];
            ratio[k] = worst[k * METHODS + m] / worst[k * METHODS];
        }
        double med = quantile(v, rounds, 0.5), lo = quantile(v, rounds, 0.25), hi = quantile(v, rounds, 0.75);
        printf("%zu %-17s %9.3f us [%.3f-%.3f]  ratio to %s %.3f [%.3f-%.3f]\n", bytes, names[m], med, lo, hi, names[0],
               quantile(ratio, rounds, 0.5), quantile(ratio, rounds, 0.25), quantile(ratio, rounds, 0.75));
    }
    plx_prepared_free(p);
    plx_comm_destroy(c);
    plx_finalize();
    free(s);
    free(r);
    free(t);
    free(worst);
    free(v);
    free(ratio);
    return 0;
}
