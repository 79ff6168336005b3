/* shrink.c - plx_comm_shrink after kill -9: 4 tcp processes run 1 MiB
 * allreduces in a loop; the harness SIGKILLs one or two of them, the
 * survivors' allreduce fails (within seconds of the kill, not at the
 * timeout), they call plx_comm_shrink, and the new
 * communicator must hold exactly the survivors (the same list, in the old
 * order, on every survivor), and an allreduce on it must be right.
 *
 * argv: kill1 | kill2 (both at once) | during (one in the collective, a
 * second one while it is in the agreement, which a third survivor keeps
 * open by coming SLOW_S late: the backends' lost-ranks hint ends it at once
 * otherwise; that late survivor must still be in the set) | loop (PLEXUS_SHRINK_ROUNDS
 * rounds of those, random victims and delays, default 10) | unsupported
 * BACKEND (shrink and grow refuse with PLX_ERR_UNSUPPORTED naming it) |
 * store-host (rank 0, which hosts the job's store, dies: shrink cannot
 * work without the store, and must fail saying so, not hang) | hint, hint2
 * (kill1, kill2 with [core] shrink_wait_ms at 60 s: every survivor's shrink
 * must return within HINT_BOUND_S, which only the backend's lost-ranks hint
 * allows: without it the agreement waits the 60 s for the dead) | hier,
 * hier-flat (backend shm+tcp, ranks 0-1 and 2-3 modelled as two hosts by
 * [core] host_identity: hier loses the whole second host, and the two
 * survivors' communicator is composed again; hier-flat loses rank 3, and
 * hosts of 2 and 1 make it flat, as plx_comm_init would). Rank 0 is
 * otherwise never a victim. Each round must
 * end (every survivor back from shrink with the right result) well within
 * the bound; a hang is killed at the deadline and fails the test. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plexus/plexus.h"
#include "procs.h"

#define RANKS 4
#define TIMEOUT_MS 30000
#define COUNT (256u * 1024u) /* 1 MiB of f32 */
#define ROUND_BOUND_S 90.0
#define DETECT_BOUND_S 10.0 /* kill -9 to every survivor's error: seconds on a loaded 2-core machine, not the 30 s timeout */
#define HINT_WAIT_MS "60000" /* [core] shrink_wait_ms in the hint rounds */
#define HINT_BOUND_S 20.0     /* a shrink there: seconds of a loaded machine, a third of that wait */

#define SLOW_S 1.0             /* how late the slow survivor of a during round enters shrink */

static double shrink_bound_s;
static int two_hosts;         /* ranks 0-1 and 2-3 are two modelled hosts */ /* > 0: every survivor's shrink must take at most this */

static const char *backend = "tcp";

struct shared {
    int port;
    const char *backend;     /* tcp, or argv[2] */
    int store_lost;          /* rank 0, the store's host, is the victim: shrink must fail, not hang */
    int slow_rank;           /* a survivor that enters shrink SLOW_S late, or -1 */
    volatile int in_loop[RANKS];
    volatile double in_shrink[RANKS];
    int old_rc[RANKS];
    int shrink_rc[RANKS];
    double shrink_s[RANKS];
    double shrink_end[RANKS]; /* now_s() when shrink returned */
    double killed_a, killed_b; /* now_s() when the first / second victim was killed */
    double broke_at[RANKS];   /* now_s() when the old communicator failed here */
    int new_size[RANKS];
    int alive[RANKS][RANKS]; /* the old ranks of the new communicator, as each survivor sees it */
    int failures;
    char log[RANKS][2048];
};

/* Allreduce on n: each contributes (old + 1) * (i % 7 + 1); the sum is known from the list. */
static int check_new(struct shared *sh, int rank, struct plx_comm *n)
{
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    int size = plx_comm_size(n), mine = rank;
    sh->new_size[rank] = size;
    int rc = plx_allgather(n, &mine, sh->alive[rank], 1, PLX_I32);
    if (rc != 0) {
        procs_report(log, cap, &sh->failures, "rank %d: allgather on the shrunk comm: %s\n", rank, plx_last_error());
        return 1;
    }
    float *in = malloc(COUNT * sizeof *in), *out = malloc(COUNT * sizeof *out);
    if (!in || !out)
        return 1;
    double base = 0;
    for (int i = 0; i < size; i++)
        base += sh->alive[rank][i] + 1;
    for (size_t i = 0; i < COUNT; i++)
        in[i] = (float)((rank + 1) * (int)(i % 7 + 1));
    rc = plx_allreduce(n, in, out, COUNT, PLX_F32, PLX_SUM);
    int wrong = 0;
    for (size_t i = 0; rc == 0 && i < COUNT && !wrong; i++)
        wrong = out[i] != (float)(base * (double)(i % 7 + 1));
    if (rc != 0 || wrong)
        procs_report(log, cap, &sh->failures, "rank %d: allreduce on the shrunk comm: %s %s\n", rank,
                     plx_err_name(rc), rc ? plx_last_error() : "wrong values");
    free(in);
    free(out);
    return rc != 0 || wrong;
}

/* Allreduce until the communicator breaks under us. */
static int run_until_broken(struct shared *sh, int rank, struct plx_comm *c)
{
    float *in = calloc(COUNT, sizeof *in), *out = calloc(COUNT, sizeof *out);
    if (!in || !out)
        return PLX_ERR_NOMEM;
    for (size_t i = 0; i < COUNT; i++)
        in[i] = 1;
    int rc = 0;
    double until = now_s() + 120;
    sh->in_loop[rank] = 1;
    while (rc == 0 && now_s() < until) {
        rc = plx_allreduce(c, in, out, COUNT, PLX_F32, PLX_SUM);
        if (rc == 0 && out[COUNT - 1] != RANKS)
            procs_report(sh->log[rank], sizeof sh->log[0], &sh->failures, "rank %d: allreduce wrong\n", rank);
    }
    free(in);
    free(out);
    return rc;
}

static int run_rank(int rank, void *arg)
{
    struct shared *sh = arg;
    char *log = sh->log[rank];
    size_t cap = sizeof sh->log[0];
    struct plx_comm *c = NULL, *n = NULL;
    if (two_hosts)
        setenv("PLEXUS_CORE_HOST_IDENTITY", rank < RANKS / 2 ? "host-a" : "host-b", 1);
    if (procs_open(rank, RANKS, sh->port, sh->backend, TIMEOUT_MS, log, cap, &sh->failures, &c) != 0)
        return 1;
    int rc = run_until_broken(sh, rank, c);
    sh->broke_at[rank] = now_s();
    sh->old_rc[rank] = rc;
    procs_report(log, cap, NULL, "rank %d: old comm: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
    if (rank == sh->slow_rank)
        usleep((useconds_t)(SLOW_S * 1e6));
    double t0 = now_s();
    sh->in_shrink[rank] = t0;
    rc = plx_comm_shrink(c, &n);
    sh->shrink_rc[rank] = rc;
    sh->shrink_end[rank] = now_s();
    sh->shrink_s[rank] = sh->shrink_end[rank] - t0;
    procs_report(log, cap, rc && !sh->store_lost ? &sh->failures : NULL, "rank %d: shrink: %s in %.2f s %s\n", rank,
                 plx_err_name(rc), sh->shrink_s[rank], rc ? plx_last_error() : "");
    if (sh->store_lost) {
        if (rc == 0 || !strstr(plx_last_error(), "store"))
            procs_report(log, cap, &sh->failures, "rank %d: shrink without the store's host: %s, not an error "
                         "naming the store\n", rank, plx_err_name(rc));
        plx_comm_destroy(c);
        return 0;
    }
    int bad = rc != 0 || check_new(sh, rank, n);
    plx_comm_destroy(n);
    plx_comm_destroy(c);
    return bad;
}

/* SIGKILL rank v once every rank is in the loop (after a short while). */
static void kill_in_loop(struct procs *p, struct shared *sh, int v, int delay_ms)
{
    double until = now_s() + 60;
    for (int r = 0; r < RANKS; r++)
        while (!sh->in_loop[r] && now_s() < until)
            usleep(1000);
    usleep((useconds_t)delay_ms * 1000);
    sh->killed_a = now_s();
    kill(p->pid[v], SIGKILL);
}

/* SIGKILL rank v some time after it entered plx_comm_shrink: in the agreement,
 * which waits [core] shrink_wait_ms for the rank that died first. */
static void kill_in_shrink(struct procs *p, struct shared *sh, int v, int delay_ms)
{
    double until = now_s() + 60;
    while (!sh->in_shrink[v] && now_s() < until)
        usleep(1000);
    usleep((useconds_t)delay_ms * 1000);
    sh->killed_b = now_s();
    kill(p->pid[v], SIGKILL);
}

/* The second victim must have died while the survivors were agreeing:
 * after one of them entered plx_comm_shrink, before any returned. */
static int killed_during(const struct shared *sh, int a, int b)
{
    double first_in = 1e300, first_out = 1e300;
    for (int r = 0; r < RANKS; r++)
        if (r != a && r != b) {
            first_in = sh->in_shrink[r] < first_in ? sh->in_shrink[r] : first_in;
            first_out = sh->shrink_end[r] < first_out ? sh->shrink_end[r] : first_out;
        }
    printf("second victim killed %.2f s after the first survivor entered shrink, %.2f s before the first returned\n",
           sh->killed_b - first_in, first_out - sh->killed_b);
    return sh->killed_b > first_in && sh->killed_b < first_out;
}

/* One job: victims a (in the collective) and b (-1: none; in the collective
 * too, or in the agreement if during). 0 if everything held. */
static int one_round(const char *what, int a, int b, int during, int delay_ms)
{
    struct shared *sh = shared_alloc(sizeof *sh);
    if (!sh || (sh->port = free_port()) < 0)
        return 1;
    sh->store_lost = a == 0;
    sh->backend = backend;
    sh->slow_rank = -1;
    for (int r = 1; during && r < RANKS; r++)
        if (r != a && r != b)
            sh->slow_rank = r;
    struct procs p;
    double t0 = now_s();
    if (procs_start(&p, RANKS, run_rank, sh) != 0)
        return 1;
    kill_in_loop(&p, sh, a, delay_ms);
    if (b >= 0 && !during)
        kill(p.pid[b], SIGKILL);
    if (b >= 0 && during)
        kill_in_shrink(&p, sh, b, 200 + delay_ms);
    procs_wait(&p, t0 + ROUND_BOUND_S);
    int bad = 0, expect[RANKS], n = 0;
    for (int r = 0; r < RANKS; r++)
        if (r != a && r != b)
            expect[n++] = r;
    for (int r = 0; r < RANKS; r++) {
        fputs(sh->log[r], stdout);
        int victim = r == a || r == b;
        if (victim && !(WIFSIGNALED(p.status[r]) && WTERMSIG(p.status[r]) == SIGKILL))
            bad = printf("rank %d (victim): %s, not killed\n", r, procs_describe(&p, r));
        if (!victim && (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])))
            bad = printf("rank %d: %s\n", r, procs_describe(&p, r));
        if (!victim && sh->broke_at[r] - sh->killed_a > DETECT_BOUND_S)
            bad = printf("rank %d: its collective failed %.2f s after the kill (bound %.0f s)\n", r,
                         sh->broke_at[r] - sh->killed_a, DETECT_BOUND_S);
        if (!victim && sh->old_rc[r] == 0)
            bad = printf("rank %d: its collectives never failed\n", r);
        if (!victim && shrink_bound_s > 0 && !sh->shrink_rc[r] && sh->shrink_s[r] > shrink_bound_s)
            bad = printf("rank %d: shrink took %.2f s (bound %.0f s, [core] shrink_wait_ms %s ms): it waited for "
                         "a rank another survivor saw die\n", r, sh->shrink_s[r], shrink_bound_s, HINT_WAIT_MS);
        if (victim || sh->shrink_rc[r] || sh->store_lost)
            continue;
        if (sh->new_size[r] != n || memcmp(sh->alive[r], expect, sizeof(int) * (size_t)n))
            bad = printf("rank %d: the shrunk comm holds %d ranks (%d %d %d %d), expected %d without %d, %d\n", r,
                         sh->new_size[r], sh->alive[r][0], sh->alive[r][1], sh->alive[r][2], sh->alive[r][3], n, a, b);
    }
    double detect = 0;
    for (int r = 0; r < RANKS; r++)
        if (r != a && r != b && sh->broke_at[r] - sh->killed_a > detect)
            detect = sh->broke_at[r] - sh->killed_a;
    printf("every survivor's collective failed within %.3f s of the kill\n", detect);
    if (during && !killed_during(sh, a, b))
        bad = printf("the second victim was not killed during the agreement: this round tests nothing\n");
    printf("%s (victims %d, %d; delay %d ms): %s in %.1f s\n", what, a, b, delay_ms,
           bad || sh->failures ? "FAIL" : "ok", now_s() - t0);
    return bad || sh->failures;
}

static int unsupported(const char *backend)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.init = !strcmp(backend, "sim") ? "mem://shrink-unsupported" : NULL;
    o.backend = backend;
    o.rank = 0;
    o.size = 1;
    o.timeout_ms = 10000;
    struct plx_comm *c = NULL, *n = (struct plx_comm *)1;
    if (plx_comm_init(&o, &c) != 0) {
        printf("SKIP: %s: %s\n", backend, plx_last_error());
        return 77;
    }
    int bad = 0, rc = plx_comm_shrink(c, &n);
    printf("%s: plx_comm_shrink: %s: %s\n", backend, plx_err_name(rc), plx_last_error());
    if (rc != PLX_ERR_UNSUPPORTED || !strstr(plx_last_error(), backend) || n)
        bad = printf("FAIL: expected PLX_ERR_UNSUPPORTED naming %s and no communicator\n", backend);
    rc = plx_comm_grow(c, 2, &n);
    printf("%s: plx_comm_grow: %s: %s\n", backend, plx_err_name(rc), plx_last_error());
    if (rc != PLX_ERR_UNSUPPORTED || !strstr(plx_last_error(), backend) || n)
        bad = printf("FAIL: expected PLX_ERR_UNSUPPORTED naming %s and no communicator\n", backend);
    float x = 1, y = 0;
    if ((rc = plx_allreduce(c, &x, &y, 1, PLX_F32, PLX_SUM)) != 0 || y != 1)
        bad = printf("FAIL: the communicator is not usable after the refusals: %s\n", plx_err_name(rc));
    if (plx_comm_shrink(NULL, &n) != PLX_ERR_INVALID_ARG)
        bad = printf("FAIL: plx_comm_shrink(NULL) is not PLX_ERR_INVALID_ARG\n");
    plx_comm_destroy(c);
    return bad ? 1 : 0;
}

static int loop(void)
{
    const char *env = getenv("PLEXUS_SHRINK_ROUNDS");
    int rounds = env ? atoi(env) : 10, bad = 0;
    srand(12345);
    for (int i = 0; i < rounds && !bad; i++) {
        int kind = i % 3, a = 1 + rand() % 3, b = 1 + (a + rand() % 2) % 3, delay = rand() % 300;
        bad = one_round(kind == 0 ? "kill1" : kind == 1 ? "kill2" : "during", a, kind ? b : -1, kind == 2, delay);
    }
    printf("%s: %d rounds\n", bad ? "FAIL" : "ok", rounds);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && !strcmp(argv[1], "unsupported"))
        return unsupported(argv[2]);
    if (argc == 3)
        backend = argv[2];
    if (argc > 3)
        argc = 0;
    if (argc >= 2 && !strcmp(argv[1], "kill1"))
        return one_round("kill1", 2, -1, 0, 100);
    if (argc >= 2 && !strcmp(argv[1], "kill2"))
        return one_round("kill2", 1, 3, 0, 100);
    if (argc >= 2 && !strcmp(argv[1], "during"))
        return one_round("during", 3, 1, 1, 100);
    if (argc >= 2 && !strcmp(argv[1], "store-host"))
        return one_round("store-host", 0, -1, 0, 100);
    if (argc >= 2 && (!strcmp(argv[1], "hint") || !strcmp(argv[1], "hint2"))) {
        setenv("PLEXUS_CORE_SHRINK_WAIT_MS", HINT_WAIT_MS, 1);
        shrink_bound_s = HINT_BOUND_S;
        return strcmp(argv[1], "hint") ? one_round("hint2", 1, 3, 0, 100) : one_round("hint", 2, -1, 0, 100);
    }
    if (argc >= 2 && (!strcmp(argv[1], "hier") || !strcmp(argv[1], "hier-flat"))) {
        backend = "shm+tcp";
        two_hosts = 1;
        return strcmp(argv[1], "hier") ? one_round("hier-flat", 3, -1, 0, 100) : one_round("hier", 2, 3, 0, 100);
    }
    if (argc >= 2 && !strcmp(argv[1], "loop"))
        return loop();
    fprintf(stderr, "usage: %s kill1|kill2|during|store-host|hint|hint2|hier|hier-flat|loop [BACKEND, default tcp] | unsupported BACKEND\n", argv[0]);
    return 2;
}
