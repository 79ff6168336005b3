/* abort.c - plx_comm_abort from another thread unblocks every pending wait.
 *
 * Two ranks (tcp: two processes on loopback; sim: two threads). Rank 1 joins
 * and then does nothing, so everything rank 0 starts stays pending: two
 * generic allreduces (one running in the executor, one queued behind it), a
 * receive, an 8 MiB send that waits for a receive that never comes, each
 * waited for by its own thread (default and infinite timeouts), plus a
 * blocking recv and a blocking barrier in two more threads. The
 * communicator's timeout is 60 s; 300 ms in, the main thread aborts. Every
 * wait must end with PLX_ERR_ABORTED within 2 s of the abort, new work must be
 * refused with a message saying the communicator was aborted, destroy must
 * return, and both ranks then build a new communicator and allreduce on it.
 *
 * Usage: abort tcp|sim|sim-generic (sim with its native collectives off, so
 * the allreduces run in the core's executor as they do on tcp). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 60000
#define NWAIT 6
#define BIG (8u << 20)

struct shared {
    const char *backend;
    int generic;
    char url[2][96];       /* the world's store, the new communicator's */
    volatile int rank0_done;
    int failures;
    char log[2][2048];     /* each rank's report, printed by the parent */
};

struct waiter {
    struct plx_comm *comm;
    struct plx_work *work; /* NULL: a blocking call, chosen by kind */
    int kind;
    int64_t timeout;
    void *buf;
    int rc;
    double end_s;
    char msg[300];
};

static const char *const what[NWAIT] = {"iallreduce (running)", "iallreduce (queued)", "irecv (infinite wait)",
                                        "isend 8 MiB", "blocking recv", "blocking barrier"};

static void *wait_main(void *p)
{
    struct waiter *w = p;
    if (w->work)
        w->rc = plx_work_wait(w->work, w->timeout);
    else if (w->kind == 4)
        w->rc = plx_recv(w->comm, w->buf, 16, PLX_U8, 1, 9);
    else
        w->rc = plx_barrier(w->comm);
    w->end_s = now_s();
    snprintf(w->msg, sizeof w->msg, "%s", plx_last_error());
    return NULL;
}

static int open_comm(struct shared *sh, int which, int rank, struct plx_comm **c)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = sh->backend;
    o.init = sh->url[which];
    o.name = which ? "again" : "world";
    o.rank = o.local_rank = rank;
    o.size = o.local_size = 2;
    o.timeout_ms = TIMEOUT_MS;
    static const char *const generic[] = {"sim.native_collectives=false", NULL};
    if (sh->generic)
        o.overrides = generic;
    return plx_comm_init(&o, c);
}

#define FAIL(...) procs_report(log, sizeof sh->log[0], &sh->failures, __VA_ARGS__)

/* Rank 0: start everything, abort, check. */
static void aborter(struct shared *sh, struct plx_comm *c, char *log)
{
    float *a = calloc(1024, 4), *b = calloc(1024, 4), *x = calloc(1024, 4), *y = calloc(1024, 4);
    char *big = calloc(BIG, 1), small[16], rbuf[16];
    struct waiter w[NWAIT] = {{0}};
    pthread_t th[NWAIT];
    int rc = 0;
    rc |= plx_iallreduce(c, a, b, 1024, PLX_F32, PLX_SUM, NULL, &w[0].work);
    rc |= plx_iallreduce(c, x, y, 1024, PLX_F32, PLX_SUM, NULL, &w[1].work);
    rc |= plx_irecv(c, small, 16, PLX_U8, 1, 7, NULL, &w[2].work);
    rc |= plx_isend(c, big, BIG, PLX_U8, 1, 8, NULL, &w[3].work);
    if (rc) {
        FAIL("rank 0: starting the work failed: %s\n", plx_last_error());
        goto out;
    }
    for (int i = 0; i < NWAIT; i++) {
        w[i].comm = c;
        w[i].kind = i;
        w[i].buf = rbuf;
        w[i].timeout = i == 2 ? PLX_TIMEOUT_INFINITE : PLX_TIMEOUT_DEFAULT;
        pthread_create(&th[i], NULL, wait_main, &w[i]);
    }
    usleep(300 * 1000);
    double t_abort = now_s();
    if (plx_comm_abort(c) != 0)
        FAIL("rank 0: plx_comm_abort failed: %s\n", plx_last_error());
    for (int i = 0; i < NWAIT; i++) {
        pthread_join(th[i], NULL);
        double ms = (w[i].end_s - t_abort) * 1e3;
        procs_report(log, sizeof sh->log[0], NULL, "rank 0: %-22s %s %.0f ms after the abort: %s\n", what[i],
                     plx_err_name(w[i].rc), ms, w[i].msg);
        if (w[i].rc != PLX_ERR_ABORTED || ms < 0 || ms > 2000)
            FAIL("rank 0: %s: expected PLX_ERR_ABORTED within 2000 ms of the abort\n", what[i]);
    }
    /* The communicator refuses new work, saying why. */
    rc = plx_allreduce(c, a, b, 4, PLX_F32, PLX_SUM);
    if (rc != PLX_ERR_ABORTED || !strstr(plx_last_error(), "aborted"))
        FAIL("rank 0: new work after the abort: %s: %s (expected PLX_ERR_ABORTED)\n", plx_err_name(rc),
             plx_last_error());
out:
    for (int i = 0; i < 4; i++)
        plx_work_free(w[i].work);
    free(a);
    free(b);
    free(x);
    free(y);
    free(big);
}

static int rank_main(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    struct plx_comm *c = NULL;
    if (open_comm(sh, 0, rank, &c) != 0) {
        FAIL("rank %d: init: %s\n", rank, plx_last_error());
        return 1;
    }
    if (rank == 0) {
        aborter(sh, c, log);
        __atomic_store_n(&sh->rank0_done, 1, __ATOMIC_RELEASE);
    } else {
        double until = now_s() + 30;
        while (!__atomic_load_n(&sh->rank0_done, __ATOMIC_ACQUIRE) && now_s() < until)
            usleep(10000);
    }
    double t0 = now_s();
    plx_comm_destroy(c);
    if (now_s() - t0 > 5)
        FAIL("rank %d: destroy took %.1f s\n", rank, now_s() - t0);
    /* A new communicator in the same process works. */
    struct plx_comm *c2 = NULL;
    int v = rank + 1, s = 0, rc = open_comm(sh, 1, rank, &c2);
    if (rc == 0)
        rc = plx_allreduce(c2, &v, &s, 1, PLX_I32, PLX_SUM);
    if (rc != 0 || s != 3)
        FAIL("rank %d: the new communicator: %s, sum %d: %s\n", rank, plx_err_name(rc), s, plx_last_error());
    plx_comm_destroy(c2);
    return 0;
}

struct thread_arg {
    struct shared *sh;
    int rank;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    rank_main(a->rank, a->sh);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "sim") && strcmp(argv[1], "sim-generic"))) {
        fprintf(stderr, "usage: abort tcp|sim|sim-generic\n");
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh)
        return 1;
    sh->generic = !strcmp(argv[1], "sim-generic");
    sh->backend = sh->generic ? "sim" : argv[1];
    int bad = 0;
    if (!strcmp(argv[1], "tcp")) {
        snprintf(sh->url[0], sizeof sh->url[0], "tcp://127.0.0.1:%d", free_port());
        snprintf(sh->url[1], sizeof sh->url[1], "tcp://127.0.0.1:%d", free_port());
        struct procs p;
        if (procs_start(&p, 2, rank_main, sh) != 0)
            return 1;
        procs_wait(&p, now_s() + 60);
        for (int r = 0; r < 2; r++)
            if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
                printf("rank %d: %s\n", r, procs_describe(&p, r));
                bad++;
            }
    } else {
        snprintf(sh->url[0], sizeof sh->url[0], "mem://abort-%d-a", (int)getpid());
        snprintf(sh->url[1], sizeof sh->url[1], "mem://abort-%d-b", (int)getpid());
        struct thread_arg args[2] = {{sh, 0}, {sh, 1}};
        pthread_t t[2];
        for (int r = 0; r < 2; r++)
            pthread_create(&t[r], NULL, thread_main, &args[r]);
        for (int r = 0; r < 2; r++)
            pthread_join(t[r], NULL);
    }
    printf("%s%s", sh->log[0], sh->log[1]);
    bad += sh->failures;
    printf("%s\n", bad ? "FAILED" : "ok: every pending wait ended with PLX_ERR_ABORTED soon after the abort");
    return bad != 0;
}
