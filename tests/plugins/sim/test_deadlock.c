/* Coroutine ranks that deadlock (each receives from the other, nobody
 * sends) get PLX_ERR_INVALID_USAGE naming the deadlock from plx_recv at
 * once, and plexus_sim_run_ranks returns it too: not PLX_ERR_TIMEOUT,
 * which the core takes for the end of a wait slice and asks again, until
 * the operation's deadline (TIMEOUT_MS here). Nothing is timed: on the old
 * code the receives return PLX_ERR_TIMEOUT after TIMEOUT_MS and fail the
 * status check. */
#include <stdio.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"
#include "sim_fibers.h"

#define TIMEOUT_MS 20000

static int failures;
static char url[64];

static void rank_body(int rank, void *arg)
{
    (void)arg;
    struct plx_comm *c = NULL;
    if (join_rank("sim", url, rank, 2, TIMEOUT_MS, NULL, &c) != 0) {
        printf("FAIL rank %d: plx_comm_init: %s\n", rank, plx_last_error());
        failures++;
        return;
    }
    int x[4];
    int rc = plx_recv(c, x, 4, PLX_I32, 1 - rank, 7);
    const char *msg = rc ? plx_last_error() : "";
    int ok = rc == PLX_ERR_INVALID_USAGE && strstr(msg, "deadlock");
    printf("%s rank %d: plx_recv from rank %d: %s: %s\n", ok ? "ok  " : "FAIL", rank, 1 - rank, plx_err_name(rc), msg);
    failures += !ok;
    plx_comm_destroy(c);
}

int main(void)
{
    int rc;
    if (sim_fibers_run_world("deadlock", 2, rank_body, url, sizeof url, &rc))
        return 77;
    int ok = rc == PLX_ERR_INVALID_USAGE;
    printf("%s plexus_sim_run_ranks: %s\n", ok ? "ok  " : "FAIL", plx_err_name(rc));
    failures += !ok;
    return failures ? 1 : 0;
}
