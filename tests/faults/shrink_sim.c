/* shrink_sim.c - plx_comm_shrink on sim, whose ranks live in this process.
 *
 * argv: threads | unsupported.
 *   threads      4 ranks are threads. Each runs an allreduce; rank VICTIM's
 *                second one fails by sim's fault injection ([sim] fail_rank,
 *                fail_op, fail_after) and its thread ends there, never to
 *                call plexus again: a rank lost mid-run. The survivors'
 *                second allreduce must fail (it waits for the victim until
 *                the operation's timeout), then each calls plx_comm_shrink:
 *                the new communicator must hold 3 ranks, numbered as
 *                before, and an allreduce on it must be right. Then it
 *                grows back to 4 with a newcomer thread (plx_comm_join),
 *                which must be rank 3, and an allreduce must be right on
 *                all four.
 *   unsupported  2 ranks are coroutines of one thread (plexus_sim_run_ranks):
 *                there the survivors' agreement would block the only thread,
 *                so shrink and grow must refuse with PLX_ERR_UNSUPPORTED
 *                naming sim and coroutines, and the communicator must go on
 *                working. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define RANKS 4
#define VICTIM 3
#define TIMEOUT_MS 10000 /* the survivors' failed allreduce waits this long for the victim */
#define COUNT 4096
#define BOUND_S 60.0 /* seconds from the failure to every survivor's result, on a loaded 2-core machine */

struct shared {
    int failures;
    int shrunk; /* atomic: survivors back from shrink, about to grow */
    double failed_at[RANKS];
    char log[RANKS][1024];
};

static int check_sum(struct plx_comm *c, int members, char *log, size_t cap, int *failures, const char *what)
{
    float *in = malloc(COUNT * sizeof *in), *out = malloc(COUNT * sizeof *out); /* not static: coroutines share a thread */
    int rank = plx_comm_rank(c);
    if (!in || !out) {
        free(in);
        free(out);
        return PLX_ERR_NOMEM;
    }
    for (int i = 0; i < COUNT; i++)
        in[i] = (float)(rank + 1 + i % 7);
    int rc = plx_allreduce(c, in, out, COUNT, PLX_F32, PLX_SUM);
    for (int i = 0; rc == 0 && i < COUNT; i++) {
        float want = (float)(members * (members + 1) / 2 + members * (i % 7));
        if (out[i] != want) {
            procs_report(log, cap, failures, "rank %d: %s: element %d is %g, not %g\n", rank, what, i, out[i], want);
            break;
        }
    }
    free(in);
    free(out);
    return rc;
}

/* The shrunk communicator grows back to RANKS with a newcomer thread that
 * joins through the same in-process store; old ranks keep their numbers. */
static void grow_back(struct shared *sh, int rank, struct plx_comm *n)
{
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    __atomic_add_fetch(&sh->shrunk, 1, __ATOMIC_RELEASE);
    struct plx_comm *g = NULL;
    int rc = plx_comm_grow(n, RANKS, &g);
    printf("rank %d: plx_comm_grow: %s%s%s\n", rank, plx_err_name(rc), rc ? ": " : "", rc ? plx_last_error() : "");
    if (rc != 0 || !g) {
        procs_report(log, cap, &sh->failures, "rank %d: grow: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
        return;
    }
    if (plx_comm_size(g) != RANKS || plx_comm_rank(g) != rank)
        procs_report(log, cap, &sh->failures, "rank %d: grown to rank %d of %d\n", rank, plx_comm_rank(g),
                     plx_comm_size(g));
    else if ((rc = check_sum(g, RANKS, log, cap, &sh->failures, "allreduce after grow")) != 0)
        procs_report(log, cap, &sh->failures, "rank %d: allreduce after grow: %s: %s\n", rank, plx_err_name(rc),
                     plx_last_error());
    plx_comm_destroy(g);
}

static void *newcomer(void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[VICTIM];
    size_t cap = sizeof sh->log[0];
    double until = now_s() + BOUND_S;
    while (__atomic_load_n(&sh->shrunk, __ATOMIC_ACQUIRE) < RANKS - 1 && now_s() < until)
        usleep(1000);
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = "mem://shrink-sim-threads";
    o.timeout_ms = TIMEOUT_MS;
    struct plx_comm *g = NULL;
    int rc = plx_comm_join(&o, &g);
    printf("newcomer: plx_comm_join: %s, rank %d of %d\n", plx_err_name(rc), rc ? -1 : plx_comm_rank(g),
           rc ? -1 : plx_comm_size(g));
    if (rc != 0) {
        procs_report(log, cap, &sh->failures, "newcomer: join: %s: %s\n", plx_err_name(rc), plx_last_error());
        return NULL;
    }
    if (plx_comm_size(g) != RANKS || plx_comm_rank(g) != VICTIM)
        procs_report(log, cap, &sh->failures, "newcomer: rank %d of %d, expected %d of %d\n", plx_comm_rank(g),
                     plx_comm_size(g), VICTIM, RANKS);
    else if ((rc = check_sum(g, RANKS, log, cap, &sh->failures, "newcomer's allreduce")) != 0)
        procs_report(log, cap, &sh->failures, "newcomer: allreduce: %s: %s\n", plx_err_name(rc), plx_last_error());
    plx_comm_destroy(g);
    return NULL;
}

static void survivor(struct shared *sh, int rank, struct plx_comm *c)
{
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    int rc = check_sum(c, RANKS, log, cap, &sh->failures, "second allreduce");
    sh->failed_at[rank] = now_s();
    if (rc == 0) {
        procs_report(log, cap, &sh->failures, "rank %d: the allreduce without rank %d succeeded\n", rank, VICTIM);
        return;
    }
    printf("rank %d: allreduce without the victim: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
    struct plx_comm *n = NULL;
    double t0 = now_s();
    rc = plx_comm_shrink(c, &n);
    printf("rank %d: plx_comm_shrink: %s in %.2f s%s%s\n", rank, plx_err_name(rc), now_s() - t0, rc ? ": " : "",
           rc ? plx_last_error() : "");
    if (rc != 0 || !n) {
        procs_report(log, cap, &sh->failures, "rank %d: shrink: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
        return;
    }
    if (plx_comm_size(n) != RANKS - 1 || plx_comm_rank(n) != rank)
        procs_report(log, cap, &sh->failures, "rank %d: shrunk to rank %d of %d, expected %d of %d\n", rank,
                     plx_comm_rank(n), plx_comm_size(n), rank, RANKS - 1);
    else if ((rc = check_sum(n, RANKS - 1, log, cap, &sh->failures, "allreduce after shrink")) != 0)
        procs_report(log, cap, &sh->failures, "rank %d: allreduce after shrink: %s: %s\n", rank, plx_err_name(rc),
                     plx_last_error());
    else
        grow_back(sh, rank, n);
    if (now_s() - sh->failed_at[rank] > BOUND_S)
        procs_report(log, cap, &sh->failures, "rank %d: shrink and allreduce took %.1f s\n", rank,
                     now_s() - sh->failed_at[rank]);
    plx_comm_destroy(n);
}

static struct shared sh_;

static void *thread_rank(void *arg)
{
    int rank = (int)(intptr_t)arg;
    struct shared *sh = &sh_;
    const char *ov[] = {"sim.fail_rank=3", "sim.fail_op=allreduce", "sim.fail_after=2", "core.shrink_wait_ms=1000",
                        NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = "mem://shrink-sim-threads";
    o.rank = rank;
    o.size = RANKS;
    o.timeout_ms = TIMEOUT_MS;
    o.overrides = ov;
    struct plx_comm *c = NULL;
    if (plx_comm_init(&o, &c) != 0) {
        procs_report(sh->log[rank], sizeof sh->log[0], &sh->failures, "rank %d: init: %s\n", rank, plx_last_error());
        return NULL;
    }
    int rc = check_sum(c, RANKS, sh->log[rank], sizeof sh->log[0], &sh->failures, "first allreduce");
    if (rc != 0)
        procs_report(sh->log[rank], sizeof sh->log[0], &sh->failures, "rank %d: first allreduce: %s: %s\n", rank,
                     plx_err_name(rc), plx_last_error());
    else if (rank != VICTIM)
        survivor(sh, rank, c);
    else if ((rc = check_sum(c, RANKS, sh->log[rank], sizeof sh->log[0], &sh->failures, "victim")) == 0 ||
             !strstr(plx_last_error(), "injected failure"))
        procs_report(sh->log[rank], sizeof sh->log[0], &sh->failures, "rank %d: the injected failure did not "
                     "happen: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
    else
        return c; /* lost: the main thread destroys its communicator after the survivors are done */
    plx_comm_destroy(c);
    return NULL;
}

static int threads(void)
{
    pthread_t t[RANKS], late;
    if (pthread_create(&late, NULL, newcomer, &sh_) != 0) {
        printf("FAIL: pthread_create\n");
        return 1;
    }
    for (int r = 0; r < RANKS; r++)
        if (pthread_create(&t[r], NULL, thread_rank, (void *)(intptr_t)r) != 0) {
            printf("FAIL: pthread_create\n");
            return 1;
        }
    void *lost[RANKS];
    for (int r = 0; r < RANKS; r++)
        pthread_join(t[r], &lost[r]);
    pthread_join(late, NULL);
    for (int r = 0; r < RANKS; r++)
        if (lost[r])
            plx_comm_destroy(lost[r]);
    for (int r = 0; r < RANKS; r++)
        fputs(sh_.log[r], stdout);
    printf("%s: %d failure(s)\n", sh_.failures ? "FAIL" : "PASS", sh_.failures);
    return sh_.failures ? 1 : 0;
}

static void expect_refusal(const char *what, int rc, struct plx_comm *n, char *log, size_t cap, int *failures)
{
    printf("%s: %s: %s\n", what, plx_err_name(rc), plx_last_error());
    if (rc != PLX_ERR_UNSUPPORTED || !strstr(plx_last_error(), "sim") || !strstr(plx_last_error(), "coroutine") ||
        n)
        procs_report(log, cap, failures, "%s: expected PLX_ERR_UNSUPPORTED naming sim and coroutines, no "
                     "communicator\n", what);
}

static void fiber_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = "mem://shrink-sim-fibers";
    o.rank = rank;
    o.size = 2;
    o.timeout_ms = 20000;
    struct plx_comm *c = NULL, *n = (struct plx_comm *)1;
    if (plx_comm_init(&o, &c) != 0) {
        procs_report(log, cap, &sh->failures, "rank %d: init: %s\n", rank, plx_last_error());
        return;
    }
    int rc = plx_comm_shrink(c, &n); /* before n is read: argument order is unspecified */
    expect_refusal("plx_comm_shrink", rc, n, log, cap, &sh->failures);
    n = (struct plx_comm *)1;
    rc = plx_comm_grow(c, 3, &n);
    expect_refusal("plx_comm_grow", rc, n, log, cap, &sh->failures);
    rc = check_sum(c, 2, log, cap, &sh->failures, "allreduce after the refusals");
    if (rc != 0)
        procs_report(log, cap, &sh->failures, "rank %d: the communicator is not usable after the refusals: %s\n",
                     rank, plx_err_name(rc));
    plx_comm_destroy(c);
}

static int unsupported(void)
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
    int rc = run(2, (size_t)1 << 20, fiber_rank, &sh_);
    if (rc != 0)
        procs_report(sh_.log[0], sizeof sh_.log[0], &sh_.failures, "plexus_sim_run_ranks: %s\n", plx_err_name(rc));
    for (int r = 0; r < 2; r++)
        fputs(sh_.log[r], stdout);
    printf("%s: %d failure(s)\n", sh_.failures ? "FAIL" : "PASS", sh_.failures);
    return sh_.failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && !strcmp(argv[1], "threads"))
        return threads();
    if (argc == 2 && !strcmp(argv[1], "unsupported"))
        return unsupported();
    fprintf(stderr, "usage: %s threads | unsupported\n", argv[0]);
    return 2;
}
