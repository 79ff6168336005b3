/* grow.c - plx_comm_grow with a newcomer that calls plx_comm_join (tcp or
 * shm processes, argv[2]; rank 0 hosts the job's store).
 *
 * argv "grow": 3 ranks run an allreduce, then grow to 4 with a fourth
 * process that joins through the store. argv "shrink-grow": 4 ranks, rank 2
 * is SIGKILLed during an allreduce, the survivors shrink to 3, then a new
 * process joins and they grow back to 4. Either way the grown communicator
 * must have 4 ranks (the old ones keep their numbers, the newcomer is 3) and
 * an allreduce on it must be right on every rank. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 30000
#define COUNT 4096
#define NEWCOMER 4 /* the process index of the newcomer */

struct shared {
    int port, shrink_first, victim;
    char backend[16];
    volatile int in_loop[NEWCOMER + 1];
    volatile int ready;   /* ranks of the communicator about to grow */
    int grown_rank[NEWCOMER + 1];
    int failures;
    char log[NEWCOMER + 1][2048];
};

static void options(struct shared *sh, struct plx_comm_options *o, char *url, size_t n)
{
    snprintf(url, n, "tcp://127.0.0.1:%d", sh->port);
    plx_comm_options_init(o);
    o->init = url;
    o->backend = sh->backend;
    o->timeout_ms = TIMEOUT_MS;
}

/* The grown communicator: 4 ranks, each contributing (rank + 1) * (i % 5 + 1). */
static int check_grown(struct shared *sh, int who, struct plx_comm *g)
{
    char *log = sh->log[who];
    size_t cap = sizeof sh->log[0];
    int size = plx_comm_size(g), rank = plx_comm_rank(g);
    sh->grown_rank[who] = rank;
    if (size != 4)
        procs_report(log, cap, &sh->failures, "process %d: grown size %d, not 4\n", who, size);
    float in[COUNT], out[COUNT];
    for (int i = 0; i < COUNT; i++)
        in[i] = (float)((rank + 1) * (i % 5 + 1));
    int rc = plx_allreduce(g, in, out, COUNT, PLX_F32, PLX_SUM), wrong = 0;
    for (int i = 0; rc == 0 && i < COUNT && !wrong; i++)
        wrong = out[i] != (float)(10 * (i % 5 + 1));
    procs_report(log, cap, rc || wrong ? &sh->failures : NULL, "process %d: rank %d of %d grown: allreduce %s %s\n",
                 who, rank, size, plx_err_name(rc), rc ? plx_last_error() : wrong ? "WRONG values" : "right");
    return rc || wrong;
}

static int newcomer(struct shared *sh)
{
    char url[64];
    struct plx_comm_options o;
    options(sh, &o, url, sizeof url);
    double until = now_s() + 60;
    while (sh->ready < 3 && now_s() < until) /* a process that starts once the job wants it */
        usleep(1000);
    struct plx_comm *g = NULL;
    if (plx_comm_join(&o, &g) != 0) {
        procs_report(sh->log[NEWCOMER], sizeof sh->log[0], &sh->failures, "newcomer: join: %s\n", plx_last_error());
        return 1;
    }
    int bad = check_grown(sh, NEWCOMER, g);
    plx_comm_destroy(g);
    return bad;
}

/* shrink-grow: allreduce until the victim's death breaks the communicator,
 * then shrink to the survivors. */
static int lose_one(struct shared *sh, int rank, struct plx_comm **c)
{
    float x[COUNT] = {0}, y[COUNT];
    int rc = 0;
    sh->in_loop[rank] = 1;
    for (double until = now_s() + 60; rc == 0 && now_s() < until;)
        rc = plx_allreduce(*c, x, y, COUNT, PLX_F32, PLX_SUM);
    struct plx_comm *n = NULL;
    if ((rc = plx_comm_shrink(*c, &n)) != 0) {
        procs_report(sh->log[rank], sizeof sh->log[0], &sh->failures, "rank %d: shrink: %s\n", rank,
                     plx_last_error());
        return 1;
    }
    plx_comm_destroy(*c);
    *c = n;
    return 0;
}

static int run(int who, void *arg)
{
    struct shared *sh = arg;
    if (who == NEWCOMER)
        return newcomer(sh);
    int ranks = sh->shrink_first ? 4 : 3;
    if (who >= ranks)
        return 0;
    char url[64];
    struct plx_comm_options o;
    options(sh, &o, url, sizeof url);
    o.rank = o.local_rank = who;
    o.size = o.local_size = ranks;
    struct plx_comm *c = NULL, *g = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        procs_report(sh->log[who], sizeof sh->log[0], &sh->failures, "rank %d: init: %s\n", who, plx_last_error());
        return 1;
    }
    if (sh->shrink_first && lose_one(sh, who, &c) != 0)
        return 1;
    __atomic_add_fetch(&sh->ready, 1, __ATOMIC_SEQ_CST);
    int bad = 1;
    if (plx_comm_grow(c, 4, &g) != 0)
        procs_report(sh->log[who], sizeof sh->log[0], &sh->failures, "rank %d: grow: %s\n", who, plx_last_error());
    else
        bad = check_grown(sh, who, g);
    plx_comm_destroy(g);
    plx_comm_destroy(c);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || argc > 3 || (strcmp(argv[1], "grow") && strcmp(argv[1], "shrink-grow"))) {
        fprintf(stderr, "usage: %s grow|shrink-grow [BACKEND, default tcp]\n", argv[0]);
        return 2;
    }
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh || (sh->port = free_port()) < 0)
        return 1;
    sh->shrink_first = !strcmp(argv[1], "shrink-grow");
    snprintf(sh->backend, sizeof sh->backend, "%s", argc == 3 ? argv[2] : "tcp");
    sh->victim = sh->shrink_first ? 2 : -1;
    struct procs p;
    double t0 = now_s();
    if (procs_start(&p, NEWCOMER + 1, run, sh) != 0)
        return 1;
    if (sh->victim >= 0) {
        while (!(sh->in_loop[0] && sh->in_loop[1] && sh->in_loop[2] && sh->in_loop[3]) && now_s() < t0 + 60)
            usleep(1000);
        usleep(100000);
        kill(p.pid[sh->victim], SIGKILL);
    }
    procs_wait(&p, t0 + 100);
    /* old ranks keep their numbers (after the shrink: 0, 1, 2 for 0, 1, 3); the newcomer is 3 */
    int expect[NEWCOMER + 1] = {0, 1, sh->shrink_first ? -1 : 2, sh->shrink_first ? 2 : -1, 3}, bad = 0;
    for (int r = 0; r <= NEWCOMER; r++) {
        fputs(sh->log[r], stdout);
        if (r == sh->victim)
            continue;
        if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r]))
            bad = printf("process %d: %s\n", r, procs_describe(&p, r));
        else if (expect[r] >= 0 && sh->grown_rank[r] != expect[r])
            bad = printf("process %d: rank %d in the grown communicator, expected %d\n", r, sh->grown_rank[r],
                         expect[r]);
    }
    printf("%s on %s: %s in %.1f s\n", argv[1], sh->backend, bad || sh->failures ? "FAIL" : "ok", now_s() - t0);
    return bad || sh->failures;
}
