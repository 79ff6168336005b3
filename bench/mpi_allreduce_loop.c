/* mpi_allreduce_loop - the same measurement as plexus-bench (warm-up,
 * barrier, N back-to-back blocking allreduces, slowest rank's average),
 * calling MPI_Allreduce directly: the baseline for the MPI plugin's overhead.
 * usage: mpi_allreduce_loop BYTES [ITERS]; MPI_LOOP_EACH=1: one at a time (below)
 * Built with MPI_LOOP_ABI, it calls the MPI-5 standard ABI (libmpi_abi.so.1),
 * as plexus-mpi-abi does: the same library under both. */
#ifdef MPI_LOOP_ABI
#include <mpi_abi.h>
#else
#include <mpi.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* MPI_LOOP_EACH set: a training step's pattern, as bench/torch_step_allreduce.py
 * times it: a barrier, then one allreduce timed; per operation the slowest
 * rank's time; the median over the operations. */
static double one_at_a_time(float *s, float *r, int n, int iters)
{
    double *t = malloc(sizeof *t * (size_t)iters), *worst = malloc(sizeof *worst * (size_t)iters);
    if (!t || !worst || iters < 1) {
        fprintf(stderr, "mpi_allreduce_loop: no memory for %d times (or ITERS < 1)\n", iters);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    MPI_Allreduce(t, worst, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(worst, (size_t)iters, sizeof *worst, by_value);
    double med = iters % 2 ? worst[iters / 2] : (worst[iters / 2 - 1] + worst[iters / 2]) / 2;
    free(t);
    free(worst);
    return med;
}

int main(int argc, char **argv)
{
    /* MPI_LOOP_THREADS=multiple: the thread level plexus's MPI plugin asks
     * for (its executor and RPC threads may call MPI), whose locks cost an
     * 8-byte call about as much as plexus's own layer does. */
    const char *threads = getenv("MPI_LOOP_THREADS");
    int provided = MPI_THREAD_SINGLE, multiple = threads && !strcmp(threads, "multiple");
    if (multiple)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (multiple && provided < MPI_THREAD_MULTIPLE && me == 0)
        fprintf(stderr, "mpi_allreduce_loop: asked for MPI_THREAD_MULTIPLE, this MPI gives level %d\n", provided);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    size_t bytes = argc > 1 ? (size_t)atol(argv[1]) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 20, n = (int)(bytes / 4);
    float *s = malloc(bytes + 4), *r = malloc(bytes + 4);
    memset(s, 0, bytes);
    for (int i = 0; i < 5; i++)
        MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double worst;
    if (getenv("MPI_LOOP_EACH")) {
        worst = one_at_a_time(s, r, n, iters);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters * 1e6;
        MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    if (me == 0)
        printf("%zu %.2f\n", bytes, worst);
    MPI_Finalize();
    return 0;
}
