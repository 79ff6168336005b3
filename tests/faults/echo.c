/* echo.c - a failure that echoes a loss in a related communicator names
 * the rank that died.
 *
 * Three tcp processes split the world into A = {0, 1} and B = {2}. Rank 2
 * is SIGKILLed. Rank 1 notices (a receive from rank 2 on the world fails)
 * and leaves A without taking part in A's next allreduce. Rank 0's allreduce on A then fails
 * because rank 1 left: A itself never saw rank 2. Its error must still say
 * what the world saw (rank 2 lost), within 2 s; new work on A must be
 * refused with that message; and the world must fail naming rank 2. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 5000

struct shared {
    int port;
    volatile int rank0_done;
    int failures;
    char log[3][2048];
};

#define FAIL(...) procs_report(log, sizeof sh->log[0], &sh->failures, __VA_ARGS__)

/* The part of msg after "[meanwhile on 'world': " names rank 2. */
static int world_names_rank2(const char *msg)
{
    const char *m = strstr(msg, "[meanwhile on 'world': ");
    return m && (strstr(m, "rank 2 ") || strstr(m, "rank 2;") || strstr(m, "rank 2]"));
}

static void rank0(struct shared *sh, struct plx_comm *world, struct plx_comm *a, char *log)
{
    int v = 1, s = 0;
    double t0 = now_s();
    int rc = plx_allreduce(a, &v, &s, 1, PLX_I32, PLX_SUM);
    double ms = (now_s() - t0) * 1e3;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", plx_last_error());
    procs_report(log, sizeof sh->log[0], NULL, "rank 0: allreduce on A: %s after %.0f ms: %s\n", plx_err_name(rc),
                 ms, msg);
    if (rc != PLX_ERR_PEER_LOST || ms > 2000)
        FAIL("rank 0: expected PLX_ERR_PEER_LOST within 2000 ms (rank 1 left A)\n");
    if (!world_names_rank2(msg))
        FAIL("rank 0: the error does not add what the world saw: rank 2 lost\n");
    rc = plx_allreduce(a, &v, &s, 1, PLX_I32, PLX_SUM);
    if (rc == 0 || !strstr(plx_last_error(), "unusable after an earlier error") || !world_names_rank2(plx_last_error()))
        FAIL("rank 0: new work on A: %s: %s (expected a refusal repeating the first error)\n", plx_err_name(rc),
             plx_last_error());
    rc = plx_barrier(world);
    if (rc != PLX_ERR_PEER_LOST || !strstr(plx_last_error(), "rank 2"))
        FAIL("rank 0: barrier on the world: %s: %s (expected PLX_ERR_PEER_LOST naming rank 2)\n", plx_err_name(rc),
             plx_last_error());
}

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank], url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", sh->port);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    o.init = url;
    o.rank = o.local_rank = rank;
    o.size = o.local_size = 3;
    o.timeout_ms = TIMEOUT_MS;
    struct plx_comm *world = NULL, *a = NULL;
    int v = 1, s = 0;
    if (plx_comm_init(&o, &world) || plx_comm_split(world, rank < 2 ? 0 : 1, rank, &a) ||
        plx_allreduce(a, &v, &s, 1, PLX_I32, PLX_SUM) || plx_barrier(world)) {
        FAIL("rank %d: setting up: %s\n", rank, plx_last_error());
        return 1;
    }
    if (rank == 2)
        kill(getpid(), SIGKILL);
    if (rank == 1) {
        char b;
        int rc = plx_recv(world, &b, 1, PLX_U8, 2, 5); /* rank 2 never sends: it dies */
        if (rc != PLX_ERR_PEER_LOST)
            FAIL("rank 1: a receive from rank 2, which died: %s: %s (expected PLX_ERR_PEER_LOST)\n",
                 plx_err_name(rc), plx_last_error());
        plx_comm_destroy(a); /* leaves A while rank 0 waits in it */
        a = NULL;
        double until = now_s() + 30;
        while (!__atomic_load_n(&sh->rank0_done, __ATOMIC_ACQUIRE) && now_s() < until)
            usleep(10000);
    } else {
        rank0(sh, world, a, log);
        __atomic_store_n(&sh->rank0_done, 1, __ATOMIC_RELEASE);
    }
    plx_comm_destroy(a);
    plx_comm_destroy(world);
    return 0;
}

int main(void)
{
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh || (sh->port = free_port()) < 0)
        return 1;
    struct procs p;
    if (procs_start(&p, 3, rank_main, sh) != 0)
        return 1;
    procs_wait(&p, now_s() + 60);
    int bad = sh->failures;
    for (int r = 0; r < 2; r++)
        if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
            printf("rank %d: %s\n", r, procs_describe(&p, r));
            bad++;
        }
    if (!WIFSIGNALED(p.status[2]) || WTERMSIG(p.status[2]) != SIGKILL) {
        printf("rank 2 did not die by SIGKILL: %s\n", procs_describe(&p, 2));
        bad++;
    }
    printf("%s%s%s", sh->log[0], sh->log[1], sh->log[2]);
    printf("%s\n", bad ? "FAILED" : "ok: the echo of a loss names the rank that died");
    return bad != 0;
}
