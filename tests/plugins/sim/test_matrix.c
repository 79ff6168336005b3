/* Every collective x dtype x op on the sim backend, natively and through
 * the core's generic algorithms, blocking and nonblocking, in place and out
 * of place, at counts 0, 1, P-1, a non-multiple of P and >= 1 Mi elements,
 * each element compared with a serial reference (tests/common/matrix.c).
 * usage: test_matrix P native(0|1) nonblocking(0|1) */
#include <stdio.h>
#include <stdlib.h>

#include "matrix.h"
#include "ranks.h"

static int P, native, nonblocking;

static const size_t big = (size_t)1 << 20;

/* The big count on a few combinations only, to keep the run short. */
static int skip(int coll, int dt, int op, size_t n, void *arg)
{
    (void)coll, (void)arg;
    return n == big && !((dt == PLX_F32 || dt == PLX_I32) && (op == PLX_SUM || op == PLX_MAX));
}

static int rank_fn(struct rank_ctx *ctx, int init_status)
{
    if (init_status) {
        fprintf(stderr, "rank %d: init: %s\n", ctx->rank, plx_last_error());
        return 1;
    }
    size_t counts[] = {0, 1, (size_t)P - 1, 7 * (size_t)P + 3, big};
    int cases = 0;
    long bad = matrix_run(ctx->comm, nonblocking, counts, sizeof counts / sizeof counts[0], skip, NULL, &cases);
    if (bad < 0)
        return 1;
    if (ctx->rank == 0)
        printf("P=%d native=%d nonblocking=%d: %d cases per rank, %ld wrong elements on rank 0\n", P, native,
               nonblocking, cases, bad);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test_matrix P native nonblocking\n");
        return 2;
    }
    P = atoi(argv[1]);
    native = atoi(argv[2]);
    nonblocking = atoi(argv[3]);
    char algo[64] = "core.allreduce_algo=auto";
    if (argc > 4)
        snprintf(algo, sizeof algo, "core.allreduce_algo=%s", argv[4]);
    const char *generic[] = {"sim.native_collectives=false", algo, NULL};
    return run_ranks(P, "sim", native ? NULL : generic, 60000, rank_fn, NULL);
}
