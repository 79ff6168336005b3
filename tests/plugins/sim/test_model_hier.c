/* The core's hierarchical allreduce over the sim network model of 16 hosts
 * x 8 ranks, against the flat ring on the same model and against the
 * closed forms of both. Backend sim+sim: the communicator and its cross-host
 * steps run on one sim world, the intra-host steps on another; each rank
 * says which host it counts as ([core] host_identity), and the model places
 * ranks 8h .. 8h+7 on host h. Ranks are coroutines (plexus_sim_run_ranks),
 * so a rank's virtual clock carries from its intra to its cross steps.
 * Every algorithm is the ring (one segment per step), in timing-only mode;
 * one run with data checks every element of the hierarchical result.
 *
 * The formulas, with L = 8 ranks per host, H = 16 hosts, P = 128, n bytes:
 *   hierarchical  intra reduce-scatter, cross allreduce of n/L, intra allgather:
 *                 2(L-1)(a_i + n/L b_i) + 2(H-1)(a_e + n/H b_e)
 *                 where the L cross rings of a host queue at its NIC in every
 *                 step (n/H through it per step), down to
 *                 2(L-1)(a_i + n/L b_i) + 2(H-1)(a_e + n/(LH) b_e)
 *                 where they never do; the model lies between the two, near
 *                 the first where bandwidth dominates
 *   flat ring     2(P-1) steps; a step waits for the one before on the
 *                 previous rank, so the latency is that of a chain of
 *                 2(P-1) hops of which 2(H-1)+2 cross a host boundary, and
 *                 the rank before each boundary sends all its 2(P-1)
 *                 messages through the NIC:
 *                 max(2H (a_e + n/P b_e) + (2(P-1)-2H)(a_i + n/P b_i),
 *                     2(P-1) n/P b_e + a_e)
 *
 *   test_model_hier          the checks
 *   test_model_hier BYTES    both at one size, printed */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"
#include "sim_fibers.h"

#define HOSTS 16
#define LOCAL 8
#define RANKS (HOSTS * LOCAL)
#define A_INTRA 1000.0 /* ns */
#define A_INTER 5000.0
#define GIB 1073741824.0

static int failures;
static double (*model_clock)(void);
static int (*run_ranks)(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg), void *arg);
static const double b_intra = 1e9 / (100 * GIB), b_inter = 1e9 / (12 * GIB); /* ns per byte */

struct job {
    int hier, payload;
    size_t count; /* i32 elements */
    char init[64];
    double start_ns[RANKS], end_ns[RANKS];
    int failed, wrong;
};

static int32_t val(int rank, size_t i)
{
    return (int32_t)(i % 89) + 3 * rank + 1;
}

static void rank_body(int rank, void *arg)
{
    struct job *j = arg;
    char host[64], payload[64];
    snprintf(host, sizeof host, "core.host_identity=h%d", rank / LOCAL);
    snprintf(payload, sizeof payload, "sim.model_payload=%s", j->payload ? "true" : "false");
    const char *ov[] = {"core.ledger_entries=0", "core.fingerprint=false", "core.segment_bytes=2G",
                        "core.allreduce_algo=ring", "sim.model=true", "sim.model_ranks_per_host=8",
                        "sim.model_intra_latency=1us", "sim.model_intra_bandwidth=100G",
                        "sim.model_inter_latency=5us", "sim.model_inter_bandwidth=12G", payload, host, NULL};
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = j->hier ? "sim+sim" : "sim";
    o.rank = rank;
    o.size = RANKS;
    o.init = j->init;
    o.overrides = ov;
    o.timeout_ms = 300000;
    struct plx_comm *comm = NULL;
    int32_t *in = calloc(j->count, 4), *out = calloc(j->count, 4);
    int rc = in && out ? plx_comm_init(&o, &comm) : PLX_ERR_NOMEM;
    if (!rc && j->payload)
        for (size_t i = 0; i < j->count; i++)
            in[i] = val(rank, i);
    /* The hierarchy's set-up ran collectives on the world: time from here. */
    double t0 = model_clock();
    if (!rc)
        rc = plx_allreduce(comm, in, out, j->count, PLX_I32, PLX_SUM);
    j->start_ns[rank] = t0;
    j->end_ns[rank] = model_clock();
    if (rc && !j->failed++)
        fprintf(stderr, "rank %d: %s\n", rank, plx_last_error());
    for (size_t i = 0; !rc && j->payload && i < j->count; i++) {
        int64_t want = 0;
        for (int r = 0; r < RANKS; r++)
            want += val(r, i);
        if (out[i] != (int32_t)want) {
            j->wrong++;
            break;
        }
    }
    free(in);
    free(out);
    plx_comm_destroy(comm);
}

/* The modelled time of one allreduce, -1 on failure. */
static double run(int hier, int payload, size_t bytes)
{
    static int counter;
    static struct job j;
    memset(&j, 0, sizeof j);
    j.hier = hier;
    j.payload = payload;
    j.count = bytes / 4;
    snprintf(j.init, sizeof j.init, "mem://hier-%d", ++counter);
    int rc = run_ranks(RANKS, (size_t)256 << 10, rank_body, &j);
    double t0 = 0, t = 0; /* from the last rank's start to the last rank's end */
    for (int r = 0; r < RANKS; r++) {
        t0 = j.start_ns[r] > t0 ? j.start_ns[r] : t0;
        t = j.end_ns[r] > t ? j.end_ns[r] : t;
    }
    t -= t0;
    if (j.wrong)
        fprintf(stderr, "%d rank(s) got a wrong sum from the %s allreduce\n", j.wrong, hier ? "hierarchical" : "flat");
    return rc || j.failed || j.wrong ? -1 : t;
}

/* queued: the cross rings of a host queue at its NIC in every step. */
static double hier_formula(double n, int queued)
{
    double cross_step = A_INTER + (queued ? n / HOSTS : n / (HOSTS * LOCAL)) * b_inter;
    return 2 * (LOCAL - 1) * (A_INTRA + n / LOCAL * b_intra) + 2 * (HOSTS - 1) * cross_step;
}

static double flat_formula(double n)
{
    double m = n / RANKS, hops = 2 * (RANKS - 1);
    double chain = 2 * HOSTS * (A_INTER + m * b_inter) + (hops - 2 * HOSTS) * (A_INTRA + m * b_intra);
    double nic = hops * m * b_inter + A_INTER;
    return chain > nic ? chain : nic;
}

static int within(double got, double want, double tol)
{
    return got > 0 && fabs(got - want) <= tol * want;
}

/* Both at n bytes; returns hierarchical / flat. */
static double compare(size_t n)
{
    double h = run(1, 0, n), f = run(0, 0, n), ff = flat_formula((double)n);
    double hi = hier_formula((double)n, 1), lo = hier_formula((double)n, 0);
    int ok = h >= lo * 0.999 && h <= hi * 1.001 && within(f, ff, 0.02);
    printf("%s %10zu B  hierarchical %12.0f ns (formulas %12.0f .. %12.0f)  flat ring %12.0f ns (formula %12.0f, "
           "%+.2f%%)  hier/flat %.3f\n",
           ok ? "ok  " : "FAIL", n, h, lo, hi, f, ff, 100 * (f - ff) / ff, h / f);
    fflush(stdout);
    if (!ok)
        failures++;
    return h / f;
}

int main(int argc, char **argv)
{
    struct sim_fibers f;
    if (sim_fibers_load(&f) != 0)
        return 1;
    model_clock = f.model_clock;
    run_ranks = f.run_ranks;
    if (argc == 2) {
        compare(strtoull(argv[1], NULL, 0));
        return failures ? 1 : 0;
    }
    /* The data: every element of the hierarchical sum, on the model. */
    if (run(1, 1, 4096) < 0) {
        printf("FAIL hierarchical allreduce with data\n");
        failures++;
    } else {
        printf("ok   hierarchical allreduce with data: every element right\n");
    }
    /* Small: the hierarchy's 2(H-1) NIC latencies against the flat ring's
     * chain; large: both move about 2n through each NIC. */
    double small = compare(1024);
    compare(64 << 10);
    compare(16 << 20);
    double large = compare((size_t)256 << 20);
    if (!(small < 0.6)) {
        printf("FAIL the hierarchy does not beat the flat ring at 1 KiB (%.3f)\n", small);
        failures++;
    }
    if (!(fabs(large - 1) < 0.1)) {
        printf("FAIL the hierarchy does not match the flat ring at 256 MiB (%.3f)\n", large);
        failures++;
    }
    return failures ? 1 : 0;
}
