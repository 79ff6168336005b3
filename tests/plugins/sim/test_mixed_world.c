/* A world whose ranks are coroutines of one plexus_sim_run_ranks runs
 * without a lock, so a rank joining it from another thread is refused
 * (PLX_ERR_INVALID_USAGE, saying why) instead of racing the scheduler's
 * thread. Rank 0 is a coroutine; rank 1 comes from a thread of its own
 * while rank 0 waits for that thread. On the old code rank 1 joined. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "sim_fibers.h"

static int failures;
static char url[64];

static int join(int rank, struct plx_comm **c)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = url;
    o.rank = rank;
    o.size = 2;
    o.timeout_ms = 5000;
    return plx_comm_init(&o, c);
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
    struct sim_fibers f;
    if (sim_fibers_load(&f) != 0) {
        printf("SKIP: no sim plugin with coroutine ranks in this build\n");
        return 77;
    }
    snprintf(url, sizeof url, "mem://mixed-%d", (int)getpid());
    int rc = f.run_ranks(1, (size_t)1 << 20, rank_body, NULL);
    printf("plexus_sim_run_ranks: %s\n", plx_err_name(rc));
    return failures ? 1 : 0;
}
