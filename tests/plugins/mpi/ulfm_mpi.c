/* ulfm_mpi.c - plx_comm_revoke and plx_comm_shrink on the MPI plugin under
 * its own launcher. Where the loaded MPI runs ULFM in this job, revoke maps
 * to MPIX_Comm_revoke and the next collective fails with PLX_ERR_REVOKED on
 * every rank, and shrink (MPIX_Comm_shrink) gives a working communicator
 * of every rank. Where it does not (a library without the calls, MPICH's
 * ch4 device, whose calls abort the process, or Open MPI 5 started without
 * --with-ft ulfm, where a revoke would reach no peer), both are refused
 * with PLX_ERR_UNSUPPORTED saying why (the message names ULFM and the
 * plugin), no process aborts, and the communicator goes on working.
 * argv: BACKEND. */
#include <stdio.h>
#include <string.h>

#include "plexus/plexus.h"

static int failures;

#define FAIL(...) (printf("FAIL: " __VA_ARGS__), failures++)

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: ulfm_mpi BACKEND\n");
        return 2;
    }
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = argv[1]; /* rank, size, init: from the launcher's environment */
    o.timeout_ms = 60000;
    struct plx_comm *c = NULL, *n = NULL;
    int rc = plx_comm_init(&o, &c);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 1;
    }
    int me = plx_comm_rank(c), size = plx_comm_size(c);
    const char *be = plx_comm_backend(c);
    float x = 1, y = 0;
    if ((rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM)) != 0 || y != (float)size)
        FAIL("rank %d: allreduce before the revoke: %s\n", me, plx_err_name(rc));

    rc = plx_comm_revoke(c);
    char why[1024];
    snprintf(why, sizeof why, "%s", plx_last_error());
    printf("rank %d: plx_comm_revoke: %s: %s\n", me, plx_err_name(rc), rc ? why : "");
    int revoked = rc == 0;
    if (!revoked && (rc != PLX_ERR_UNSUPPORTED || !strstr(why, "ULFM") || !strstr(why, be)))
        FAIL("rank %d: revoke gave %s, expected 0 or PLX_ERR_UNSUPPORTED naming ULFM and %s\n", me, plx_err_name(rc),
             be);
    rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM);
    if (revoked && rc != PLX_ERR_REVOKED)
        FAIL("rank %d: allreduce after MPIX_Comm_revoke: %s, expected PLX_ERR_REVOKED\n", me, plx_err_name(rc));
    if (!revoked && (rc != 0 || y != (float)size))
        FAIL("rank %d: allreduce after the refused revoke: %s (%g), expected %d\n", me, plx_err_name(rc), y, size);

    rc = plx_comm_shrink(c, &n);
    snprintf(why, sizeof why, "%s", plx_last_error());
    printf("rank %d: plx_comm_shrink: %s: %s\n", me, plx_err_name(rc), rc ? why : "");
    if (revoked) { /* nobody failed: every rank, in the old order */
        if (rc != 0 || !n || plx_comm_rank(n) != me || plx_comm_size(n) != size)
            FAIL("rank %d: shrink with ULFM gave %s (rank %d of %d), expected rank %d of %d\n", me, plx_err_name(rc),
                 n ? plx_comm_rank(n) : -1, n ? plx_comm_size(n) : -1, me, size);
        else if ((rc = plx_allreduce(n, &x, &y, 1, PLX_F32, PLX_SUM)) != 0 || y != (float)size)
            FAIL("rank %d: allreduce on the shrunk communicator: %s (%g)\n", me, plx_err_name(rc), y);
        if (n)
            plx_comm_destroy(n);
        n = NULL;
    } else if (rc != PLX_ERR_UNSUPPORTED || n || !strstr(why, be) || !strstr(why, "ULFM")) {
        FAIL("rank %d: shrink gave %s, expected PLX_ERR_UNSUPPORTED naming %s and what ULFM it has\n", me,
             plx_err_name(rc), be);
    }
    if (!revoked && ((rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM)) != 0 || y != (float)size))
        FAIL("rank %d: allreduce after the refused shrink: %s\n", me, plx_err_name(rc));
    plx_comm_destroy(c);
    plx_finalize();
    printf("rank %d: %s\n", me, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
