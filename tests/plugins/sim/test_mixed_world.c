/* A world whose ranks are coroutines of one plexus_sim_run_ranks runs
 * without a lock, so a rank joining it from another thread is refused
 * (PLX_ERR_INVALID_USAGE, saying why) instead of racing the scheduler's
 * thread. Rank 0 is a coroutine; rank 1 comes from a thread of its own
 * while rank 0 waits for that thread. On the old code rank 1 joined. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "ranks.h"
#include "sim_fibers.h"

static int failures;
static char url[64];

static int join(int rank, struct plx_comm **c)
{
    return join_rank("sim", url, rank, 2, 5000, NULL, c);
}

static void *thread_rank(void *arg)
{
    (void)arg;
    struct plx_comm *c = NULL;
    int rc = join(1, &c);
    const char *msg = rc ? plx_last_error() : "";
    int ok = rc == PLX_ERR_INVALID_USAGE && strstr(msg, "coroutines of one");
    printf("%s rank 1 (a thread) joins a coroutine world: %s: %s\n", ok ? "ok  " : "FAIL", plx_err_name(rc), msg);
    failures += !ok;
    if (c)
        plx_comm_destroy(c);
    return NULL;
}

static void rank_body(int rank, void *arg)
{
    (void)arg;
    struct plx_comm *c = NULL;
    if (join(rank, &c) != 0) {
        printf("FAIL rank %d: plx_comm_init: %s\n", rank, plx_last_error());
        failures++;
        return;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, thread_rank, NULL) != 0) {
        printf("FAIL: pthread_create\n");
        failures++;
    } else {
        pthread_join(t, NULL);
    }
    plx_comm_destroy(c);
}

int main(void)
{
    int rc;
    if (sim_fibers_run_world("mixed", 1, rank_body, url, sizeof url, &rc))
        return 77;
    printf("plexus_sim_run_ranks: %s\n", plx_err_name(rc));
    return failures ? 1 : 0;
}
