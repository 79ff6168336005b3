/* The sim network model against closed-form alpha-beta costs of the core's
 * generic algorithms, derived from their schedules in core/algo, with one
 * host and no injection limit (no contention): each step's messages cost
 * alpha + beta * bytes, a ring step of the reduce-scatter sends its block in
 * segments and posts segment k + 1 only after receiving segment k, so it
 * costs nseg * alpha + block * beta. The data is real: every element is
 * checked as well. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranks.h"

static int failures;
static double (*model_clock)(void);

#define ALPHA_NS 2000.0
/* The latency the formulas use: ALPHA_NS, or the wake-up while pricing each message's. */
static double alpha_ns = ALPHA_NS;
static double beta_ns; /* 1G per second, as the key reads it: 2^30 bytes */
/* Reduction cost per byte (sim.model_reduce_bandwidth=2G), 0: off. A rank
 * reduces a received block before it sends what depends on it, so each
 * reduction on the critical path adds its bytes * gamma. */
static double gamma_ns;
/* sim.model_cores_per_host (0: unlimited). With P ranks on one host of
 * cores < P, fair sharing gives each rank cores/P of a core all along, so
 * every cost above (latency, copy, reduction: all CPU work of the host's
 * ranks) takes P/cores times as long, and so does the whole op. */
static int cores;
/* sim.model_yielding_waits: a waiting rank gives its core up, so only the
 * copies and reductions (beta, gamma) take P/cores as long, not alpha. */
static int yielding;
/* sim.model_wake_latency (ns, 0: off): with P ranks on cores < P, a
 * receiver is off the cores (P - cores) / P of the time, and a message that
 * finds it so waits for it to be woken and switched in: every message on the
 * critical path adds wake (P - cores) / P, unshared, so the formula's alpha
 * count (its messages) times that. */
static double wake_ns;
/* sim.model_wake_cpu (ns, 0: off): that wake-up's core time, shared by the
 * P ranks on the cores like all their work: P/cores times it, times the
 * same chance, so every message on the critical path adds wake_cpu
 * (P - cores) / cores, which grows with P where wake_ns's share does not. */
static double wake_cpu_ns;
/* sim.model_intra_cache and model_intra_memory_bandwidth (0: off): a
 * message's bytes beyond cache_bytes cost mem_ns each more, so every
 * message of m bytes costs alpha + m beta + (m - cache)+ mem; a segmented
 * ring step pays it per segment, so segments under the cache pay nothing. */
static double cache_bytes, mem_ns;
/* sim.model_host_cache and model_host_memory_bandwidth (0: off): every byte
 * a message copies costs host_mem_ns more times the share of the host's
 * set beyond host_cache_bytes, the set being the operation's buffers on
 * each of its ranks (the core tells sim: ABI 1.9's op_footprint; run()'s
 * buffers are apart, so an allreduce's input and output, an allgather's
 * block and P blocks, a reduce-scatter's P blocks and block); a native
 * collective's set is its own (native_formula). */
static double host_cache_bytes, host_mem_ns;
static double host_set; /* the set of the operation formula() prices */
/* sim.model_intra_head and model_intra_head_bandwidth (0: off): the first
 * head_bytes of every copy cost head_ns each more, so a message of m bytes
 * costs min(m, head) head_ns more, each segment of a ring step too, and
 * each piece a native collective copies. */
static double head_bytes, head_ns;
/* sim.model_intra_private_cache and model_intra_private_bandwidth (0: off):
 * a byte another core wrote costs private_ns more while that core's own
 * cache still holds it: all of a message of up to private_bytes, that many
 * of a larger one; of a native collective's bytes, the share of each core's
 * part of the working set (the set over the cores in use) its cache holds. */
static double private_bytes, private_ns;
/* sim.model_intra_serial_copies: a rank's core copies its send and then its
 * receive, so an exchange step (each rank sends and receives m bytes at
 * once) ends when the later of the message (alpha + its copy) and the
 * receiver's two copies is done: max(alpha + c, 2c). Checked where ranks
 * have a core each (the formulas below take alpha's share out linearly). */
static int serial;
/* sim.model_eager_limit (bytes, 0: off): a larger message leaves once the
 * receiver's ready notice is back, alpha after the receive was posted; an
 * exchange step posts its receive with its send, so it costs alpha more. */
static double eager;
/* sim.model_rendezvous_overhead (0: off): a message above the eager limit
 * also costs its sender rdv_ns of CPU time before it goes (the ready
 * notice's handling), each segment of a pipeline too, unlike alpha. */
static double rdv_ns;
/* sim.model_intra_ack (0: off): a message whose receiver sends to another
 * rank in the same step (a ring's) costs the receiver ack_ns more, CPU work
 * (shared on a time-shared host); an exchange's reply carries the
 * acknowledgement instead (recursive doubling: nothing more). */
static double ack_ns;

struct job {
    int coll;          /* PLX_COLL_ALLREDUCE, _ALLGATHER, _REDUCE_SCATTER */
    size_t count;      /* elements of i32 (per rank for allgather, reduce-scatter) */
    double *end_ns;    /* per rank: the modelled clock after the op */
    int bad;           /* ranks with a wrong element */
};

static int32_t val(int rank, size_t i)
{
    return (int32_t)(i % 97) + 5 * rank + 1;
}

static int run(struct rank_ctx *ctx, int init_status)
{
    struct job *j = ctx->arg;
    if (init_status)
        return 1;
    int me = ctx->rank, P = ctx->size;
    size_t in_n = j->coll == PLX_COLL_REDUCE_SCATTER ? j->count * (size_t)P : j->count;
    size_t out_n = j->coll == PLX_COLL_ALLGATHER ? j->count * (size_t)P : j->count;
    int32_t *in = malloc(in_n * 4), *out = malloc(out_n * 4);
    if (!in || !out)
        return 1;
    for (size_t i = 0; i < in_n; i++)
        in[i] = val(me, i);
    int rc = j->coll == PLX_COLL_ALLREDUCE    ? plx_allreduce(ctx->comm, in, out, j->count, PLX_I32, PLX_SUM)
             : j->coll == PLX_COLL_ALLGATHER ? plx_allgather(ctx->comm, in, out, j->count, PLX_I32)
                                             : plx_reduce_scatter(ctx->comm, in, out, j->count, PLX_I32, PLX_SUM);
    j->end_ns[me] = model_clock();
    int wrong = rc != 0;
    for (size_t i = 0; i < out_n && !wrong; i++) {
        int64_t want = 0;
        if (j->coll == PLX_COLL_ALLGATHER) {
            want = val((int)(i / j->count), i % j->count);
        } else {
            size_t at = j->coll == PLX_COLL_REDUCE_SCATTER ? (size_t)me * j->count + i : i;
            for (int r = 0; r < P; r++)
                want += val(r, at);
        }
        wrong = out[i] != (int32_t)want;
    }
    if (wrong)
        __atomic_add_fetch(&j->bad, 1, __ATOMIC_RELAXED);
    free(in);
    free(out);
    return 0;
}

static int log2i(int p)
{
    int l = 0;
    while ((1 << (l + 1)) <= p)
        l++;
    return l;
}

/* The segment of a ring step (plx__seg_elems): 128 KiB at 2 ranks, else 1 MiB. */
static double seg_bytes(int P)
{
    return P == 2 ? 128 << 10 : 1 << 20;
}

static double nseg(int P, double block_bytes)
{
    return block_bytes <= 0 ? 1 : ceil(block_bytes / seg_bytes(P));
}

/* The share of a host's set of set bytes beyond its cache. */
static double host_beyond(double set)
{
    return host_mem_ns > 0 && set > host_cache_bytes ? 1 - host_cache_bytes / set : 0.0;
}

/* One message of m bytes on its link: m beta, the bytes beyond the cache, and the host's share beyond its own. */
static double xfer(double m)
{
    return m * beta_ns + (m > cache_bytes ? (m - cache_bytes) * mem_ns : 0.0) + fmin(m, head_bytes) * head_ns +
           fmin(m, private_bytes) * private_ns + (eager > 0 && m > eager ? rdv_ns : 0.0) +
           m * host_beyond(host_set) * host_mem_ns;
}

/* One exchange step of m bytes a rank (see serial). */
static double exchange(double m)
{
    double c = xfer(m), wait = eager > 0 && m > eager ? alpha_ns : 0.0;
    return wait + (serial && 2 * c > alpha_ns + c ? 2 * c : alpha_ns + c);
}

/* A segmented ring step's block: each segment a message of its own. */
static double seg_xfer(int P, double block_bytes)
{
    double seg = seg_bytes(P), whole = floor(block_bytes / seg);
    return whole * xfer(seg) + xfer(block_bytes - whole * seg);
}

/* The closed form of algo at the current alpha, beta, gamma, and its name. */
static double formula(const char *algo, int coll, int P, size_t count, const char **name_out)
{
    double n = (double)count * 4, want;
    const char *name;
    host_set = P * (coll == PLX_COLL_ALLGATHER ? n + P * n : coll == PLX_COLL_REDUCE_SCATTER ? P * n + n : 2 * n);
    if (coll == PLX_COLL_ALLGATHER) {
        /* (P-1) sendrecv steps of one block each; at P = 2 the ring is an exchange. */
        name = "allgather ring";
        want = (P - 1) * (exchange(n) + (P > 2 ? ack_ns : 0.0));
    } else if (coll == PLX_COLL_REDUCE_SCATTER) {
        /* (P-1) ring steps of one block, segmented. */
        name = "reduce_scatter ring";
        want = (P - 1) * (nseg(P, n) * alpha_ns + seg_xfer(P, n) + n * gamma_ns);
    } else if (!strcmp(algo, "ring")) {
        /* Reduce-scatter then allgather of blocks n/P: 2(P-1) alpha + 2(P-1)/P n beta
         * when a block is one segment. */
        name = "allreduce ring";
        double m = n / P;
        want = (P - 1) * (nseg(P, m) * alpha_ns + seg_xfer(P, m) + m * gamma_ns) + (P - 1) * (alpha_ns + xfer(m));
    } else if (!strcmp(algo, "tree")) {
        /* Binomial reduce to rank 0, then binomial broadcast, at a power of
         * two: each log2 P hops of the whole buffer on the critical path
         * (a parent sends to its children one after another, but the child
         * sent last has the smallest subtree, so the deepest path still
         * costs log2 P (alpha + n beta)). */
        name = "allreduce tree";
        want = 2 * log2i(P) * (alpha_ns + xfer(n)) + log2i(P) * n * gamma_ns;
        if (P == 3) /* the root hears from rank 1, then rank 2, whose message queued at its link, and
                       sends to rank 2, then rank 1, through its one link: each phase alpha + 2 n beta */
            want = 2 * (alpha_ns + 2 * xfer(n));
    } else if (!strcmp(algo, "rabenseifner")) {
        /* Recursive halving (blocks n/2, n/4 .. n/P) then recursive doubling
         * back, at a power of two, one segment per block:
         * 2 log2 P alpha + 2 (P-1)/P n beta. */
        name = "allreduce rabenseifner";
        int p2 = 1 << log2i(P);
        want = 2 * log2i(P) * alpha_ns + (p2 - 1.0) / p2 * n * gamma_ns;
        for (int k = 1; k <= log2i(P); k++) /* each block n / 2^k out and back: 2 (p2-1)/p2 n beta in all */
            want += 2 * xfer(n / (1 << k));
        if (p2 != P) /* fold the first 2(P - p2) ranks in pairs before, unfold after: a whole buffer each */
            want += 2 * (alpha_ns + xfer(n));
    } else {
        /* Recursive doubling at a power of two: log2 P exchanges of the
         * whole buffer. (Elsewhere the fold makes ranks that sent at time 0
         * queue at a folded rank's link: contention, not checked here.) */
        name = "allreduce recdbl";
        want = log2i(P) * (exchange(n) + n * gamma_ns);
    }
    *name_out = name;
    return want;
}


/* The job on P ranks of sim with overrides ov; *end_ns: the latest rank's
 * modelled clock after it (the op's time). */
static int run_timed(int P, const char **ov, struct job *j, double *end_ns)
{
    int rc = run_ranks(P, "sim", ov, 60000, run, j);
    *end_ns = 0;
    for (int r = 0; r < P; r++)
        *end_ns = j->end_ns[r] > *end_ns ? j->end_ns[r] : *end_ns;
    return rc;
}
/* The formula with alpha at alpha and every other term at 0: what a
 * message's latency alone costs on the critical path. */
static double alpha_only(const char *algo, int coll, int P, size_t count, double alpha)
{
    double saved[] = {beta_ns, gamma_ns, mem_ns, head_ns, private_ns, ack_ns, rdv_ns, host_mem_ns};
    beta_ns = gamma_ns = mem_ns = head_ns = private_ns = ack_ns = rdv_ns = host_mem_ns = 0;
    alpha_ns = alpha;
    const char *name;
    double t = formula(algo, coll, P, count, &name);
    alpha_ns = ALPHA_NS;
    beta_ns = saved[0];
    gamma_ns = saved[1];
    mem_ns = saved[2];
    head_ns = saved[3];
    private_ns = saved[4];
    ack_ns = saved[5];
    rdv_ns = saved[6];
    host_mem_ns = saved[7];
    return t;
}

static void check(const char *algo, int coll, int P, size_t count)
{
    double n = (double)count * 4;
    const char *name;
    double want = formula(algo, coll, P, count, &name);
    double share = cores > 0 && P > cores ? (double)P / cores : 1.0;
    want *= share;
    if (yielding) /* the formulas are linear in alpha, beta, gamma: take alpha's share back out */
        want -= (share - 1) * alpha_only(algo, coll, P, count, ALPHA_NS);
    if (share > 1 && wake_ns > 0) /* one wake-up per message on the critical path: alpha's count */
        want += alpha_only(algo, coll, P, count, wake_ns * (1 - 1 / share));
    if (share > 1 && wake_cpu_ns > 0) /* the wake-up's core time, shared: alpha's count again */
        want += alpha_only(algo, coll, P, count, wake_cpu_ns * (share - 1));
    char algo_kv[64], cores_kv[64], wake_kv[64], wake_cpu_kv[64], cache_kv[64], eager_kv[64], head_kv[64], private_kv[64], ack_kv[64],
        rdv_kv[64], host_kv[64];
    snprintf(host_kv, sizeof host_kv, "sim.model_host_cache=%.0f", host_cache_bytes);
    snprintf(rdv_kv, sizeof rdv_kv, "sim.model_rendezvous_overhead=%.0fns", rdv_ns);
    snprintf(ack_kv, sizeof ack_kv, "sim.model_intra_ack=%.0fns", ack_ns);
    snprintf(eager_kv, sizeof eager_kv, "sim.model_eager_limit=%.0f", eager);
    snprintf(private_kv, sizeof private_kv, "sim.model_intra_private_cache=%.0f", private_bytes);
    snprintf(head_kv, sizeof head_kv, "sim.model_intra_head=%.0f", head_bytes);
    snprintf(algo_kv, sizeof algo_kv, "core.allreduce_algo=%s", algo);
    snprintf(cores_kv, sizeof cores_kv, "sim.model_cores_per_host=%d", cores);
    snprintf(wake_kv, sizeof wake_kv, "sim.model_wake_latency=%.0fns", wake_ns);
    snprintf(wake_cpu_kv, sizeof wake_cpu_kv, "sim.model_wake_cpu=%.0fns", wake_cpu_ns);
    snprintf(cache_kv, sizeof cache_kv, "sim.model_intra_cache=%.0f", cache_bytes);
    const char *ov[] = {"sim.model=true", "sim.model_intra_latency=2us", "sim.model_intra_bandwidth=1G",
                        algo_kv, cores_kv, wake_kv, wake_cpu_kv, cache_kv,
                        mem_ns > 0 ? "sim.model_intra_memory_bandwidth=512M" : "sim.model_intra_memory_bandwidth=0",
                        yielding ? "sim.model_yielding_waits=true" : "sim.model_yielding_waits=false",
                        serial ? "sim.model_intra_serial_copies=true" : "sim.model_intra_serial_copies=false", eager_kv,
                        head_kv, head_ns > 0 ? "sim.model_intra_head_bandwidth=256M" : "sim.model_intra_head_bandwidth=0",
                        private_kv,
                        private_ns > 0 ? "sim.model_intra_private_bandwidth=128M" : "sim.model_intra_private_bandwidth=0",
                        ack_kv, rdv_ns > 0 ? rdv_kv : "sim.model=true", host_kv,
                        host_mem_ns > 0 ? "sim.model_host_memory_bandwidth=512M" : "sim.model_host_memory_bandwidth=0",
                        gamma_ns > 0 ? "sim.model_reduce_bandwidth=2G" : NULL, NULL};
    struct job j = {.coll = coll, .count = count, .end_ns = calloc((size_t)P, sizeof(double))};
    double got;
    int rc = run_timed(P, ov, &j, &got);
    double err = fabs(got - want) / want;
    int ok = rc == 0 && j.bad == 0 && err <= 0.02;
    printf("%s %-20s%s%s%s%s%s%s%s%s%s%s%s P=%-4d bytes=%-9.0f model %12.0f ns formula %12.0f ns (%.2f%%)%s\n",
           ok ? "ok  " : "FAIL", name, gamma_ns > 0 ? " +gamma" : "",
           share > 1 ? (yielding ? " shared, yielding" : " time-shared") : "", wake_ns > 0 ? " +wake" : "",
           wake_cpu_ns > 0 ? " +wake cpu" : "", mem_ns > 0 ? " +memory" : "", host_mem_ns > 0 ? " +host memory" : "", head_ns > 0 ? " +head" : "",
           private_ns > 0 ? " +private" : "",
           ack_ns > 0 ? " +ack" : "", serial ? " serial copies" : "",
           eager > 0 ? (rdv_ns > 0 ? " +rendezvous +overhead" : " +rendezvous") : "", P, n, got, want, 100 * err, j.bad ? " WRONG DATA" : "");
    if (!ok)
        failures++;
    free(j.end_ns);
}

/* Two hosts of two ranks on one core each: recursive doubling's first
 * exchange stays in the host, time-shared by two ranks (twice alpha + n
 * beta, and half a wake-up: each rank is off the core half the time), its second crosses hosts (NIC latency alpha,
 * bandwidth unlimited: no CPU, no wake-up), and each step's reduction runs
 * time-shared (twice n gamma). */
static void check_two_hosts(void)
{
    const int P = 4;
    double n = 1024 * 4;
    double want = 2 * (ALPHA_NS + xfer(n)) + wake_ns / 2 + ALPHA_NS + 2 * 2 * n * gamma_ns;
    char wake_kv[64], cache_kv[64];
    snprintf(wake_kv, sizeof wake_kv, "sim.model_wake_latency=%.0fns", wake_ns);
    snprintf(cache_kv, sizeof cache_kv, "sim.model_intra_cache=%.0f", cache_bytes);
    const char *ov[] = {"sim.model=true", "sim.model_intra_latency=2us", "sim.model_intra_bandwidth=1G",
                        "sim.model_inter_latency=2us", "sim.model_ranks_per_host=2", "sim.model_cores_per_host=1",
                        "sim.model_reduce_bandwidth=2G", "core.allreduce_algo=recdbl", wake_kv, cache_kv,
                        mem_ns > 0 ? "sim.model_intra_memory_bandwidth=512M" : "sim.model_intra_memory_bandwidth=0",
                        NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .count = 1024, .end_ns = calloc((size_t)P, sizeof(double))};
    double got;
    int rc = run_timed(P, ov, &j, &got);
    double err = fabs(got - want) / want;
    int ok = rc == 0 && j.bad == 0 && err <= 0.02;
    printf("%s allreduce recdbl 2 hosts x 2 ranks on 1 core +gamma%s%s: model %.0f ns formula %.0f ns (%.2f%%)%s\n",
           ok ? "ok  " : "FAIL", wake_ns > 0 ? " +wake" : "", mem_ns > 0 ? " +memory" : "", got, want, 100 * err, j.bad ? " WRONG DATA" : "");
    if (!ok)
        failures++;
    free(j.end_ns);
}

/* sim.model_intra_native=shm: allreduce and allgather as shm's native
 * collectives by their schedule (plugins/shm/coll.c), each rank the same.
 * A barrier costs alpha; a copied byte beta, and the memory's extra cost
 * for half the share of the host's working set (every rank's buffer, P + 1
 * blocks for an allgather, and the slots in use) beyond the host's cache
 * and half that of the round's set (P slots of a round, and each rank's
 * round of its buffer in and out: 3 P rounds; an allgather's in and P out:
 * P (P + 2)); a reduction gamma per byte. Allreduce up to
 * 16 KiB: its input in, a barrier, then every input reduced into its
 * output (a copy and P - 1 reductions). Above, per round of 1 MiB (len L):
 * the other P - 1 slices of L / P in, a barrier, its own slice reduced (a
 * copy, P - 1 reductions, a copy out), a barrier, the P - 1 reduced slices
 * out. Allgather per round of up to 1 MiB of each block: its block in, a
 * barrier, all P blocks out. Time-shared (P > cores): every cost above
 * times P / cores, a barrier's alpha too (shm spins), plus per barrier one
 * wake-up for each round of switching the P - cores ranks off the cores
 * back in, cores at a time: ceil((P - cores) / cores). */
static double native_formula(int coll, int P, double bytes)
{
    double share = cores > 0 && P > cores ? (double)P / cores : 1.0;
    double wakes = share > 1 ? ceil((double)(P - cores) / cores) : 0;
    double barrier = share * alpha_ns + wakes * wake_ns, t = 0;
    int gather = coll == PLX_COLL_ALLGATHER;
    double round = fmin(bytes, 1 << 20), working_set = P * (gather ? (P + 1) * bytes : bytes) + 2.0 * P * round;
    double round_set = P * round + P * (gather ? P + 1 : 2) * round;
    double per_core = working_set / (cores > 0 && P > cores ? cores : P);
    double per_byte = beta_ns + (host_beyond(working_set) + host_beyond(round_set)) / 2 * host_mem_ns +
                      (per_core <= private_bytes ? 1 : private_bytes / per_core) * private_ns;
    if (!gather && bytes <= 16 << 10)
        return barrier + share * (2 * (bytes * per_byte + fmin(bytes, head_bytes) * head_ns) +
                                  (P - 1) * bytes * gamma_ns);
    for (double off = 0; off < bytes; off += 1 << 20) {
        double len = bytes - off < (1 << 20) ? bytes - off : 1 << 20, slice = len / P;
        if (gather)
            t += barrier + share * (P + 1) * (len * per_byte + fmin(len, head_bytes) * head_ns);
        else
            t += 2 * barrier + share * (2 * P * (slice * per_byte + fmin(slice, head_bytes) * head_ns) +
                                        (P - 1) * slice * gamma_ns);
    }
    return t;
}

static void check_native(int coll, int P, size_t count)
{
    double bytes = (double)count * 4, want = native_formula(coll, P, bytes);
    char cores_kv[64], wake_kv[64], cache_kv[64], head_kv[64], private_kv[64];
    snprintf(private_kv, sizeof private_kv, "sim.model_intra_private_cache=%.0f", private_bytes);
    snprintf(cores_kv, sizeof cores_kv, "sim.model_cores_per_host=%d", cores);
    snprintf(wake_kv, sizeof wake_kv, "sim.model_wake_latency=%.0fns", wake_ns);
    snprintf(cache_kv, sizeof cache_kv, "sim.model_host_cache=%.0f", host_cache_bytes);
    snprintf(head_kv, sizeof head_kv, "sim.model_intra_head=%.0f", head_bytes);
    const char *ov[] = {"sim.model=true", "sim.model_intra_native=shm", "sim.model_intra_latency=2us",
                        "sim.model_intra_bandwidth=1G", cores_kv, wake_kv, cache_kv,
                        host_mem_ns > 0 ? "sim.model_host_memory_bandwidth=512M" : "sim.model_host_memory_bandwidth=0",
                        head_kv, head_ns > 0 ? "sim.model_intra_head_bandwidth=256M" : "sim.model_intra_head_bandwidth=0",
                        private_kv,
                        private_ns > 0 ? "sim.model_intra_private_bandwidth=128M" : "sim.model_intra_private_bandwidth=0",
                        gamma_ns > 0 ? "sim.model_reduce_bandwidth=2G" : NULL, NULL};
    struct job j = {.coll = coll, .count = count, .end_ns = calloc((size_t)P, sizeof(double))};
    double got;
    int rc = run_timed(P, ov, &j, &got);
    double err = fabs(got - want) / want;
    int ok = rc == 0 && j.bad == 0 && err <= 0.02;
    printf("%s %s shm-native%s%s%s%s%s%s P=%-4d bytes=%-9.0f model %12.0f ns formula %12.0f ns (%.2f%%)%s\n",
           ok ? "ok  " : "FAIL", coll == PLX_COLL_ALLREDUCE ? "allreduce" : "allgather", gamma_ns > 0 ? " +gamma" : "",
           cores > 0 && P > cores ? " time-shared" : "", wake_ns > 0 ? " +wake" : "", host_mem_ns > 0 ? " +memory" : "",
           head_ns > 0 ? " +head" : "", private_ns > 0 ? " +private" : "", P, bytes, got, want, 100 * err,
           j.bad ? " WRONG DATA" : "");
    if (!ok)
        failures++;
    free(j.end_ns);
}

/* sim.model_trace: recursive doubling on 4 ranks is 8 messages, each
 * lasting alpha + bytes * beta, the last ending when the op does. */
static void check_trace(void)
{
    char path[] = "/tmp/plexus-sim-trace-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        failures++;
        return;
    }
    close(fd);
    char kv[300];
    snprintf(kv, sizeof kv, "sim.model_trace=%s", path);
    const char *ov[] = {"sim.model=true", "sim.model_intra_latency=2us", "sim.model_intra_bandwidth=1G",
                        "core.allreduce_algo=recdbl", kv, NULL};
    struct job j = {.coll = PLX_COLL_ALLREDUCE, .count = 1024, .end_ns = calloc(4, sizeof(double))};
    int rc = run_ranks(4, "sim", ov, 60000, run, &j);
    double end = 0, last = 0;
    for (int r = 0; r < 4; r++)
        end = j.end_ns[r] > end ? j.end_ns[r] : end;
    FILE *f = fopen(path, "r");
    char line[512];
    int events = 0, bad = 0;
    while (f && fgets(line, sizeof line, f)) {
        int from, to;
        double ts, dur;
        size_t bytes;
        if (sscanf(line, "{\"name\":\"%*[^\"]\",\"cat\":\"message\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%lf,"
                         "\"dur\":%lf,\"args\":{\"to\":%d,\"bytes\":%zu", &from, &ts, &dur, &to, &bytes) != 5)
            continue;
        events++;
        bad += fabs(dur * 1e3 - (ALPHA_NS + (double)bytes * beta_ns)) > 1 || from == to || to < 0 || to > 3;
        last = ts + dur > last ? ts + dur : last;
    }
    if (f)
        fclose(f);
    unlink(path);
    int ok = rc == 0 && events == 8 && !bad && fabs(last * 1e3 - end) < 1;
    printf("%s trace: %d messages (want 8), %d with a wrong duration, last ends %.0f ns, the op %.0f ns\n",
           ok ? "ok  " : "FAIL", events, bad, last * 1e3, end);
    if (!ok)
        failures++;
    free(j.end_ns);
}

/* A 4-rank ring allgather of count elements a rank on 2 cores whose waits
 * yield them, with a wake-up: a term that is CPU work is shared. */
static void check_yielding_ring(size_t count)
{
    cores = 2;
    wake_ns = 5000;
    yielding = 1;
    check("ring", PLX_COLL_ALLGATHER, 4, count);
    cores = 0;
    wake_ns = 0;
    yielding = 0;
}

int main(void)
{
    beta_ns = 1e9 / (double)(1 << 30);
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(model_clock = (double (*)(void))dlsym(h, "plexus_sim_model_clock_ns"))) {
        fprintf(stderr, "no sim plugin with a model at %s: %s\n", path, dlerror());
        return 1;
    }
    static const int ps[] = {3, 5, 8, 64};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        int P = ps[i];
        check("ring", PLX_COLL_ALLREDUCE, P, (size_t)P * 1024);
        if ((P & (P - 1)) == 0) {
            check("recdbl", PLX_COLL_ALLREDUCE, P, 1024);
            check("tree", PLX_COLL_ALLREDUCE, P, 1024);
            check("rabenseifner", PLX_COLL_ALLREDUCE, P, (size_t)P * 1024);
        }
        check("ring", PLX_COLL_ALLGATHER, P, 1024);
        check("ring", PLX_COLL_REDUCE_SCATTER, P, 1024);
    }
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024);
    check("tree", PLX_COLL_ALLREDUCE, 2, 1024);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 2, 2048);
    check("ring", PLX_COLL_ALLGATHER, 2, 1024);
    /* A non-power of two: the tree's root link shared, halving-doubling's fold. */
    check("tree", PLX_COLL_ALLREDUCE, 3, 1024);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 3, 3 * 1024);
    check("ring", PLX_COLL_REDUCE_SCATTER, 2, 1024);
    check_trace();
    /* Several segments per ring step. */
    check("ring", PLX_COLL_REDUCE_SCATTER, 2, 128 << 10);
    check("ring", PLX_COLL_ALLREDUCE, 3, (size_t)3 << 20);
    /* The reduction cost: each algorithm's reductions on its critical path. */
    gamma_ns = 1e9 / (double)(2u << 30);
    check("ring", PLX_COLL_ALLREDUCE, 8, 8 * 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 8, 1024);
    check("tree", PLX_COLL_ALLREDUCE, 8, 1024);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 8, 8 * 1024);
    check("ring", PLX_COLL_REDUCE_SCATTER, 5, 1024);
    check("ring", PLX_COLL_ALLGATHER, 5, 1024);
    check_two_hosts();
    /* More ranks than cores on one host. */
    cores = 2;
    check("ring", PLX_COLL_REDUCE_SCATTER, 5, 1024);
    check("tree", PLX_COLL_ALLREDUCE, 8, 1024);
    gamma_ns = 0;
    check("ring", PLX_COLL_ALLREDUCE, 4, 4 * 1024);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 4, 4 * 1024);
    check("ring", PLX_COLL_ALLGATHER, 3, 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024); /* as many cores as ranks: unchanged */
    yielding = 1;
    check("ring", PLX_COLL_ALLREDUCE, 4, 4 * 1024);
    check("tree", PLX_COLL_ALLREDUCE, 8, 1024);
    gamma_ns = 1e9 / (double)(2u << 30);
    check("ring", PLX_COLL_REDUCE_SCATTER, 5, 1024);
    /* And a wake-up per message where ranks outnumber the cores. */
    wake_ns = 5000;
    check("tree", PLX_COLL_ALLREDUCE, 8, 1024);
    check("ring", PLX_COLL_REDUCE_SCATTER, 5, 1024);
    gamma_ns = 0;
    check("ring", PLX_COLL_ALLREDUCE, 4, 4 * 1024);
    yielding = 0;
    check("ring", PLX_COLL_ALLREDUCE, 4, 4 * 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 4, 1024);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 4, 4 * 1024);
    check("ring", PLX_COLL_ALLGATHER, 3, 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024); /* as many cores as ranks: no wake-up */
    gamma_ns = 1e9 / (double)(2u << 30);
    check("ring", PLX_COLL_REDUCE_SCATTER, 5, 1024);
    cores = 0;
    check("ring", PLX_COLL_ALLREDUCE, 4, 4 * 1024); /* a core for every rank: no wake-up */
    check_two_hosts();
    /* The wake-up's core time, beside its latency: it grows with the ranks
     * a core holds (16 on 2 cores pay 7 of it a message, 4 pay 1). */
    cores = 2;
    yielding = 1;
    wake_cpu_ns = 3000;
    check("recdbl", PLX_COLL_ALLREDUCE, 16, 1024);
    check("tree", PLX_COLL_ALLREDUCE, 16, 1024);
    check("ring", PLX_COLL_ALLGATHER, 4, 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024); /* as many cores as ranks: none */
    yielding = 0;
    check("rabenseifner", PLX_COLL_ALLREDUCE, 8, 4 * 1024);
    cores = 0;
    wake_cpu_ns = 0;
    gamma_ns = 0;
    wake_ns = 0;
    /* Messages within a host larger than its cache: each byte beyond it
     * costs the memory's more. */
    cache_bytes = 256 << 10;
    mem_ns = 1e9 / (double)(512u << 20);
    check("ring", PLX_COLL_ALLGATHER, 3, 256 << 10);  /* one 1 MiB message per step */
    check("ring", PLX_COLL_ALLREDUCE, 3, 3 << 18);    /* blocks of 1 MiB, one segment each */
    check("recdbl", PLX_COLL_ALLREDUCE, 4, 128 << 10);
    check("tree", PLX_COLL_ALLREDUCE, 8, 128 << 10);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 4, 512 << 10); /* blocks of 1 MiB and 512 KiB */
    gamma_ns = 1e9 / (double)(2u << 30);
    check("ring", PLX_COLL_REDUCE_SCATTER, 3, 512 << 10); /* 2 MiB blocks in two 1 MiB segments */
    /* Segments under the cache pay nothing more: 128 KiB at 2 ranks. */
    check("ring", PLX_COLL_REDUCE_SCATTER, 2, 256 << 10);
    gamma_ns = 0;
    check("ring", PLX_COLL_ALLGATHER, 2, 32 << 10);
    /* Time-shared, the memory's bytes too; with the wake-up per message. */
    cores = 2;
    check("ring", PLX_COLL_ALLGATHER, 3, 256 << 10);
    wake_ns = 5000;
    check("ring", PLX_COLL_ALLREDUCE, 4, 1 << 20);
    /* Across hosts the NIC moves the bytes: only the exchange within a
     * host pays the memory (all of its bytes, with no cache). */
    cache_bytes = 0;
    gamma_ns = 1e9 / (double)(2u << 30);
    check_two_hosts();
    cores = 0;
    gamma_ns = 0;
    wake_ns = 0;
    mem_ns = 0;
    /* The host's cache: every byte a message copies pays the share of the
     * operation's set on the host beyond it, however small the message. */
    host_cache_bytes = 1 << 20;
    host_mem_ns = 1e9 / (double)(512u << 20);
    check("ring", PLX_COLL_ALLREDUCE, 3, 3 << 16);    /* 768 KiB in and out, 4.5 MiB on the host */
    check("ring", PLX_COLL_ALLGATHER, 4, 16 << 10);   /* 64 KiB in, 256 KiB out: 1.25 MiB */
    check("recdbl", PLX_COLL_ALLREDUCE, 4, 1024);     /* 32 KiB on the host: within the cache */
    gamma_ns = 1e9 / (double)(2u << 30);
    check("ring", PLX_COLL_REDUCE_SCATTER, 3, 64 << 10); /* 1 MiB in, 256 KiB out: 3.75 MiB */
    gamma_ns = 0;
    cores = 2;
    check("ring", PLX_COLL_ALLREDUCE, 4, 1 << 18);    /* time-shared, as the copy is */
    cores = 0;
    host_cache_bytes = host_mem_ns = 0;
    /* Serial copies: an exchange of 4 KiB (c > alpha) takes both copies,
     * one of 1 KiB (2c < alpha + c) the message's time as before; a ring step too. */
    serial = 1;
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 256);
    check("ring", PLX_COLL_ALLGATHER, 3, 1024);
    gamma_ns = 1e9 / (double)(2u << 30);
    check("recdbl", PLX_COLL_ALLREDUCE, 4, 1024);
    /* Above the eager limit each exchange waits for the ready notice. */
    eager = 2048;
    check("recdbl", PLX_COLL_ALLREDUCE, 4, 1024);
    gamma_ns = 0;
    check("ring", PLX_COLL_ALLGATHER, 3, 1024);
    serial = 0;
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 256); /* 1 KiB: eager */
    eager = 0;
    /* Above the eager limit a message's sender also handles the ready
     * notice before it goes: an exchange pays it once, a pipeline each
     * segment (alpha only once), a message within the limit nothing. */
    eager = 2048;
    rdv_ns = 4000;
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024);            /* 4 KiB */
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 256);             /* 1 KiB: eager */
    check("ring", PLX_COLL_REDUCE_SCATTER, 2, 128 << 10);    /* four segments of 128 KiB */
    check("ring", PLX_COLL_ALLGATHER, 3, 1024);
    check_yielding_ring(1024);                               /* time-shared: CPU work, shared */
    eager = rdv_ns = 0;
    /* A copy's head: the first 8 KiB of every message cost more. */
    head_bytes = 8 << 10;
    head_ns = 1e9 / (double)(256u << 20);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 1024);            /* 4 KiB: all head */
    check("ring", PLX_COLL_ALLGATHER, 3, 4096);              /* 16 KiB a step: its first 8 KiB */
    check("ring", PLX_COLL_REDUCE_SCATTER, 2, 128 << 10);    /* each of four segments pays it */
    gamma_ns = 1e9 / (double)(2u << 30);
    check("rabenseifner", PLX_COLL_ALLREDUCE, 4, 4 * 1024);  /* blocks of 8 and 4 KiB */
    cores = 2;
    wake_ns = 5000;
    check("ring", PLX_COLL_ALLREDUCE, 4, 4 * 1024);          /* time-shared, as the copy is */
    cores = 0;
    wake_ns = 0;
    gamma_ns = 0;
    head_bytes = head_ns = 0;
    /* shm's native collectives: one barrier up to 16 KiB, two per 1 MiB
     * round above; an allgather one per round. */
    check_native(PLX_COLL_ALLREDUCE, 4, 1024);
    check_native(PLX_COLL_ALLREDUCE, 2, 2);
    check_native(PLX_COLL_ALLGATHER, 4, 16);
    check_native(PLX_COLL_ALLGATHER, 3, 640 << 10); /* 2.5 MiB blocks: three rounds */
    gamma_ns = 1e9 / (double)(2u << 30);
    check_native(PLX_COLL_ALLREDUCE, 3, 3 << 18);   /* 3 MiB: three rounds */
    check_native(PLX_COLL_ALLREDUCE, 5, 8192);      /* 32 KiB: one round, slices of 6.4 KiB */
    cores = 2;
    wake_ns = 5000;
    check_native(PLX_COLL_ALLREDUCE, 4, 1024);
    check_native(PLX_COLL_ALLREDUCE, 4, 1 << 19);
    check_native(PLX_COLL_ALLGATHER, 3, 1024);
    check_native(PLX_COLL_ALLREDUCE, 2, 1 << 19);   /* as many cores as ranks: no sharing */
    cores = 0;
    wake_ns = 0;
    host_cache_bytes = 256 << 10;
    host_mem_ns = 1e9 / (double)(512u << 20);
    check_native(PLX_COLL_ALLGATHER, 2, 1 << 18);   /* 10 MiB working set: mostly beyond the cache */
    check_native(PLX_COLL_ALLREDUCE, 2, 1 << 19);   /* 8 MiB: the same, in rounds of 1 MiB slices */
    check_native(PLX_COLL_ALLREDUCE, 2, 8192);      /* 192 KiB working set: within the cache */
    check_native(PLX_COLL_ALLREDUCE, 4, 8 << 18);   /* 8 MiB each, 40 MiB on the host: four rounds */
    host_cache_bytes = 0;
    host_mem_ns = 0;
    /* Each piece a native collective copies pays the head. */
    head_bytes = 64 << 10;
    head_ns = 1e9 / (double)(256u << 20);
    check_native(PLX_COLL_ALLREDUCE, 2, 2048);      /* 8 KiB: two copies, all head */
    check_native(PLX_COLL_ALLREDUCE, 4, 1 << 19);   /* two rounds, slices of 256 KiB: 64 KiB of each */
    check_native(PLX_COLL_ALLGATHER, 3, 8192);      /* 32 KiB blocks: four copies, all head */
    cores = 2;
    check_native(PLX_COLL_ALLGATHER, 4, 1 << 18);   /* 1 MiB blocks, time-shared */
    cores = 0;
    head_bytes = head_ns = 0;
    /* Bytes another core still holds in its own cache cost more: a
     * message's up to that cache, a native collective's by each core's
     * share of the working set. */
    private_bytes = 32 << 10;
    private_ns = 1e9 / (double)(128u << 20);
    check("recdbl", PLX_COLL_ALLREDUCE, 2, 4096);            /* 16 KiB: all of it */
    check("ring", PLX_COLL_ALLGATHER, 3, 16384);             /* 64 KiB a step: its first 32 KiB */
    private_bytes = private_ns = 0;
    /* A ring's messages go unanswered: each step's receive pays the
     * acknowledgement; recursive doubling's exchanges carry it. */
    ack_ns = 3000;
    check("ring", PLX_COLL_ALLGATHER, 3, 4096);
    check("ring", PLX_COLL_ALLGATHER, 2, 4096);              /* an exchange */
    check("recdbl", PLX_COLL_ALLREDUCE, 4, 4096);
    check("tree", PLX_COLL_ALLREDUCE, 4, 4096);              /* its receivers only wait: none, from the first */
    check_yielding_ring(4096);                               /* time-shared: CPU work, shared */
    ack_ns = 0;
    private_bytes = 1 << 20;
    private_ns = 1e9 / (double)(128u << 20);
    check_native(PLX_COLL_ALLREDUCE, 2, 1 << 16);   /* 1.5 MiB working set, 768 KiB a core: all of it */
    check_native(PLX_COLL_ALLREDUCE, 2, 1 << 19);   /* 8 MiB, 4 MiB a core: a quarter */
    check_native(PLX_COLL_ALLGATHER, 3, 8192);      /* 32 KiB blocks: 480 KiB, 160 KiB a core */
    cores = 2;
    wake_ns = 5000;
    check_native(PLX_COLL_ALLGATHER, 4, 1 << 16);   /* 7 MiB over 2 cores, time-shared */
    cores = 0;
    wake_ns = 0;
    private_bytes = private_ns = 0;
    gamma_ns = 0;
    dlclose(h);
    return failures ? 1 : 0;
}
