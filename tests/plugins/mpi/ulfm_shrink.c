/* ulfm_shrink.c - a rank of an MPI job dies (SIGKILL) and the survivors go
 * on, through ULFM: their next collective fails (the dead rank's peers
 * with PLX_ERR_PEER_LOST, the rest once revoked) instead of hanging,
 * plx_comm_revoke reaches everyone, and plx_comm_shrink (MPIX_Comm_shrink,
 * without the job's store) gives them a communicator of the survivors, in
 * the old order, on which collectives give the right sums. Run by
 * check_ulfm_shrink.sh under `mpirun --with-ft ulfm`. argv: BACKEND. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plexus/plexus.h"

static int failures;

#define FAIL(...) (printf("FAIL: " __VA_ARGS__), failures++)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: ulfm_shrink BACKEND\n");
        return 2;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1];
    o.timeout_ms = 60000; /* a hang shows as a timeout, well inside the test's */
    struct plx_comm *c = NULL, *n = NULL;
    int rc = plx_comm_init(&o, &c);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), size = plx_comm_size(c), victim = size - 1;
    float x = 1, y = 0;
    if ((rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM)) != 0 || y != (float)size) {
        printf("FAIL: rank %d: allreduce before the failure: %s (%g)\n", me, plx_err_name(rc), y);
        return 1;
    }
    if (me == victim)
        raise(SIGKILL);

    double t0 = now();
    rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM);
    printf("rank %d: allreduce with rank %d dead: %s after %.2f s: %s\n", me, victim, plx_err_name(rc), now() - t0,
           rc ? plx_last_error() : "");
    if (rc != PLX_ERR_PEER_LOST && rc != PLX_ERR_REVOKED)
        FAIL("rank %d: an allreduce with a dead rank gave %s, expected PLX_ERR_PEER_LOST or PLX_ERR_REVOKED\n", me,
             plx_err_name(rc));
    rc = plx_comm_revoke(c);
    if (rc != 0 && rc != PLX_ERR_REVOKED)
        FAIL("rank %d: revoke: %s: %s\n", me, plx_err_name(rc), plx_last_error());

    t0 = now();
    rc = plx_comm_shrink(c, &n);
    printf("rank %d: plx_comm_shrink: %s in %.2f s: %s\n", me, plx_err_name(rc), now() - t0,
           rc ? plx_last_error() : "");
    if (rc != 0 || !n) {
        FAIL("rank %d: shrink failed\n", me);
    } else {
        if (plx_comm_rank(n) != me || plx_comm_size(n) != size - 1)
            FAIL("rank %d: shrunk to rank %d of %d, expected %d of %d\n", me, plx_comm_rank(n), plx_comm_size(n), me,
                 size - 1);
        float v = (float)(me + 1), sum = 0;
        float want = (float)((size - 1) * size / 2); /* 1 + ... + (size - 1) */
        if ((rc = plx_allreduce(n, &v, &sum, 1, PLX_F32, PLX_SUM)) != 0 || sum != want)
            FAIL("rank %d: allreduce on the survivors: %s (%g, expected %g)\n", me, plx_err_name(rc), sum, want);
        int mine = me, all[64] = {0};
        if (size - 1 <= 64 && ((rc = plx_allgather(n, &mine, all, 1, PLX_I32)) != 0))
            FAIL("rank %d: allgather on the survivors: %s\n", me, plx_err_name(rc));
        for (int i = 0; rc == 0 && i < size - 1 && i < 64; i++)
            if (all[i] != i)
                FAIL("rank %d: the survivors' allgather has %d at %d\n", me, all[i], i);
        plx_comm_destroy(n);
    }
    plx_comm_destroy(c);
    plx_finalize();
    printf("rank %d: %s\n", me, failures ? "FAIL" : "survived");
    return failures ? 1 : 0;
}
