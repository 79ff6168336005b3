/* revoke.c - plx_comm_revoke on one rank ends every rank's pending work
 * with PLX_ERR_REVOKED, promptly, and every later operation too.
 *
 * argv: backend (tcp, shm, shm+tcp), ranks (2..8), case (allreduce, recv). The
 * operation timeout is 300 s, so an ending within seconds comes from the
 * revoke, not from a timeout. Rank 0's main thread blocks in a receive that
 * nobody matches; once every rank is in, a second thread of rank 0 revokes.
 * The other ranks are blocked meanwhile in a 64 MiB allreduce that rank 0
 * never joins ("allreduce"), or in a receive from another rank that sends
 * nothing ("recv": from the next rank among 1..n-1, so with more than two
 * ranks none of them waits for the rank that revoked). Rank 0 revokes 1 s
 * after every rank is about to call its operation (each must have been in
 * it at least 0.5 s, or the test fails as not testing a blocked rank). Every rank must get
 * PLX_ERR_REVOKED (not ABORTED, PEER_LOST or TIMEOUT) within BOUND_S of the
 * revoke, with a message naming rank 0 as the one that revoked (on the
 * others); then an allreduce and a send on the same communicator must fail
 * with PLX_ERR_REVOKED at once, and plx_comm_destroy must succeed.
 *
 * argv "unsupported BACKEND": on a backend without revoke (one rank, in
 * process; sim under PLEXUS_SIM_ABI_MINOR=0 presents a table without
 * comm_revoke), plx_comm_revoke is PLX_ERR_UNSUPPORTED naming the backend
 * and the communicator stays usable. Sim's revoke is revoke_sim.c's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 300000
#define BOUND_S 10.0 /* seconds, for a loaded 2-core machine: far below the 300 s timeout */
#define BIG_COUNT (64u << 20) / sizeof(float)

struct shared {
    int port, nrank, recv_case;
    char backend[32];
    volatile int joined;
    volatile int entering; /* ranks about to call their blocking operation */
    volatile double revoke_at;
    int failures;
    char log[PROCS_MAX][2048];
};

struct revoker {
    struct shared *sh;
    struct plx_comm *c;
    int rc;
    char msg[512];
};

static void *revoke_later(void *arg)
{
    struct revoker *rv = arg;
    double until = now_s() + 60;
    while (__atomic_load_n(&rv->sh->entering, __ATOMIC_ACQUIRE) < rv->sh->nrank && now_s() < until)
        usleep(1000);
    usleep(1000000); /* every rank is blocked inside its operation by then */
    rv->sh->revoke_at = now_s();
    rv->rc = plx_comm_revoke(rv->c);
    snprintf(rv->msg, sizeof rv->msg, "%s", rv->rc ? plx_last_error() : "");
    return NULL;
}

/* The pending operation's result: REVOKED, promptly, naming rank 0. */
static void judge(struct shared *sh, int rank, const char *what, int rc, double entered, double dt)
{
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    const char *msg = plx_last_error();
    procs_report(log, cap, NULL, "rank %d: %s (entered %.2f s before the revoke): %s %.2f s after the revoke: %s\n",
                 rank, what, sh->revoke_at - entered, plx_err_name(rc), dt, rc ? msg : "");
    if (rc != PLX_ERR_REVOKED)
        procs_report(log, cap, &sh->failures, "rank %d: %s returned %s, not PLX_ERR_REVOKED\n", rank, what,
                     plx_err_name(rc));
    else if (rank != 0 && !strstr(msg, "rank 0 revoked"))
        procs_report(log, cap, &sh->failures, "rank %d: the error does not say that rank 0 revoked\n", rank);
    if (sh->revoke_at - entered < 0.5) /* else this would not test a blocked rank */
        procs_report(log, cap, &sh->failures, "rank %d: entered its %s only %.2f s before the revoke\n", rank, what,
                     sh->revoke_at - entered);
    if (dt > BOUND_S)
        procs_report(log, cap, &sh->failures, "rank %d: %s took %.2f s after the revoke (bound %.0f s)\n", rank,
                     what, dt, BOUND_S);
}

/* Work started after the revoke fails at once with REVOKED. */
static void after(struct shared *sh, int rank, struct plx_comm *c)
{
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    float x[8] = {0}, y[8];
    int rc = plx_allreduce(c, x, y, 8, PLX_F32, PLX_SUM);
    if (rc != PLX_ERR_REVOKED)
        procs_report(log, cap, &sh->failures, "rank %d: a later allreduce returned %s (%s), not PLX_ERR_REVOKED\n",
                     rank, plx_err_name(rc), rc ? plx_last_error() : "");
    rc = plx_send(c, x, 8, PLX_F32, (rank + 1) % sh->nrank, 3);
    if (rc != PLX_ERR_REVOKED)
        procs_report(log, cap, &sh->failures, "rank %d: a later send returned %s (%s), not PLX_ERR_REVOKED\n", rank,
                     plx_err_name(rc), rc ? plx_last_error() : "");
}

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    struct plx_comm *c = NULL;
    if (procs_open(rank, sh->nrank, sh->port, sh->backend, TIMEOUT_MS, log, cap, &sh->failures, &c) != 0)
        return 1;
    /* the 64 MiB buffers are ready (allocated, touched) before any clock starts */
    float *in = NULL, *out = NULL;
    if (rank != 0 && !sh->recv_case) {
        in = calloc(BIG_COUNT, sizeof *in);
        out = malloc(BIG_COUNT * sizeof *out);
        if (!in || !out) {
            procs_report(log, cap, &sh->failures, "rank %d: out of memory\n", rank);
            return 1;
        }
        memset(in, 0, BIG_COUNT * sizeof *in);
        memset(out, 0, BIG_COUNT * sizeof *out);
    }
    __atomic_add_fetch(&sh->joined, 1, __ATOMIC_ACQ_REL);
    double until = now_s() + 60;
    while (__atomic_load_n(&sh->joined, __ATOMIC_ACQUIRE) < sh->nrank && now_s() < until)
        usleep(1000);
    float small[16];
    if (rank == 0) {
        struct revoker rv = {.sh = sh, .c = c};
        pthread_t t;
        if (pthread_create(&t, NULL, revoke_later, &rv) != 0) {
            procs_report(log, cap, &sh->failures, "rank 0: pthread_create failed\n");
            return 1;
        }
        __atomic_add_fetch(&sh->entering, 1, __ATOMIC_ACQ_REL);
        double entered = now_s();
        int rc = plx_recv(c, small, 16, PLX_F32, 1, 9);
        double dt = now_s() - sh->revoke_at;
        pthread_join(t, NULL);
        if (rv.rc != 0)
            procs_report(log, cap, &sh->failures, "rank 0: plx_comm_revoke: %s: %s\n", plx_err_name(rv.rc), rv.msg);
        judge(sh, rank, "its own pending recv", rc, entered, dt);
    } else if (!sh->recv_case) {
        __atomic_add_fetch(&sh->entering, 1, __ATOMIC_ACQ_REL);
        double entered = now_s();
        int rc = plx_allreduce(c, in, out, BIG_COUNT, PLX_F32, PLX_SUM);
        judge(sh, rank, "64 MiB allreduce", rc, entered, now_s() - sh->revoke_at);
        free(in);
        free(out);
    } else {
        int from = sh->nrank == 2 ? 0 : rank % (sh->nrank - 1) + 1;
        __atomic_add_fetch(&sh->entering, 1, __ATOMIC_ACQ_REL);
        double entered = now_s();
        int rc = plx_recv(c, small, 16, PLX_F32, from, 9);
        char what[40];
        snprintf(what, sizeof what, "recv from rank %d", from);
        judge(sh, rank, what, rc, entered, now_s() - sh->revoke_at);
    }
    after(sh, rank, c);
    int rc = plx_comm_destroy(c);
    if (rc != 0)
        procs_report(log, cap, &sh->failures, "rank %d: plx_comm_destroy after the revoke: %s: %s\n", rank,
                     plx_err_name(rc), plx_last_error());
    return 0;
}

static int unsupported(const char *backend)
{
    char url[64];
    snprintf(url, sizeof url, "mem://revoke-%d", (int)getpid());
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.init = url;
    o.backend = backend;
    o.rank = 0;
    o.size = 1;
    o.timeout_ms = 10000;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        printf("SKIP: %s: %s\n", backend, plx_last_error());
        return 77;
    }
    int bad = 0, rc = plx_comm_revoke(c);
    printf("%s: plx_comm_revoke: %s: %s\n", backend, plx_err_name(rc), rc ? plx_last_error() : "");
    if (rc != PLX_ERR_UNSUPPORTED || !strstr(plx_last_error(), backend))
        bad = printf("FAIL: expected PLX_ERR_UNSUPPORTED naming %s\n", backend);
    float x = 1, y = 0;
    if ((rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM)) != 0 || y != 1)
        bad = printf("FAIL: the communicator is not usable after the refused revoke: %s\n", plx_err_name(rc));
    if (plx_comm_revoke(NULL) != PLX_ERR_INVALID_ARG)
        bad = printf("FAIL: plx_comm_revoke(NULL) is not PLX_ERR_INVALID_ARG\n");
    plx_comm_destroy(c);
    if (!bad)
        printf("ok: %s: revoke unsupported, said so, communicator still usable\n", backend);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "unsupported"))
        return unsupported(argv[2]);
    if (argc < 4 || atoi(argv[2]) < 2 || atoi(argv[2]) > 8 ||
        (strcmp(argv[3], "allreduce") && strcmp(argv[3], "recv"))) {
        fprintf(stderr, "usage: %s tcp|shm RANKS(2..8) allreduce|recv\n", argv[0]);
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh)
        return 1;
    snprintf(sh->backend, sizeof sh->backend, "%s", argv[1]);
    sh->nrank = atoi(argv[2]);
    sh->recv_case = !strcmp(argv[3], "recv");
    sh->revoke_at = 1e300; /* until rank 0 revokes, no ending counts as late */
    if ((sh->port = free_port()) < 0)
        return 1;
    struct procs p;
    if (procs_start(&p, sh->nrank, run_rank, sh) != 0)
        return 1;
    procs_wait(&p, now_s() + 150);
    int bad = 0;
    for (int r = 0; r < sh->nrank; r++) {
        fputs(sh->log[r], stdout);
        if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
            printf("rank %d: %s\n", r, procs_describe(&p, r));
            bad = 1;
        }
    }
    if (bad || sh->failures) {
        printf("FAIL: %s, %d ranks, %s: %d failure(s)\n", sh->backend, sh->nrank, argv[3], sh->failures);
        return 1;
    }
    printf("ok: %s, %d ranks, %s: every rank got PLX_ERR_REVOKED promptly, later work too, destroy worked\n",
           sh->backend, sh->nrank, argv[3]);
    return 0;
}
