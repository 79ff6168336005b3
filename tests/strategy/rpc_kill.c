/* rpc_kill - an owner that dies fails its callers' pending calls with
 * PLX_ERR_PEER_LOST naming it, well within the calls' timeout.
 *
 * Three tcp processes. Rank 2 owns a value rank 0 holds an RRef to. Ranks 0
 * and 1 each call rank 2's "slow" handler (2 s; rank 0 synchronously, rank
 * 1 asynchronously); 300 ms later rank 2 SIGKILLs itself. Both calls must
 * fail with PLX_ERR_PEER_LOST, a message naming rank 2, and in less than
 * the calls' 8 s timeout; rank 0's to_here on its RRef then fails the same
 * way at once. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/rpc.h"
#include "procs.h"

#define TIMEOUT_MS 8000

struct shared {
    int port, failures;
    char log[3][2048];
};

static int h_slow(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)caller, (void)a, (void)len, (void)res, (void)rl, (void)err, (void)cap;
    usleep(2000000);
    return 0;
}

static int h_make(void *ctx, int caller, const void *a, size_t len, void **res, size_t *rl, char *err, size_t cap)
{
    (void)ctx, (void)caller, (void)a, (void)len, (void)err, (void)cap;
    *res = strdup("value");
    *rl = 5;
    return 0;
}

static void expect_lost(struct shared *sh, int rank, const char *what, int rc, double ms)
{
    char *log = sh->log[rank];
    procs_report(log, sizeof sh->log[rank], NULL, "rank %d: %s: %s after %.0f ms: %s\n", rank, what, plx_err_name(rc),
                 ms, plx_last_error());
    if (rc != PLX_ERR_PEER_LOST || !strstr(plx_last_error(), "rank 2") || ms >= TIMEOUT_MS)
        procs_report(log, sizeof sh->log[rank], &sh->failures,
                     "rank %d: %s: expected PLX_ERR_PEER_LOST naming rank 2 before the %d ms timeout\n", rank, what,
                     TIMEOUT_MS);
}

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", sh->port);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "tcp";
    o.init = url;
    o.rank = o.local_rank = rank;
    o.size = o.local_size = 3;
    o.timeout_ms = TIMEOUT_MS;
    struct plx_comm *c = NULL;
    struct plx_rpc *rpc = NULL;
    struct plx_rpc_options ro;
    plx_rpc_options_init(&ro);
    ro.timeout_ms = TIMEOUT_MS;
    struct plx_rref *r = NULL;
    if (plx_comm_init(&o, &c) || plx_rpc_create(c, &ro, &rpc) || plx_rpc_register(rpc, "slow", h_slow, NULL) ||
        plx_rpc_register(rpc, "make", h_make, NULL) || plx_barrier(c) ||
        (rank == 0 && plx_rpc_remote(rpc, 2, "make", NULL, 0, -1, &r)) || plx_barrier(c)) {
        procs_report(sh->log[rank], sizeof sh->log[rank], &sh->failures, "rank %d: setting up: %s\n", rank,
                     plx_last_error());
        return 1;
    }
    if (rank == 2) {
        usleep(300000); /* both calls are with us now */
        kill(getpid(), SIGKILL);
    }
    double t0 = now_s();
    if (rank == 0) {
        int rc = plx_rpc_sync(rpc, 2, "slow", NULL, 0, NULL, NULL, -1);
        expect_lost(sh, 0, "rpc_sync to rank 2", rc, (now_s() - t0) * 1e3);
        t0 = now_s();
        void *v = NULL;
        rc = plx_rref_to_here(rpc, r, &v, NULL, -1);
        expect_lost(sh, 0, "to_here of rank 2's value", rc, (now_s() - t0) * 1e3);
        free(v);
        plx_rref_release(rpc, r);
    } else {
        struct plx_rpc_future *f;
        int rc = plx_rpc_async(rpc, 2, "slow", NULL, 0, -1, &f);
        if (!rc)
            rc = plx_rpc_wait(f, NULL, NULL);
        expect_lost(sh, 1, "rpc_async to rank 2", rc, (now_s() - t0) * 1e3);
    }
    plx_rpc_destroy(rpc);
    plx_comm_destroy(c);
    return 0;
}

int main(void)
{
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh || (sh->port = free_port()) < 0)
        return 1;
    struct procs p;
    if (procs_start(&p, 3, rank_main, sh))
        return 1;
    procs_wait(&p, now_s() + 60);
    int bad = sh->failures;
    for (int k = 0; k < 2; k++)
        if (p.hung[k] || !WIFEXITED(p.status[k]) || WEXITSTATUS(p.status[k])) {
            printf("rank %d: %s\n", k, procs_describe(&p, k));
            bad++;
        }
    if (!WIFSIGNALED(p.status[2]))
        printf("rank 2 did not die: %s\n", procs_describe(&p, 2)), bad++;
    printf("%s%s%s", sh->log[0], sh->log[1], sh->log[2]);
    printf("%s\n", bad ? "FAIL" : "ok: a dead owner's callers fail naming it, before their timeout");
    return bad != 0;
}
