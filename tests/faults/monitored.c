/* monitored.c - plx_monitored_barrier names the ranks that did not come.
 *
 * Four processes on backend argv[1] (tcp, shm), timeout 1 s, one
 * communicator per case:
 * - all: every rank calls it twice, with a user message (tag 0) and an
 *   allreduce between them: all return 0, the message and the sum are right;
 * - first: rank 2 stays away: rank 0 gets PLX_ERR_TIMEOUT naming rank 2
 *   (late = {2}); ranks 1 and 3 fail waiting for rank 0's release;
 * - all-late: ranks 1 and 3 stay away, wait_all: rank 0 gets late = {1, 3};
 * - zero: rank 0 alone with timeout 0: PLX_ERR_TIMEOUT, no rank named;
 * - dead: rank 3 exits before the call: rank 0 names rank 3.
 * Every case begins with a barrier; every rank but the dead one holds its
 * communicator until rank 0 is done. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define P 4
#define TIMEOUT_MS 1000

enum { ALL, FIRST, ALL_LATE, ZERO, DEAD, NCASES };
static const char *const case_name[] = {"all", "first", "all-late", "zero", "dead"};

struct shared {
    int port, kase;
    const char *backend;
    volatile int root_done;
    int ready; /* ranks through the barrier that opens each case */
    int failures;
    char log[P][2048];
};

static int stays_away(int kase, int rank)
{
    switch (kase) {
    case FIRST: return rank == 2;
    case ALL_LATE: return rank == 1 || rank == 3;
    case ZERO: return rank != 0;
    case DEAD: return rank == 3;
    default: return 0;
    }
}

#define FAIL(...) procs_report(log, sizeof sh->log[0], &sh->failures, __VA_ARGS__)

static void check_root(struct shared *sh, char *log, int rc, const int *late, int nlate)
{
    static const int want_first[] = {2}, want_all[] = {1, 3}, want_dead[] = {3};
    const int *want = NULL;
    int nwant = 0;
    switch (sh->kase) {
    case FIRST: want = want_first, nwant = 1; break;
    case ALL_LATE: want = want_all, nwant = 2; break;
    case DEAD: want = want_dead, nwant = 1; break;
    default: break;
    }
    const char *msg = plx_last_error();
    if (sh->kase == ZERO) {
        if (rc != PLX_ERR_TIMEOUT || nlate != 0)
            FAIL("rank 0: timeout 0: want PLX_ERR_TIMEOUT naming no rank, got %s with %d named (%s)\n",
                 plx_err_name(rc), nlate, msg);
        return;
    }
    if (rc == 0 || nlate != nwant || memcmp(late, want, sizeof *want * (size_t)nwant) != 0) {
        FAIL("rank 0: want %d late rank(s) starting with %d, got %s, %d named (%s)\n", nwant, want[0],
             plx_err_name(rc), nlate, msg);
        return;
    }
    if (sh->kase != DEAD && rc != PLX_ERR_TIMEOUT)
        FAIL("rank 0: want PLX_ERR_TIMEOUT, got %s (%s)\n", plx_err_name(rc), msg);
    char named[32];
    snprintf(named, sizeof named, nwant > 1 ? "ranks %d, %d" : "rank %d", want[0], nwant > 1 ? want[1] : 0);
    if (!strstr(msg, named))
        FAIL("rank 0: the message does not say \"%s\": %s\n", named, msg);
}

static void run_all(struct shared *sh, char *log, struct plx_comm *c, int rank)
{
    int late[P], nlate = -1;
    int32_t word = 100 + rank, got = -1;
    float x = (float)(rank + 1), sum = 0;
    int rc = 0;
    if (rank == 1)
        rc = plx_send(c, &word, 1, PLX_I32, 0, 0);
    if (rc == 0)
        rc = plx_monitored_barrier(c, TIMEOUT_MS, 0, late, P, &nlate);
    if (rc == 0 && rank == 0)
        rc = plx_recv(c, &got, 1, PLX_I32, 1, 0);
    if (rc == 0)
        rc = plx_allreduce(c, &x, &sum, 1, PLX_F32, PLX_SUM);
    if (rc == 0)
        rc = plx_monitored_barrier(c, TIMEOUT_MS, 1, late, P, &nlate);
    if (rc != 0)
        FAIL("rank %d: all came, yet %s: %s\n", rank, plx_err_name(rc), plx_last_error());
    else if (nlate != 0 || sum != 10.0f || (rank == 0 && got != 101))
        FAIL("rank %d: %d named late, sum %g (want 10), message %d (want 101)\n", rank, nlate, (double)sum,
             (int)got);
}

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    struct plx_comm *c;
    if (procs_open(rank, P, sh->port, sh->backend, TIMEOUT_MS, log, sizeof sh->log[0], &sh->failures, &c) != 0)
        return 1;
    /* Everyone is through a barrier before the case: a rank that gives up
     * fails what its peers still have in progress (tcp). */
    if (plx_barrier(c) != 0)
        FAIL("rank %d: barrier before the case: %s\n", rank, plx_last_error());
    __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < 400 && __atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < P; i++)
        usleep(25 * 1000);
    if (sh->kase == ALL) {
        run_all(sh, log, c, rank);
    } else if (stays_away(sh->kase, rank)) {
        if (sh->kase == DEAD)
            _exit(0); /* gone without a word: its peers see the loss */
        for (int i = 0; i < 200 && !sh->root_done; i++)
            usleep(50 * 1000);
    } else {
        int late[P], nlate = -1;
        int rc = plx_monitored_barrier(c, sh->kase == ZERO ? 0 : TIMEOUT_MS, sh->kase == ALL_LATE, late, P, &nlate);
        if (rank == 0) {
            check_root(sh, log, rc, late, nlate);
            sh->root_done = 1;
        } else if (rc == 0) {
            FAIL("rank %d: came, but some did not: want an error, got 0\n", rank);
        } else if (!strstr(plx_last_error(), "rank 0's release") && sh->kase != DEAD) {
            FAIL("rank %d: the error does not say it waited for rank 0's release: %s\n", rank, plx_last_error());
        }
        /* Alive until rank 0 has judged: a rank that left is not the one that died. */
        for (int i = 0; rank != 0 && i < 200 && !sh->root_done; i++)
            usleep(50 * 1000);
    }
    plx_comm_destroy(c);
    return 0;
}

/* One case on fresh ranks; 1 if it failed. */
static int run_case(struct shared *sh, int k)
{
    memset(sh->log, 0, sizeof sh->log);
    sh->failures = 0;
    sh->root_done = 0;
    sh->ready = 0;
    sh->kase = k;
    sh->port = free_port();
    struct procs p;
    double t0 = now_s();
    if (sh->port < 0 || procs_start(&p, P, run_rank, sh) != 0) {
        fprintf(stderr, "case %s: cannot start the ranks\n", case_name[k]);
        return 1;
    }
    procs_wait(&p, t0 + 60);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "case %s: ", case_name[k]);
    sh->failures += procs_bad_ends(&p, stderr, prefix);
    for (int r = 0; r < P; r++)
        fputs(sh->log[r], stderr);
    printf("case %s: %s (%.1f s)\n", case_name[k], sh->failures ? "FAILED" : "ok", now_s() - t0);
    return sh->failures != 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s tcp|shm\n", argv[0]);
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    sh->backend = argv[1];
    int bad = 0;
    for (int k = 0; k < NCASES; k++)
        bad += run_case(sh, k);
    return bad ? 1 : 0;
}
