/* A p2p timeout's message says the operation's deadline passed, not a
 * limit it did not have. Two coroutine ranks run the core's ring
 * allreduce with a 300 ms timeout; the sim plugin delays rank 1 400 ms
 * before each message it posts. Rank 0's deadline passes while rank 1
 * sleeps, so rank 0's next wait finds it gone before it starts: its error
 * must name rank 1 and say the deadline passed. The old message read
 * "rank 0 waited 0 ms for rank 1 on sim: timeout", a limit of zero. */
#include <stdio.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"
#include "sim_fibers.h"

#define COUNT 4096 /* large enough for the ring's two steps, not one message */

static int failures;
static char url[64];

static void rank_body(int rank, void *arg)
{
    (void)arg;
    const char *ov[] = {"sim.native_collectives=false", "sim.delay_rank=1", "sim.delay_ms=400",
                        "core.allreduce_algo=ring", NULL};
    struct plx_comm *c = NULL;
    if (join_rank("sim", url, rank, 2, 300, ov, &c) != 0) {
        printf("FAIL rank %d: plx_comm_init: %s\n", rank, plx_last_error());
        failures++;
        return;
    }
    static float buf[2][COUNT];
    int rc = plx_allreduce(c, buf[rank], buf[rank], COUNT, PLX_F32, PLX_SUM);
    if (rank == 0) {
        const char *msg = rc ? plx_last_error() : "";
        int ok = rc == PLX_ERR_TIMEOUT && strstr(msg, "for rank 1") && strstr(msg, "deadline passed");
        printf("%s rank 0: %s: %s\n", ok ? "ok  " : "FAIL", plx_err_name(rc), msg);
        failures += !ok;
    }
    plx_comm_destroy(c);
}

int main(void)
{
    int rc;
    if (sim_fibers_run_world("deadline", 2, rank_body, url, sizeof url, &rc))
        return 77;
    printf("plexus_sim_run_ranks: %s\n", plx_err_name(rc));
    return failures ? 1 : 0;
}
