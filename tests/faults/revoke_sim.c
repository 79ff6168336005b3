/* revoke_sim.c - plx_comm_revoke on sim: the case of revoke.c for ranks
 * that are threads or coroutines of this process.
 *
 * argv: mode, ranks (2..8), case (allreduce, recv).
 *   threads  ranks are threads, native collectives (the 64 MiB allreduce
 *            waits in the plugin's barrier for rank 0)
 *   p2p      threads with [sim] native_collectives off: the core's
 *            algorithms run, and wait in point-to-point receives
 *   fibers   ranks are coroutines of one thread (plexus_sim_run_ranks)
 * The operation timeout is 300 s (FIBER_TIMEOUT_MS on coroutines). Ranks
 * 1..n-1 block in a 64 MiB allreduce that rank 0 never joins
 * ("allreduce"), or in a receive from a rank that sends nothing ("recv",
 * as in revoke.c); rank 0 has a receive of its own pending that nobody
 * matches.
 *   threads, p2p: rank 0's main thread blocks in that receive and a second
 *     thread revokes 1 s after every rank is about to call its operation;
 *     each must have been in it at least 0.5 s by then.
 *   fibers: a coroutine runs until it waits, so rank 0 first waits for a
 *     message that rank n-1 sends just before its own operation; by then
 *     every other rank has entered its operation (checked), and rank 0
 *     posts its receive, revokes and waits for the receive. Without the
 *     revoke waking them, every rank waits and the run ends as a deadlock.
 * Every rank must get PLX_ERR_REVOKED within BOUND_S of the revoke, naming
 * rank 0 (on the others); a later allreduce and send must fail with
 * PLX_ERR_REVOKED, and plx_comm_destroy must succeed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 300000
/* Coroutines: a wait that nothing can end (every rank waits) is known at
 * once, but the core takes it for a slice of its wait and asks again until
 * the operation's timeout: this bounds such a run without a revoke. */
#define FIBER_TIMEOUT_MS 20000
#define BOUND_S 10.0 /* seconds, for a loaded 2-core machine: far below the 300 s timeout */
#define BIG_COUNT ((64u << 20) / sizeof(float))
#define MAXR 8

enum mode { THREADS, P2P, FIBERS };

struct shared {
    enum mode mode;
    int nrank, recv_case;
    char url[64];
    int entering;              /* atomic: ranks about to call their blocking operation */
    int entered_at_revoke;     /* fibers: of ranks 1..n-1, those inside theirs when rank 0 revoked */
    double revoke_at;          /* atomic (as bits): now_s() of the revoke, 1e300 before */
    int finished;              /* atomic: thread ranks that returned */
    int failures;
    char log[MAXR][2048];
};

static double revoke_time(struct shared *sh)
{
    double t;
    __atomic_load(&sh->revoke_at, &t, __ATOMIC_ACQUIRE);
    return t;
}

static void revoke_now(struct shared *sh, struct plx_comm *c)
{
    double t = now_s();
    __atomic_store(&sh->revoke_at, &t, __ATOMIC_RELEASE);
    int rc = plx_comm_revoke(c);
    if (rc != 0)
        procs_report(sh->log[0], sizeof sh->log[0], &sh->failures, "rank 0: plx_comm_revoke: %s: %s\n",
                     plx_err_name(rc), plx_last_error());
}

struct revoker {
    struct shared *sh;
    struct plx_comm *c;
};

static void *revoke_later(void *arg)
{
    struct revoker *rv = arg;
    double until = now_s() + 60;
    while (__atomic_load_n(&rv->sh->entering, __ATOMIC_ACQUIRE) < rv->sh->nrank && now_s() < until)
        usleep(1000);
    usleep(1000000); /* every rank is blocked inside its operation by then */
    revoke_now(rv->sh, rv->c);
    return NULL;
}

/* The pending operation's result: REVOKED, promptly, naming rank 0. */
static void judge(struct shared *sh, int rank, const char *what, int rc, double entered)
{
    double dt = now_s() - revoke_time(sh);
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    const char *msg = plx_last_error();
    procs_report(log, cap, NULL, "rank %d: %s (entered %.2f s before the revoke): %s %.3f s after the revoke: %s\n",
                 rank, what, revoke_time(sh) - entered, plx_err_name(rc), dt, rc ? msg : "");
    if (rc != PLX_ERR_REVOKED)
        procs_report(log, cap, &sh->failures, "rank %d: %s returned %s, not PLX_ERR_REVOKED\n", rank, what,
                     plx_err_name(rc));
    else if (rank != 0 && !strstr(msg, "rank 0 revoked"))
        procs_report(log, cap, &sh->failures, "rank %d: the error does not say that rank 0 revoked\n", rank);
    if (sh->mode != FIBERS && revoke_time(sh) - entered < 0.5) /* else this would not test a blocked rank */
        procs_report(log, cap, &sh->failures, "rank %d: entered its %s only %.2f s before the revoke\n", rank, what,
                     revoke_time(sh) - entered);
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

/* Rank 0: its own receive is pending (blocked in it on threads) while the
 * communicator is revoked. */
static void rank0(struct shared *sh, struct plx_comm *c)
{
    float small[16];
    if (sh->mode != FIBERS) {
        struct revoker rv = {.sh = sh, .c = c};
        pthread_t t;
        if (pthread_create(&t, NULL, revoke_later, &rv) != 0) {
            procs_report(sh->log[0], sizeof sh->log[0], &sh->failures, "rank 0: pthread_create failed\n");
            return;
        }
        __atomic_add_fetch(&sh->entering, 1, __ATOMIC_ACQ_REL);
        double entered = now_s();
        int rc = plx_recv(c, small, 16, PLX_F32, 1, 9);
        pthread_join(t, NULL);
        judge(sh, 0, "its own pending recv", rc, entered);
        return;
    }
    /* rank n-1 sends this just before its operation, after every other rank entered its own */
    int go = 0, rc = plx_recv(c, &go, 1, PLX_I32, sh->nrank - 1, 7);
    if (rc != 0) {
        procs_report(sh->log[0], sizeof sh->log[0], &sh->failures, "rank 0: the go message: %s: %s\n",
                     plx_err_name(rc), plx_last_error());
        return;
    }
    struct plx_work *w = NULL;
    double entered = now_s();
    if ((rc = plx_irecv(c, small, 16, PLX_F32, 1, 9, NULL, &w)) != 0) {
        procs_report(sh->log[0], sizeof sh->log[0], &sh->failures, "rank 0: irecv: %s: %s\n", plx_err_name(rc),
                     plx_last_error());
        return;
    }
    sh->entered_at_revoke = __atomic_load_n(&sh->entering, __ATOMIC_ACQUIRE);
    revoke_now(sh, c);
    rc = plx_work_wait(w, PLX_TIMEOUT_DEFAULT);
    judge(sh, 0, "its own pending irecv", rc, entered);
    plx_work_free(w);
    if (sh->entered_at_revoke != sh->nrank - 1)
        procs_report(sh->log[0], sizeof sh->log[0], &sh->failures,
                     "rank 0: only %d of ranks 1..%d had entered their operation when it revoked\n",
                     sh->entered_at_revoke, sh->nrank - 1);
}

static void rank_body(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    const char *ov[] = {"sim.native_collectives=false", NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = sh->url;
    o.rank = rank;
    o.size = sh->nrank;
    o.timeout_ms = sh->mode == FIBERS ? FIBER_TIMEOUT_MS : TIMEOUT_MS;
    o.overrides = sh->mode == P2P ? ov : NULL;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        procs_report(log, cap, &sh->failures, "rank %d: init: %s\n", rank, plx_last_error());
        return;
    }
    float *in = NULL, *out = NULL, small[16];
    if (rank != 0 && !sh->recv_case) { /* ready (allocated, touched) before any clock starts */
        in = calloc(BIG_COUNT, sizeof *in);
        out = calloc(BIG_COUNT, sizeof *out);
        if (!in || !out) {
            procs_report(log, cap, &sh->failures, "rank %d: out of memory\n", rank);
            free(in);
            free(out);
            plx_comm_destroy(c);
            return;
        }
    }
    if (rank == 0) {
        rank0(sh, c);
    } else {
        int go = 1, rc;
        if (sh->mode == FIBERS && rank == sh->nrank - 1 && (rc = plx_send(c, &go, 1, PLX_I32, 0, 7)) != 0)
            procs_report(log, cap, &sh->failures, "rank %d: the go message: %s: %s\n", rank, plx_err_name(rc),
                         plx_last_error());
        int from = sh->nrank == 2 ? 0 : rank % (sh->nrank - 1) + 1;
        char what[40];
        snprintf(what, sizeof what, sh->recv_case ? "recv from rank %d" : "64 MiB allreduce", from);
        __atomic_add_fetch(&sh->entering, 1, __ATOMIC_ACQ_REL);
        double entered = now_s();
        if (sh->recv_case)
            rc = plx_recv(c, small, 16, PLX_F32, from, 9);
        else
            rc = plx_allreduce(c, in, out, BIG_COUNT, PLX_F32, PLX_SUM);
        judge(sh, rank, what, rc, entered);
    }
    free(in);
    free(out);
    after(sh, rank, c);
    int rc = plx_comm_destroy(c);
    if (rc != 0)
        procs_report(log, cap, &sh->failures, "rank %d: plx_comm_destroy after the revoke: %s: %s\n", rank,
                     plx_err_name(rc), plx_last_error());
}

static void *thread_main(void *arg)
{
    void **a = arg;
    struct shared *sh = a[1];
    rank_body((int)(intptr_t)a[0], sh);
    __atomic_add_fetch(&sh->finished, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

/* Coroutine ranks: the plugin of this build runs them. */
static int run_fibers(struct shared *sh)
{
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*run)(int, size_t, void (*)(int, void *), void *) =
        h ? (int (*)(int, size_t, void (*)(int, void *), void *))dlsym(h, "plexus_sim_run_ranks") : NULL;
    if (!run) {
        printf("SKIP: no sim plugin with coroutine ranks at %s: %s\n", path, dlerror());
        return 77;
    }
    int rc = run(sh->nrank, (size_t)1 << 20, rank_body, sh);
    if (rc != 0)
        procs_report(sh->log[0], sizeof sh->log[0], &sh->failures,
                     "plexus_sim_run_ranks: %s (PLX_ERR_TIMEOUT: every rank waited, a deadlock)\n", plx_err_name(rc));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || atoi(argv[2]) < 2 || atoi(argv[2]) > MAXR ||
        (strcmp(argv[1], "threads") && strcmp(argv[1], "p2p") && strcmp(argv[1], "fibers")) ||
        (strcmp(argv[3], "allreduce") && strcmp(argv[3], "recv"))) {
        fprintf(stderr, "usage: %s threads|p2p|fibers RANKS(2..%d) allreduce|recv\n", argv[0], MAXR);
        return 2;
    }
    static struct shared sh_;
    struct shared *sh = &sh_;
    sh->mode = !strcmp(argv[1], "threads") ? THREADS : !strcmp(argv[1], "p2p") ? P2P : FIBERS;
    sh->nrank = atoi(argv[2]);
    sh->recv_case = !strcmp(argv[3], "recv");
    sh->revoke_at = 1e300; /* until rank 0 revokes, no ending counts as late */
    snprintf(sh->url, sizeof sh->url, "mem://revoke-sim-%d", (int)getpid());
    if (sh->mode == FIBERS) {
        int rc = run_fibers(sh);
        if (rc)
            return rc;
    } else {
        pthread_t t[MAXR];
        void *args[MAXR][2];
        for (int r = 0; r < sh->nrank; r++) {
            args[r][0] = (void *)(intptr_t)r;
            args[r][1] = sh;
            if (pthread_create(&t[r], NULL, thread_main, args[r]) != 0) {
                printf("FAIL: pthread_create\n");
                return 1;
            }
        }
        /* A rank the revoke does not reach would wait out the 300 s timeout. */
        while (__atomic_load_n(&sh->finished, __ATOMIC_ACQUIRE) < sh->nrank) {
            double t0 = revoke_time(sh);
            if (now_s() > (t0 < 1e300 ? t0 + 3 * BOUND_S : 1e300)) {
                for (int r = 0; r < sh->nrank; r++)
                    fputs(sh->log[r], stdout);
                printf("FAIL: sim %s, %d ranks, %s: %d rank(s) still blocked %.0f s after the revoke\n", argv[1],
                       sh->nrank, argv[3], sh->nrank - __atomic_load_n(&sh->finished, __ATOMIC_ACQUIRE), 3 * BOUND_S);
                fflush(stdout);
                _exit(1);
            }
            usleep(20000);
        }
        for (int r = 0; r < sh->nrank; r++)
            pthread_join(t[r], NULL);
    }
    for (int r = 0; r < sh->nrank; r++)
        fputs(sh->log[r], stdout);
    if (sh->failures) {
        printf("FAIL: sim %s, %d ranks, %s: %d failure(s)\n", argv[1], sh->nrank, argv[3], sh->failures);
        return 1;
    }
    printf("ok: sim %s, %d ranks, %s: every rank got PLX_ERR_REVOKED promptly, later work too, destroy worked\n",
           argv[1], sh->nrank, argv[3]);
    return 0;
}
