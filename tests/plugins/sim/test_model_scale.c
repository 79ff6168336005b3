/* The sim network model at scale in timing-only mode
 * (sim.model_payload=false: messages carry sizes and virtual times, no
 * bytes, and the core skips its reductions), against the closed-form
 * alpha-beta costs of the core's generic algorithms (at a power of two, and
 * the tree and halving-doubling at others too) with
 * one host and no injection limit (no contention). Ranks are coroutines of
 * one thread (the plugin's plexus_sim_run_ranks), run in virtual-time
 * order. Every rank passes the same send and receive buffers: reserved, never
 * written beyond a message's first bytes, so a 1 GiB buffer costs no memory.
 * The program prints the wall time and the peak memory of each run.
 *
 *   test_model_scale              1,024 ranks: each algorithm against its formula
 *   test_model_scale P ALGO N     one allreduce of N bytes at P ranks, printed
 *   test_model_scale sweep P [S]  an allreduce sweep 1 GiB down to 8 B at P ranks,
 *                                 each size 2^S times the next (S = 1: every power of two) */
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "plexus/plexus.h"
#include "sim_fibers.h"

static int failures;
static double (*model_clock)(void);
static int (*run_ranks)(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg), void *arg);

#define ALPHA_NS 2000.0
static double beta_ns; /* 1G per second, as the key reads it: 2^30 bytes */

/* Each rank's stack: the core's set-up (the first rank also loads the
 * plugins) needs tens of KiB; untouched pages cost nothing. */
#define RANK_STACK ((size_t)256 << 10)
#define SWEEP_MIN 8
#define SWEEP_MAX ((size_t)1 << 30)
#define SWEEP_SIZES 28 /* 1 GiB, 512 MiB, ... 8 B at most */

struct job {
    int coll;
    size_t counts[SWEEP_SIZES]; /* i32 elements of each op (per rank for allgather, reduce-scatter) */
    int nops;
    const char *const *overrides;
    const char *const *extra; /* more [sim] or [core] keys, NULL-terminated (NULL: none) */
    char init[64];
    int size;
    void *in, *out;    /* shared by every rank */
    double *end_ns;    /* [op * size + rank]: the rank's modelled clock after op */
    int failed;
};

static void rank_body(int rank, void *arg)
{
    struct job *j = arg;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.rank = rank;
    o.size = j->size;
    o.init = j->init;
    o.overrides = j->overrides;
    o.timeout_ms = 600000;
    struct plx_comm *comm = NULL;
    int rc = plx_comm_init(&o, &comm);
    for (int k = 0; k < j->nops && !rc; k++) {
        size_t n = j->counts[k];
        rc = j->coll == PLX_COLL_ALLGATHER        ? plx_allgather(comm, j->in, j->out, n, PLX_I32)
             : j->coll == PLX_COLL_REDUCE_SCATTER ? plx_reduce_scatter(comm, j->in, j->out, n, PLX_I32, PLX_SUM)
                                                  : plx_allreduce(comm, j->in, j->out, n, PLX_I32, PLX_SUM);
        j->end_ns[(size_t)k * (size_t)j->size + (size_t)rank] = model_clock();
    }
    if (rc && !j->failed++)
        fprintf(stderr, "rank %d: %s\n", rank, plx_last_error());
    plx_comm_destroy(comm);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss >> 10;
}

/* Runs j's ops on P coroutine ranks; times[k]: the modelled time of op k
 * (the latest rank's clock after it, less the latest after the op before).
 * Returns 0, or -1 on failure. */
static int run(struct job *j, const char *algo, double *times, double *wall_s)
{
    static int counter;
    char algo_kv[64];
    snprintf(algo_kv, sizeof algo_kv, "core.allreduce_algo=%s", algo);
    /* No ledger files: each rank would scan the folder of all the others.
     * No fingerprint: its header is not in the formulas. One segment per
     * step: the formulas count one message per step. */
    const char *ov[16] = {"core.ledger_entries=0", "core.fingerprint=false", "core.segment_bytes=2G",
                          "sim.model=true", "sim.model_payload=false", "sim.model_intra_latency=2us",
                          "sim.model_intra_bandwidth=1G", algo_kv};
    for (size_t i = 0, at = 8; j->extra && j->extra[i] && at + 1 < sizeof ov / sizeof *ov; i++)
        ov[at++] = j->extra[i]; /* later keys win */
    j->overrides = ov;
    snprintf(j->init, sizeof j->init, "mem://scale-%d", ++counter);
    size_t max_n = 0;
    for (int k = 0; k < j->nops; k++)
        max_n = j->counts[k] > max_n ? j->counts[k] : max_n;
    size_t bytes = max_n * 4 * (j->coll == PLX_COLL_ALLREDUCE ? 1 : (size_t)j->size) + 4096;
    j->in = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    j->out = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    j->end_ns = calloc((size_t)j->nops * (size_t)j->size, sizeof(double));
    j->failed = 0;
    if (j->in == MAP_FAILED || j->out == MAP_FAILED || !j->end_ns) {
        fprintf(stderr, "cannot reserve %zu bytes of buffers\n", bytes);
        exit(1);
    }
    double t0 = now_s();
    int rc = run_ranks(j->size, RANK_STACK, rank_body, j);
    *wall_s = now_s() - t0;
    double prev = 0;
    for (int k = 0; k < j->nops; k++) {
        double last = 0;
        for (int r = 0; r < j->size; r++) {
            double t = j->end_ns[(size_t)k * (size_t)j->size + (size_t)r];
            last = t > last ? t : last;
        }
        times[k] = last - prev;
        prev = last;
    }
    munmap(j->in, bytes);
    munmap(j->out, bytes);
    free(j->end_ns);
    if (rc)
        fprintf(stderr, "the ranks did not finish: error %d\n", rc);
    return rc || j->failed ? -1 : 0;
}

static int log2i(int p)
{
    int l = 0;
    while ((1 << (l + 1)) <= p)
        l++;
    return l;
}

static double max2(double x, double y)
{
    return x > y ? x : y;
}

/* The binomial tree on P ranks, P not a power of two: the root's children
 * are complete subtrees of 1, 2, .. 2^(L-2) ranks and the ranks from
 * 2^(L-1) on, a binomial tree of P' = P - 2^(L-1) (L = ceil(log2 P)).
 * Reduce: a complete subtree of 2^j ranks is done at j (a + n b); the root
 * takes its children in that order, and the last one's message, sent while
 * the root's link still carried the others', queues there behind them (nb). */
static double tree_reduce_ns(int P, double a, double nb)
{
    if (P <= 1)
        return 0;
    int L = log2i(P - 1) + 1, top = 1 << (L - 1);
    return max2(tree_reduce_ns(P - top, a, nb) + a + nb, (L - 1) * (a + nb) + (L > 1 ? nb : 0));
}

/* Broadcast: the root sends to its children one after another through its
 * link, the largest subtree (the P' ranks) first; the complete subtree of
 * 2^j ranks gets it at (L - j) n b + a and needs j (a + n b) more. */
static double tree_bcast_ns(int P, double a, double nb)
{
    if (P <= 1)
        return 0;
    int L = log2i(P - 1) + 1, top = 1 << (L - 1);
    return max2(a + nb + tree_bcast_ns(P - top, a, nb), (L - 1) * a + L * nb);
}

/* Closed forms, one segment per message; n bytes per rank (allreduce), per
 * block (allgather, reduce-scatter). Recursive doubling at a power of two
 * P = 2^L; tree and halving-doubling at any P. */
static double formula(const char *algo, int coll, int P, double n)
{
    double L = log2i(P), a = ALPHA_NS, b = beta_ns;
    int p2 = 1 << log2i(P);
    if (coll == PLX_COLL_ALLGATHER || coll == PLX_COLL_REDUCE_SCATTER) /* P - 1 ring steps of one block */
        return (P - 1) * (a + n * b);
    if (!strcmp(algo, "recdbl")) /* L exchanges of the whole buffer */
        return L * (a + n * b);
    if (!strcmp(algo, "tree")) /* binomial reduce then broadcast: each L(a + n b) at P = 2^L */
        return tree_reduce_ns(P, a, n * b) + tree_bcast_ns(P, a, n * b);
    /* Halving then doubling on p2 = 2^L ranks: blocks n/2 .. n/p2. Else
     * first each of the first 2(P - p2) even ranks hands its whole buffer
     * to the odd one above, which takes part in its place and hands the
     * result back at the end: 2 (a + n b) more. A partner that did not fold
     * sent its first block to a folding rank meanwhile, off the critical path. */
    if (!strcmp(algo, "rabenseifner"))
        return 2 * L * a + 2.0 * (p2 - 1) / p2 * n * b + (p2 != P ? 2 * (a + n * b) : 0);
    return 2.0 * (P - 1) * a + 2.0 * (P - 1) / P * n * b; /* ring */
}

static const char *coll_name(int coll)
{
    return coll == PLX_COLL_ALLGATHER ? "allgather" : coll == PLX_COLL_REDUCE_SCATTER ? "reduce_scatter" : "allreduce";
}

static int report(const char *algo, int coll, int P, double n, double got, double want)
{
    double err = fabs(got - want) / want;
    int ok = got > 0 && err <= 0.02;
    printf("%s %-14s %-12s P=%-5d bytes=%-10.0f model %14.0f ns formula %14.0f ns (%.2f%%)\n", ok ? "ok  " : "FAIL",
           coll_name(coll), algo, P, n, got, want, 100 * err);
    if (!ok)
        failures++;
    return ok;
}

static void check(int P, const char *algo, int coll, size_t count)
{
    struct job j = {.coll = coll, .counts = {count}, .nops = 1, .size = P};
    double t, wall;
    if (run(&j, algo, &t, &wall) != 0)
        t = -1;
    report(algo, coll, P, (double)count * 4, t, formula(algo, coll, P, (double)count * 4));
    printf("     wall %.2f s, peak RSS %ld MiB\n", wall, peak_rss_mib());
    fflush(stdout);
}

/* The allreduce a user gets at each size from 8 B to 1 GiB (the core's
 * automatic choice: recursive doubling up to 64 KiB, halving-doubling
 * above), each size against its formula. Largest first: each rank's
 * scratch is then made once, not grown (remapped) at every size. */
static void sweep(int P, int shift)
{
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .size = P};
    for (size_t n = SWEEP_MAX; n >= SWEEP_MIN && j.nops < SWEEP_SIZES; n >>= shift)
        j.counts[j.nops++] = n / 4;
    double t[SWEEP_SIZES], wall;
    int rc = run(&j, "auto", t, &wall);
    for (int k = 0; k < j.nops; k++) {
        double n = (double)j.counts[k] * 4;
        const char *algo = n <= 64 * 1024 || j.counts[k] < (size_t)P ? "recdbl" : "rabenseifner";
        report(algo, PLX_COLL_ALLREDUCE, P, n, rc ? -1 : t[k], formula(algo, PLX_COLL_ALLREDUCE, P, n));
    }
    printf("sweep of %d allreduces %zu B - 1 GiB at P=%d: wall %.2f s, peak RSS %ld MiB\n", j.nops,
           j.counts[j.nops - 1] * 4, P, wall, peak_rss_mib());
    fflush(stdout);
}

/* Four hosts of two ranks, fast within a host, a slow NIC each: a large
 * allreduce takes what the bytes each NIC must carry take on it, and
 * little more. The ring's neighbours share a host but one on each host, so
 * one flow leaves a host: 2 (P-1)/P n. Halving-doubling halves within the
 * host first, so only the smaller halves cross, both ranks' at once:
 * 2 n (1 - ranks per host / P), and a step's two flows one after the
 * other on the NIC leave gaps between the steps (one message per step
 * here), hence up to a fifth more is allowed. Halving from the farthest
 * partner first put twice the bytes on each NIC. */
static void check_nic_bound(const char *algo, double nic_bytes_per_n)
{
    const char *const extra[] = {"sim.model_intra_bandwidth=64G", "sim.model_inter_latency=2us",
                                 "sim.model_inter_bandwidth=128M", "sim.model_ranks_per_host=2", NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .counts = {(size_t)2 << 20}, .nops = 1, .size = 8, .extra = extra};
    double got, wall, want = nic_bytes_per_n * 4.0 * (double)j.counts[0] * 1e9 / (double)(128 << 20);
    int ok = run(&j, algo, &got, &wall) == 0 && got >= want * 0.99 && got <= want * 1.20;
    printf("%s allreduce %-12s 8 MiB, 4 hosts x 2 ranks, slow NICs: model %.0f ns, the NICs' bytes %.0f ns (%+.2f%%)\n",
           ok ? "ok  " : "FAIL", algo, got, want, 100 * (got - want) / want);
    if (!ok)
        failures++;
}

/* Two hosts of one rank emulated on a machine of one core
 * (model_machine_cores): the ranks share that core, so the exchange's
 * latency and its bytes, which the kernel copies across the emulated link
 * as it would within a host, take twice as long as on a core each
 * (2 alpha + 2 n beta), however fast the NICs. */
static void check_machine_cores(void)
{
    const char *const extra[] = {"sim.model_inter_latency=2us", "sim.model_inter_bandwidth=64G",
                                 "sim.model_ranks_per_host=1", "sim.model_machine_cores=1", NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .counts = {(size_t)256 << 10}, .nops = 1, .size = 2, .extra = extra};
    double got, wall, want = 2 * ALPHA_NS + 2 * 4.0 * (double)j.counts[0] * beta_ns;
    int ok = run(&j, "recdbl", &got, &wall) == 0 && fabs(got - want) <= 0.02 * want;
    printf("%s allreduce recdbl       1 MiB, 2 hosts on one core: model %.0f ns, formula %.0f ns (%+.2f%%)\n",
           ok ? "ok  " : "FAIL", got, want, 100 * (got - want) / want);
    if (!ok)
        failures++;
}

/* Eight ranks on hosts emulated on a machine of two cores, waits that give
 * the cores up: each message is the kernel's work on those cores for its
 * link's whole latency (across hosts or loopback within one, both alpha
 * here) and for its copies (n beta, as within a host), so a round of
 * halving-doubling's eight messages takes the machine 8 (alpha + n beta) /
 * 2 cores, not one alpha and its share of the copies as on machines of
 * their own; three rounds 12 (alpha + n beta), and a little more where a
 * round waits for its last message. At 8 B the latency is all of it; at
 * 20 KiB, n beta about alpha, the copies as much again. */
static void check_machine_messages(const char *ranks_per_host, size_t count)
{
    const char *const extra[] = {"sim.model_inter_latency=20us", "sim.model_intra_latency=20us",
                                 "sim.model_inter_bandwidth=64G", ranks_per_host, "sim.model_machine_cores=2",
                                 "sim.model_yielding_waits=true", NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .counts = {count}, .nops = 1, .size = 8, .extra = extra};
    double got, wall, want = 3 * 8 * (20000.0 + 4.0 * (double)count * beta_ns) / 2;
    int ok = run(&j, "recdbl", &got, &wall) == 0 && got >= 0.99 * want && got <= 1.10 * want;
    printf("%s allreduce recdbl  %6zu B, 8 ranks on two cores (%s): model %.0f ns, the cores' work %.0f ns "
           "(%+.2f%%)\n", ok ? "ok  " : "FAIL", 4 * count, ranks_per_host, got, want, 100 * (got - want) / want);
    if (!ok)
        failures++;
}

/* The same eight ranks on two cores, each message also waking its
 * receiver (model_wake_cpu): that wake-up is core time too, queued on the
 * machine's cores with the message's own. A receiver is off the cores
 * 1 - cores/ranks of the time, so a round of eight messages takes the
 * machine 8 (alpha + 3/4 wake) / 2, three rounds 12 (alpha + 3/4 wake),
 * where a wake-up priced into each message's latency instead, as on a
 * host of its own (ranks/cores - 1 of it: 3 wake), would give the
 * critical path 3 (alpha + 3 wake) and leave the cores' queue the longer. */
static void check_machine_wakes(void)
{
    const char *const extra[] = {"sim.model_inter_latency=20us", "sim.model_intra_latency=20us",
                                 "sim.model_inter_bandwidth=64G", "sim.model_ranks_per_host=2",
                                 "sim.model_machine_cores=2", "sim.model_yielding_waits=true",
                                 "sim.model_wake_cpu=8us", NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .counts = {2}, .nops = 1, .size = 8, .extra = extra};
    double got, wall, want = 3 * 8 * (20000.0 + 0.75 * 8000.0 + 8.0 * beta_ns) / 2;
    int ok = run(&j, "recdbl", &got, &wall) == 0 && got >= 0.99 * want && got <= 1.10 * want;
    printf("%s allreduce recdbl       8 B, 8 ranks on two cores, 8 us wake-ups: model %.0f ns, the cores' work "
           "%.0f ns (%+.2f%%)\n", ok ? "ok  " : "FAIL", got, want, 100 * (got - want) / want);
    if (!ok)
        failures++;
}

/* Two hosts of one rank whose NICs are token buckets of two messages'
 * bytes (model_inter_burst: tc tbf's burst): from idle, the first two
 * exchanges pass at once (alpha each), and the third waits for the tokens
 * its message lacks, which refill at the NIC's rate: all three end at
 * alpha + n beta, where a plain queue at the rate takes 3 (alpha + n beta). */
static void check_nic_burst(void)
{
    const char *const extra[] = {"sim.model_inter_latency=2us", "sim.model_inter_bandwidth=128M",
                                 "sim.model_inter_burst=128K", "sim.model_ranks_per_host=1", NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .counts = {16384, 16384, 16384}, .nops = 3, .size = 2, .extra = extra};
    double got[3], wall, nbeta = 65536.0 * 1e9 / (double)(128 << 20), want = ALPHA_NS + nbeta;
    int ok = run(&j, "recdbl", got, &wall) == 0 && fabs(got[0] - ALPHA_NS) <= 0.02 * ALPHA_NS &&
             fabs(got[0] + got[1] + got[2] - want) <= 0.02 * want;
    printf("%s allreduce recdbl  3 x 64 KiB, 2 hosts, 128 KiB NIC bursts: model %.0f ns (the first %.0f), "
           "formula %.0f ns (%+.2f%%)\n", ok ? "ok  " : "FAIL", got[0] + got[1] + got[2], got[0], want,
           100 * (got[0] + got[1] + got[2] - want) / want);
    if (!ok)
        failures++;
}

int main(int argc, char **argv)
{
    beta_ns = 1e9 / (double)(1 << 30);
    /* A fixed threshold: glibc raises it past each large block freed (the
     * set-up frees some), and then every rank's scratch, grown by realloc,
     * comes from the heap, copied (touched) at each growth: gigabytes at
     * thousands of ranks, where mappings stay untouched but for a
     * message's first bytes. */
    mallopt(M_MMAP_THRESHOLD, 64 << 10);
    struct sim_fibers f;
    if (sim_fibers_load(&f) != 0)
        return 1;
    model_clock = f.model_clock;
    run_ranks = f.run_ranks;
    if (argc == 4 && strcmp(argv[1], "sweep")) {
        int P = atoi(argv[1]);
        size_t bytes = strtoull(argv[3], NULL, 0);
        check(P, argv[2], PLX_COLL_ALLREDUCE, bytes / 4 ? bytes / 4 : 1);
        return failures ? 1 : 0;
    }
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "sweep")) {
        int shift = argc == 4 ? atoi(argv[3]) : 1;
        sweep(atoi(argv[2]), shift >= 1 && shift <= 8 ? shift : 1);
        return failures ? 1 : 0;
    }
    check_machine_cores();
    check_nic_burst();
    check_machine_messages("sim.model_ranks_per_host=1", 2);
    check_machine_messages("sim.model_ranks_per_host=2", 2);
    check_machine_messages("sim.model_ranks_per_host=1", 5120);
    check_machine_messages("sim.model_ranks_per_host=2", 5120);
    check_machine_wakes();
    check_nic_bound("ring", 2.0 * 7 / 8);
    check_nic_bound("rabenseifner", 2.0 * (1 - 2.0 / 8));
    const int P = 1024;
    check(P, "rabenseifner", PLX_COLL_ALLREDUCE, 1024 * 16);
    check(P, "recdbl", PLX_COLL_ALLREDUCE, 1024);
    check(P, "tree", PLX_COLL_ALLREDUCE, 1024);
    check(P, "ring", PLX_COLL_ALLREDUCE, 1024 * 16);
    check(P, "ring", PLX_COLL_ALLGATHER, 16);
    check(P, "ring", PLX_COLL_REDUCE_SCATTER, 16);
    /* Non-powers of two: the tree's short subtrees, halving-doubling's fold. */
    static const int odd[] = {5, 6, 12, 1000};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        check(odd[i], "tree", PLX_COLL_ALLREDUCE, 1024);
        check(odd[i], "rabenseifner", PLX_COLL_ALLREDUCE, 1024 * 16);
    }
    return failures ? 1 : 0;
}
