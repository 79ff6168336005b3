/* kill_loop.c - a tcp rank SIGKILLed at a random point, over and over.
 *
 * Each iteration forks 4 rank processes on loopback (tcp backend, a tcp://
 * store hosted by rank 0; kill_rank.c holds what a rank runs). One random rank,
 * the victim, SIGKILLs itself from a timer thread at a random delay into one
 * phase, the phases taken in turn: rendezvous (plx_comm_init), collective
 * (allreduces of random size and dtype, results checked), split
 * (plx_comm_split), destroy (plx_comm_destroy). The delay is uniform over
 * the phase's length, measured by a first run in which nobody dies and
 * updated whenever a phase ends before the timer; then the victim dies at
 * its end, and the summary counts those kills apart.
 * Every survivor must then:
 *   - exit by itself before the iteration's deadline (no hang), not by a
 *     signal (no crash);
 *   - if an operation failed: fail within timeout + margin of the kill (or
 *     of starting that operation, if later), with a message naming the dead
 *     rank; further work on the failed communicator must be refused at once
 *     with a clear message;
 *   - create a new communicator with the other survivors (a fresh store) and
 *     run a checked allreduce on it.
 * A survivor that finished its program before the kill could matter (only
 * possible when the victim dies in destroy, after the last collective) reports
 * no error and is counted as such; anywhere else no error is a failure.
 *
 * Usage: kill_loop [ITERATIONS (default 50) [ONLY]]: with ONLY, just that
 * iteration runs (same victim, phase and delay). PLEXUS_FAULTS_SEED=N changes
 * the seed (the default is fixed and printed), PLEXUS_FAULTS_VERBOSE=1 prints
 * every survivor's error, and PLEXUS_FAULTS_NAMES=report counts errors that do not name the dead rank
 * without failing on them. Exit 0 only if every (enforced) check held. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kill.h"
#include "plexus/plexus.h"
#include "procs.h"

#define TIMEOUT_MS 3000
#define MARGIN_S 3.0 /* a loaded 2-core machine runs late, never by seconds more */

static const char *const phase_names[] = {"start", "rendezvous", "collective", "split", "child", "barrier",
                                          "destroy", "recovery", "done"};

const char *kill_phase_name(int ph)
{
    return ph >= 0 && ph <= PH_DONE ? phase_names[ph] : "?";
}

/* Does msg name rank d ("rank 2", "rank(s) 1, 2")? */
static int names_rank(const char *msg, int d)
{
    for (const char *p = msg; (p = strstr(p, "rank")); ) {
        p += 4;
        if (!strncmp(p, "(s)", 3))
            p += 3;
        while (*p == ' ')
            p++;
        for (;;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            if (v == d)
                return 1;
            p = end;
            if (p[0] != ',' || p[1] != ' ')
                break;
            p += 2;
        }
    }
    return 0;
}

static int enforce_names;

struct totals {
    int kills[PH_DONE + 1][2]; /* [phase][at end] */
    int survivors, errors, named, late, completed, missed, hangs, crashes, exits_bad, wrong;
    int refused_ok, refuse_checks, recovered, harness;
    double worst_latency;
};

/* Judge one iteration; returns the number of failed checks. */
static int judge(int it, const struct kill_iter *k, const struct procs *p, struct totals *t, int verbose)
{
    const struct kill_report *v = &k->sh->r[k->victim];
    int bad = 0;
    int died = WIFSIGNALED(p->status[k->victim]) && WTERMSIG(p->status[k->victim]) == SIGKILL && !p->hung[k->victim];
    if (!died) {
        printf("iter %d: the victim (rank %d) did not die by SIGKILL: %s, last phase %s\n", it, k->victim,
               procs_describe(p, k->victim), kill_phase_name(v->phase));
        t->harness++;
        bad++;
    } else {
        t->kills[v->killed_phase][v->killed_at_end]++;
    }
    printf("iter %2d: rank %d killed in %s %.1f ms after it began%s:", it, k->victim, kill_phase_name(v->killed_phase),
           (v->kill_s - v->phase_s) * 1e3, v->killed_at_end ? " (its end)" : "");
    for (int r = 0; r < KILL_RANKS; r++) {
        if (r == k->victim)
            continue;
        const struct kill_report *s = &k->sh->r[r];
        t->survivors++;
        int st = p->status[r];
        if (p->hung[r]) {
            t->hangs++;
            bad++;
            printf(" [%d HUNG in %s]", r, kill_phase_name(s->phase));
            continue;
        }
        if (WIFSIGNALED(st)) {
            t->crashes++;
            bad++;
            printf(" [%d CRASHED: %s in %s]", r, procs_describe(p, r), kill_phase_name(s->phase));
            continue;
        }
        if (WEXITSTATUS(st) != 0) {
            t->exits_bad++;
            bad++;
            printf(" [%d %s]", r, procs_describe(p, r));
        }
        if (s->wrong) {
            t->wrong++;
            bad++;
            printf(" [%d WRONG RESULT]", r);
        }
        if (s->err_rc) {
            t->errors++;
            /* From the kill, or from when this rank began the operation that
             * failed if that was later (a slow start is not a slow error). */
            double since = s->err_phase_s > v->kill_s ? s->err_phase_s : v->kill_s;
            double lat = s->err_s - since;
            if (lat > t->worst_latency)
                t->worst_latency = lat;
            int named = names_rank(s->err_msg, k->victim);
            t->named += named;
            int late = died && lat > TIMEOUT_MS / 1000.0 + MARGIN_S;
            t->late += late;
            bad += (enforce_names && !named) + late;
            printf(" [%d %s in %s %.0f ms%s%s]", r, plx_err_name(s->err_rc), kill_phase_name(s->err_phase),
                   lat * 1e3, named ? "" : " NOT NAMING THE DEAD RANK", late ? " LATE" : "");
            if (!named || verbose)
                printf("\n      rank %d: %s", r, s->err_msg);
            if (s->refuse_checked) {
                t->refuse_checks++;
                int ok = s->refuse_rc != 0 && s->refuse_ms < 1000 &&
                         (strstr(s->refuse_msg, "unusable after an earlier error") ||
                          strstr(s->refuse_msg, "aborted") || names_rank(s->refuse_msg, k->victim));
                t->refused_ok += ok;
                bad += !ok;
                if (!ok || verbose)
                    printf("\n      rank %d, new work afterwards: %s (%.0f ms): %s%s", r, plx_err_name(s->refuse_rc),
                           s->refuse_ms, s->refuse_msg, ok ? "" : "  <- NOT A CLEAR REFUSAL");
            }
        } else if (s->finished) {
            /* Only a kill in destroy comes after this rank's last collective. */
            if (v->killed_phase == PH_DESTROY) {
                t->completed++;
                printf(" [%d completed]", r);
            } else {
                t->missed++;
                bad++;
                printf(" [%d NO ERROR although rank %d died in %s]", r, k->victim, kill_phase_name(v->killed_phase));
            }
        }
        if (s->recover_rc == 0 && s->phase == PH_DONE) {
            t->recovered++;
        } else {
            bad++;
            printf("\n      rank %d: NO NEW COMMUNICATOR: %s", r, s->recover_msg[0] ? s->recover_msg : "(not reached)");
        }
    }
    printf("%s\n", bad ? "  FAILED" : "");
    return bad;
}

/* One run in which nobody dies: the longest time any rank spent in each
 * phase. Returns 0, or 1 if that run failed (then nothing else can pass). */
static int calibrate(struct kill_shared *sh, double *len_ms)
{
    struct kill_iter k = {.sh = sh, .seed = 1, .victim = -1, .kill_phase = -1, .timeout_ms = TIMEOUT_MS,
                          .port = free_port()};
    struct procs p;
    memset(sh, 0, sizeof *sh);
    if (k.port < 0 || procs_start(&p, KILL_RANKS, kill_rank_main, &k) != 0)
        return 1;
    procs_wait(&p, now_s() + 2 * TIMEOUT_MS / 1000.0 + 15);
    for (int ph = 0; ph <= PH_DONE; ph++)
        len_ms[ph] = 0;
    for (int r = 0; r < KILL_RANKS; r++) {
        if (p.hung[r] || !WIFEXITED(p.status[r]) || WEXITSTATUS(p.status[r])) {
            printf("calibration run (nobody killed): rank %d: %s\n", r, procs_describe(&p, r));
            return 1;
        }
        for (int ph = 0; ph <= PH_DONE; ph++)
            if (sh->r[r].phase_ms[ph] > len_ms[ph])
                len_ms[ph] = sh->r[r].phase_ms[ph];
    }
    return 0;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 50;
    const char *se = getenv("PLEXUS_FAULTS_SEED");
    uint64_t seed = se && *se ? strtoull(se, NULL, 0) : 20261122;
    int verbose = env_flag("PLEXUS_FAULTS_VERBOSE");
    const char *ne = getenv("PLEXUS_FAULTS_NAMES");
    enforce_names = !(ne && !strcmp(ne, "report"));
    int only = argc > 2 ? atoi(argv[2]) : -1;
    struct kill_shared *sh = shared_alloc(sizeof *sh);
    if (!sh || iters < 1) {
        fprintf(stderr, "usage: kill_loop [ITERATIONS]; cannot map shared memory or bad count\n");
        return 2;
    }
    static const int points[] = {PH_INIT, PH_COLL, PH_SPLIT, PH_DESTROY}; /* the kill phases, in turn */
    const int npoints = (int)(sizeof points / sizeof points[0]);
    printf("kill loop: seed %" PRIu64 " (PLEXUS_FAULTS_SEED), %d iterations, %d tcp ranks, timeout %d ms\n", seed,
           iters, KILL_RANKS, TIMEOUT_MS);
    double len_ms[PH_DONE + 1];
    if (calibrate(sh, len_ms) != 0)
        return 1;
    printf("phase lengths without a kill:");
    for (int i = 0; i < npoints; i++)
        printf(" %s %.1f ms", kill_phase_name(points[i]), len_ms[points[i]]);
    printf("\n");
    fflush(stdout);
    struct totals t = {0};
    int failed_iters = 0, ran = 0;
    double t0 = now_s();
    uint64_t s = seed;
    for (int it = 0; it < iters; it++) {
        memset(sh, 0, sizeof *sh);
        struct kill_iter k = {.sh = sh, .seed = splitmix(&s), .timeout_ms = TIMEOUT_MS};
        k.victim = (int)(splitmix(&s) % KILL_RANKS);
        k.kill_phase = points[it % npoints];
        k.delay_s = len_ms[k.kill_phase] / 1e3 * (double)(splitmix(&s) % 1000000) / 1e6;
        if (only >= 0 && it != only)
            continue;
        k.port = free_port();
        k.port2 = free_port();
        if (k.port < 0 || k.port2 < 0 || k.port == k.port2) {
            printf("iter %d: no free port\n", it);
            return 1;
        }
        struct procs p;
        if (procs_start(&p, KILL_RANKS, kill_rank_main, &k) != 0)
            return 1;
        /* Worst legitimate case: a survivor waits one timeout for a rank that
         * failed after the kill, and the recovery rendezvous waits for it. */
        procs_wait(&p, now_s() + 6 * TIMEOUT_MS / 1000.0 + 15);
        failed_iters += judge(it, &k, &p, &t, verbose) != 0;
        const struct kill_report *v = &sh->r[k.victim];
        if (v->killed_at_end) /* the phase ran shorter than thought (the load changed): follow it */
            len_ms[k.kill_phase] = 0.5 * len_ms[k.kill_phase] + 0.5 * (v->kill_s - v->phase_s) * 1e3;
        ran++;
        fflush(stdout);
    }
    printf("\nkill loop summary (seed %" PRIu64 ", %.0f s)\n", seed, now_s() - t0);
    printf("  iterations: %d, %d failed\n", ran, failed_iters);
    printf("  kill points hit (inside / at its end):");
    for (int i = 0; i < npoints; i++)
        printf(" %s %d/%d", kill_phase_name(points[i]), t.kills[points[i]][0], t.kills[points[i]][1]);
    printf("\n  survivors: %d; returned an error: %d, naming the dead rank: %d%s; finished before the kill mattered: %d;"
           " no error although they should: %d\n", t.survivors, t.errors, t.named,
           enforce_names ? "" : " (counted, not enforced: PLEXUS_FAULTS_NAMES=report)", t.completed, t.missed);
    printf("  slowest error after the kill: %.0f ms (limit %d ms + %.0f s); late: %d\n", t.worst_latency * 1e3,
           TIMEOUT_MS, MARGIN_S, t.late);
    printf("  failed communicator refused new work clearly: %d/%d; new communicator afterwards: %d/%d\n",
           t.refused_ok, t.refuse_checks, t.recovered, t.survivors);
    printf("  hangs: %d, crashes: %d, bad exits: %d, wrong results: %d, harness errors: %d\n", t.hangs, t.crashes,
           t.exits_bad, t.wrong, t.harness);
    printf("%s\n", failed_iters ? "FAILED" : "ok");
    return failed_iters != 0;
}
