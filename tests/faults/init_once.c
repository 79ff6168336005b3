/* init_once.c - one rank as a launcher starts it: plx_comm_init from the
 * environment alone (no options), a barrier, destroy. Prints "backend NAME"
 * on success, else the error on stderr, and the milliseconds init took, for
 * the scripts that check how a launch fails (door.sh, fallback_netns.sh,
 * blackhole.sh). Exit 0 on success, 1 on failure. */
#include <stdio.h>
#include <time.h>

#include "plexus/plexus.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int main(void)
{
    double t0 = now_ms();
    struct plx_comm *c = NULL;
    int rc = plx_comm_init(NULL, &c);
    double ms = now_ms() - t0;
    if (rc != 0) {
        fprintf(stderr, "init failed after %.0f ms: %s: %s\n", ms, plx_err_name(rc), plx_last_error());
        return 1;
    }
    printf("backend %s, rank %d of %d, init %.0f ms\n", plx_comm_backend(c), plx_comm_rank(c), plx_comm_size(c), ms);
    fflush(stdout);
    rc = plx_barrier(c);
    if (rc != 0)
        fprintf(stderr, "barrier failed: %s: %s\n", plx_err_name(rc), plx_last_error());
    plx_comm_destroy(c);
    return rc != 0;
}
