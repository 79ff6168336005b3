/* plexus-whatif - which allreduce algorithm is fastest at this scale? Runs
 * the core's generic algorithms over the sim backend's network model in
 * timing-only mode (ranks are coroutines of one thread; messages carry sizes
 * and virtual times, not their bytes) and prints, per size, each
 * algorithm's modelled time, algbw and busbw (nccl-tests columns) and the
 * fastest one. Also allgather, reduce_scatter, broadcast and barrier, and
 * the tables the core reads: [core] tuner (the fastest allreduce by size)
 * and [core] estimates (the time of the core's own choice, for
 * plx_comm_estimate).
 *
 *   plexus-whatif --ranks 1024 --hosts 128 --inter-latency 5us \
 *                 --inter-bandwidth 12G -b 8 -e 64M --csv out.csv
 *   plexus-whatif --model calib-tcp.ini --ranks 4 --coll allgather --algos auto
 *   plexus-whatif --model calib-tcp.ini --ranks 4 --coll allreduce,allgather,reduce_scatter,broadcast,barrier \
 *                 --emit-tuning tuning.txt --emit-estimates estimates.txt --backend tcp
 *
 * With --model, the model's keys come from that [sim] drop-in (as
 * bench/calibrate.py writes it) and only the options given override them.
 *
 * Each algorithm is one run of ranks on one communicator each; every size
 * starts from virtual time 0 on idle links, as on fresh communicators: the
 * modelled time is the latest rank's virtual clock when the operation
 * returns. With --warmup N, N operations of the size run first, untimed:
 * the timed one finds the links as a benchmark's back-to-back loop leaves
 * them (a shaped NIC's burst spent), and its time runs from the latest
 * rank's start to the latest rank's end. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plexus/backend.h"
#include "plexus/info.h"
#include "plexus/plexus.h"
#include "cli_args.h"

enum { MAX_ALGOS = 8, N_MODEL_KEYS = 13, MAX_COLLS = 8 };
#define RANK_STACK ((size_t)256 << 10)

/* The model's keys and their defaults without --model; given[i]: on the
 * command line, so it overrides the model file too. */
static const char *const MODEL_KEYS[N_MODEL_KEYS] = {
    "model_ranks_per_host", "model_intra_latency", "model_intra_bandwidth", "model_inter_latency",
    "model_inter_bandwidth", "model_injection_bandwidth", "model_cores_per_host", "model_wake_latency",
    "model_intra_cache", "model_intra_memory_bandwidth", "model_intra_native", "model_machine_cores",
    "model_inter_burst"};
enum { K_RPH, K_INTRA_LAT, K_INTRA_BW, K_INTER_LAT, K_INTER_BW, K_INJECT_BW, K_CORES, K_WAKE, K_CACHE, K_MEMORY,
       K_NATIVE, K_MACHINE_CORES, K_BURST };

struct opts {
    int ranks, hosts, payload;
    int warmup;                 /* untimed operations before each size's timed one, back to back */
    int coll;                   /* the collective now swept (enum plx_coll), one of colls */
    int colls[MAX_COLLS], ncoll;
    size_t minb, maxb;
    double factor;
    const char *val[N_MODEL_KEYS];
    int given[N_MODEL_KEYS];
    const char *csv, *model, *reduce_bw, *tuning, *estimates, *backend;
    const char *algos[MAX_ALGOS];
    int nalgo;
};
static struct opts O = {.ranks = 1024, .hosts = 1, .minb = 8, .maxb = 64u << 20, .factor = 2,
                        .coll = PLX_COLL_ALLREDUCE, .colls = {PLX_COLL_ALLREDUCE}, .ncoll = 1,
                        .val = {NULL, "1us", "50G", "5us", "12G", "0", "0", "0ns", "0", "0", "none", "0", "0"},
                        .algos = {"ring", "recdbl", "tree", "rabenseifner"}, .nalgo = 4};
static double (*model_clock)(void);

enum { MAX_SIZES = 64 };

struct job {
    const char *const *ov;
    char init[64];
    const size_t *counts; /* per rank, each size: the allreduce's, or one block of the allgather */
    int nsizes;
    double *start_ns, *end_ns; /* [size * ranks + rank]: the rank's clock before and after the timed op */
    int failed[MAX_SIZES];
    float *shared; /* every rank's buffer (timing only), or NULL: one each */
    struct plx_comm **comms; /* in the order made; destroyed after the run, the last first */
    int made;
    int native;    /* rank 0's communicator runs the collective natively (the model's own schedule) */
};

static int (*run_ranks)(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg), void *arg);
static int (*run_phase)(void);

static int find_sim(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    size_t l = strlen(info->dlpi_name);
    if (l >= 14 && !strcmp(info->dlpi_name + l - 14, "/plexus-sim.so")) {
        void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            model_clock = (double (*)(void))dlsym(h, "plexus_sim_model_clock_ns");
            run_ranks = (int (*)(int, size_t, void (*)(int, void *), void *))dlsym(h, "plexus_sim_run_ranks");
            run_phase = (int (*)(void))dlsym(h, "plexus_sim_run_phase");
        }
        return 1;
    }
    return 0;
}

/* The sim plugin the core loads, found once a one-rank communicator has
 * loaded it: its clock and its coroutine ranks. */
static int load_sim(void)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = "mem://whatif-load";
    struct plx_comm *comm = NULL;
    int rc = plx_comm_init(&o, &comm);
    if (rc) {
        fprintf(stderr, "plexus-whatif: no sim backend: %s\n", plx_last_error());
        return -1;
    }
    dl_iterate_phdr(find_sim, NULL);
    plx_comm_destroy(comm);
    if (!model_clock || !run_ranks || !run_phase) {
        fprintf(stderr, "plexus-whatif: the sim plugin has no network model with coroutine ranks\n");
        return -1;
    }
    return 0;
}

/* Whether a row's buffer is a block per rank (count each), as plexus-bench
 * sizes the row: the gathered output, the scattered input. */
static int per_rank_blocks(void)
{
    return O.coll == PLX_COLL_ALLGATHER || O.coll == PLX_COLL_REDUCE_SCATTER;
}

/* Whether a size's run does anything: a barrier moves no data. */
static int runs(size_t count)
{
    return count > 0 || O.coll == PLX_COLL_BARRIER;
}

/* One collective of count floats per rank (in place) on comm; 0 or the error. */
static int one_op(struct job *j, struct plx_comm *comm, int rank, size_t count)
{
    size_t n = per_rank_blocks() ? count * (size_t)O.ranks : count;
    int exact = O.payload || count * sizeof(float) <= PLX_TIMING_EXACT_BYTES;
    float *buf = exact ? calloc(n ? n : 1, sizeof *buf) : j->shared;
    if (!buf)
        return PLX_ERR_NOMEM;
    int rc;
    switch (O.coll) {
    case PLX_COLL_ALLGATHER: rc = plx_allgather(comm, buf + (size_t)rank * count, buf, count, PLX_F32); break;
    case PLX_COLL_REDUCE_SCATTER:
        rc = plx_reduce_scatter(comm, buf, buf + (size_t)rank * count, count, PLX_F32, PLX_SUM);
        break;
    case PLX_COLL_BROADCAST: rc = plx_broadcast(comm, buf, count, PLX_F32, 0); break;
    case PLX_COLL_BARRIER: rc = plx_barrier(comm); break;
    default: rc = plx_allreduce(comm, buf, buf, count, PLX_F32, PLX_SUM); break;
    }
    if (exact)
        free(buf);
    return rc;
}

/* Every size on one communicator: after each, all ranks start the next
 * from virtual time 0 on idle links (plexus_sim_run_phase), as on fresh
 * communicators, without making 16,384 of them again per row. */
static void rank_main(int rank, void *arg)
{
    struct job *j = arg;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.rank = rank;
    o.size = O.ranks;
    o.init = j->init;
    o.overrides = j->ov;
    /* A day: when every coroutine rank waits, the waits fail at once (a
     * deadlock), so the limit only bounds a runaway; a job's limit would
     * end a large run's one collective (16,384 ranks' ring: minutes). */
    o.timeout_ms = 24 * 3600 * 1000;
    struct plx_comm *comm = NULL;
    int rc = plx_comm_init(&o, &comm);
    j->comms[j->made++] = comm;
    /* The first size starts from a phase too: a coroutine rank's
     * communicator joins its world without waiting for the others, so its
     * first collective would otherwise send to ranks that have not joined
     * yet, which a job's ranks, out of plx_comm_init together, never do. */
    if (!rc && run_phase() != 0)
        rc = PLX_ERR_INTERNAL;
    if (!rc && rank == 0)
        j->native = plx_comm_native(comm, O.coll, PLX_F32, PLX_SUM) == 1;
    for (int k = 0; k < j->nsizes; k++) {
        for (int w = 0; w < O.warmup && !rc && runs(j->counts[k]); w++)
            rc = one_op(j, comm, rank, j->counts[k]);
        j->start_ns[(size_t)k * (size_t)O.ranks + (size_t)rank] = model_clock();
        if (!rc && runs(j->counts[k]))
            rc = one_op(j, comm, rank, j->counts[k]);
        j->end_ns[(size_t)k * (size_t)O.ranks + (size_t)rank] = model_clock();
        if (rc && !j->failed[k]++)
            fprintf(stderr, "plexus-whatif: rank %d: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
        if (rc || (k + 1 < j->nsizes && run_phase() != 0)) {
            for (int m = k + 1; m < j->nsizes; m++)
                j->failed[m] = 1;
            break;
        }
    }
}

/* Timing only, above PLX_TIMING_EXACT_BYTES per rank the core hands the
 * backend no buffer, so every rank may pass the same one: address space for
 * the largest, never touched, mapped once (a mapping per rank would run
 * into the process's limit on mappings at tens of thousands of ranks). */
static float *shared_buffer(size_t count)
{
    static float *buf;
    static size_t have;
    size_t n = per_rank_blocks() ? count * (size_t)O.ranks : count;
    if (n * sizeof(float) > have) {
        if (buf)
            munmap(buf, have);
        buf = mmap(NULL, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
        have = buf == MAP_FAILED ? 0 : n * sizeof(float);
        if (buf == MAP_FAILED)
            buf = NULL;
    }
    return buf;
}

/* The model's keys the command line gives (all of them without --model)
 * as overrides, from ov[n] on, kept in kv[0 .. N_MODEL_KEYS]; the new n. */
static int model_overrides(const char **ov, int n, char kv[][128])
{
    if (O.reduce_bw) {
        snprintf(kv[N_MODEL_KEYS], 128, "sim.model_reduce_bandwidth=%s", O.reduce_bw);
        ov[n++] = kv[N_MODEL_KEYS];
    }
    for (int k = 0; k < N_MODEL_KEYS; k++)
        if (O.given[k] || !O.model) {
            snprintf(kv[k], 128, "sim.%s=%s", MODEL_KEYS[k], O.val[k]);
            ov[n++] = kv[k];
        }
    return n;
}

/* Modelled ns of a collective of counts[k] floats per rank with algo
 * ("auto": the core's choice) into ns[k], or -1, for each of n sizes;
 * 1 where the model runs it natively. as_job: as a job with the
 * configuration would run it, through the [core] tuner table tuner where
 * not NULL; else without the core's in-band fingerprint, as every rank runs
 * the same call and the fingerprint's per-peer buffers would cost each
 * rank kilobytes per peer. */
static int run(const char *algo, int as_job, const char *tuner, const size_t *counts, int nsizes, double *ns)
{
    static int serial;
    char kv[N_MODEL_KEYS + 2][128], tuner_kv[4200];
    const char *ov[N_MODEL_KEYS + 9] = {"sim.model=true", O.payload ? "sim.model_payload=true" : "sim.model_payload=false",
                                        "core.ledger_entries=0", as_job ? NULL : "core.fingerprint=false"};
    int n = as_job ? 3 : 4;
    if (strcmp(algo, "auto")) {
        snprintf(kv[N_MODEL_KEYS + 1], sizeof kv[0], "core.allreduce_algo=%s", algo);
        ov[n++] = kv[N_MODEL_KEYS + 1];
    }
    if (tuner) {
        snprintf(tuner_kv, sizeof tuner_kv, "core.tuner=%s", tuner);
        ov[n++] = tuner_kv;
    }
    n = model_overrides(ov, n, kv);
    ov[n] = NULL;
    size_t most = 0;
    for (int k = 0; k < nsizes; k++)
        most = counts[k] > most ? counts[k] : most;
    struct job j = {.ov = ov, .counts = counts, .nsizes = nsizes,
                    .start_ns = calloc((size_t)O.ranks * (size_t)nsizes, sizeof(double)),
                    .end_ns = calloc((size_t)O.ranks * (size_t)nsizes, sizeof(double)),
                    .shared = shared_buffer(most ? most : 1), .comms = calloc((size_t)O.ranks, sizeof(struct plx_comm *))};
    snprintf(j.init, sizeof j.init, "mem://whatif-%d", ++serial);
    if (!j.start_ns || !j.end_ns || !j.comms || !j.shared) {
        fprintf(stderr, "plexus-whatif: out of memory\n");
        exit(1);
    }
    /* Coroutines in virtual-time order: shared links are charged in the
     * order the model's time says, so answers across hosts repeat. */
    int rc = run_ranks(O.ranks, RANK_STACK, rank_main, &j);
    /* The core keeps its live communicators in a list, the newest first:
     * in this order each is found at once, not after the others. */
    while (j.made > 0)
        plx_comm_destroy(j.comms[--j.made]);
    free(j.comms);
    for (int k = 0; k < nsizes; k++) { /* from the last rank's start to the last rank's end */
        double from = 0, to = 0;
        for (size_t i = (size_t)k * (size_t)O.ranks; i < (size_t)(k + 1) * (size_t)O.ranks; i++) {
            from = j.start_ns[i] > from ? j.start_ns[i] : from;
            to = j.end_ns[i] > to ? j.end_ns[i] : to;
        }
        ns[k] = j.failed[k] || rc || !runs(counts[k]) ? -1 : to - from;
    }
    free(j.start_ns);
    free(j.end_ns);
    return j.native;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: plexus-whatif [options]\n"
               "  --ranks N               simulated ranks (default 1024)\n"
               "  --hosts H               hosts, N/H consecutive ranks each (default 1)\n"
               "  --model FILE            the model's keys from this [sim] drop-in; the options below\n"
               "                          that are given override it\n"
               "  --coll LIST             allreduce (default), allgather, reduce_scatter, broadcast, barrier,\n"
               "                          comma-separated; rows sized as plexus-bench sizes them (allgather: the\n"
               "                          bytes each rank receives, reduce_scatter: those each rank reduces)\n"
               "  --algos LIST            allreduce algorithms, comma-separated (default ring,recdbl,tree,\n"
               "                          rabenseifner; auto: the core's own choice)\n"
               "  --intra-latency T       within a host (default 1us)\n"
               "  --intra-bandwidth B/s   within a host (default 50G)\n"
               "  --inter-latency T       across hosts (default 5us)\n"
               "  --inter-bandwidth B/s   a host's NIC (default 12G, about 100 Gb/s)\n"
               "  --inter-burst B         a NIC's token bucket: B bytes pass at once after an idle spell, the\n"
               "                          rest at its bandwidth (tc tbf's burst; default 0: none)\n"
               "  --injection-bandwidth B/s  per rank (default 0: no limit)\n"
               "  --cores-per-host C      a host's cores, time-shared by more ranks (default 0: unlimited)\n"
               "  --machine-cores C       the hosts are emulated on one machine of C cores, which all ranks\n"
               "                          share (and messages across hosts use); default 0: a machine each\n"
               "  --wake-latency T        with more ranks than cores, a message's wait for its receiver to be\n"
               "                          woken and switched in (default 0)\n"
               "  --intra-cache B          a message within a host up to B bytes is copied in cache; a native\n"
               "                          collective's working set up to B bytes stays in it (default 0)\n"
               "  --intra-memory-bandwidth B/s  ... and the bytes beyond B cost 1/this each more (default 0: none)\n"
               "  --intra-native none|shm  one host: allreduce and allgather as shm runs them natively (default\n"
               "                          none: the core's algorithms over messages)\n"
               "  --reduce-bandwidth B/s  bytes a rank reduces per second (gamma; default: the model's, 0)\n"
               "  --warmup N              N untimed operations before each size's timed one, back to back on\n"
               "                          the same clocks and links, as plexus-bench -w runs them (default 0:\n"
               "                          each size on idle links)\n"
               "  --payload               a full run: messages carry their bytes and ranks reduce them (the\n"
               "                          same times as timing only, at memory and CPU per byte)\n"
               "  -b, --minbytes SIZE     smallest allreduce (default 8)\n"
               "  -e, --maxbytes SIZE     largest (default 64M)\n"
               "  -f, --stepfactor F      each size F times the last (default 2)\n"
               "  --csv FILE              also write ranks,hosts,bytes,algorithm,time_us,algbw,busbw,coll rows\n"
               "  --emit-tuning FILE      write the fastest allreduce algorithm by size as a [core] tuner table\n"
               "                          (allreduce RANKS FROM_BYTES ALGORITHM: a row where the fastest changes;\n"
               "                          tables of several --ranks concatenate in ascending order)\n"
               "  --emit-estimates FILE   write each --coll's modelled time by size of what the core would run\n"
               "                          (its own choice; with --emit-tuning, through that table) as a [core]\n"
               "                          estimates table for plx_comm_estimate (COLL RANKS BYTES SECONDS; tables\n"
               "                          of several --ranks concatenate)\n"
               "  --backend NAME          the backend the model stands for (tcp, shm): the estimates table holds\n"
               "                          to it, without the collectives it runs otherwise than the model (natively\n"
               "                          or over messages); default: a table for every backend, unchecked\n"
               "Bandwidths take K, M, G suffixes (powers of 1024, bytes per second).\n");
}

/* Split a comma-separated list of algorithms into O.algos; 0 or -1. */
static int parse_algos(char *list)
{
    static const char *const known[] = {"auto", "ring", "recdbl", "tree", "rabenseifner"};
    O.nalgo = 0;
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            ok |= !strcmp(a, known[k]);
        if (!ok || O.nalgo == MAX_ALGOS) {
            fprintf(stderr, "plexus-whatif: --algos: '%s' is not one of auto, ring, recdbl, tree, rabenseifner\n", a);
            return -1;
        }
        O.algos[O.nalgo++] = a;
    }
    return O.nalgo ? 0 : -1;
}

/* Split a comma-separated list of collectives into O.colls; 0 or -1. */
static int parse_colls(char *list)
{
    static const int known[] = {PLX_COLL_ALLREDUCE, PLX_COLL_ALLGATHER, PLX_COLL_REDUCE_SCATTER, PLX_COLL_BROADCAST,
                                PLX_COLL_BARRIER};
    O.ncoll = 0;
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        int coll = -1;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            if (!strcmp(a, plx_coll_name(known[k])))
                coll = known[k];
        if (coll < 0 || O.ncoll == MAX_COLLS) {
            fprintf(stderr, "plexus-whatif: --coll: '%s' is not one of allreduce, allgather, reduce_scatter, "
                            "broadcast, barrier\n", a);
            return -1;
        }
        O.colls[O.ncoll++] = coll;
    }
    return O.ncoll ? 0 : -1;
}

static void set_key(int k, const char *v)
{
    O.val[k] = v;
    O.given[k] = 1;
}

/* Options into O; -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"ranks", 1, 0, 'R'},         {"hosts", 1, 0, 'H'},           {"intra-latency", 1, 0, 'a'},
        {"intra-bandwidth", 1, 0, 'w'}, {"inter-latency", 1, 0, 'A'}, {"inter-bandwidth", 1, 0, 'W'},
        {"injection-bandwidth", 1, 0, 'J'}, {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'},
        {"csv", 1, 0, 'C'},           {"help", 0, 0, 'h'},            {"model", 1, 0, 'M'},
        {"coll", 1, 0, 'c'},          {"algos", 1, 0, 'g'},           {"reduce-bandwidth", 1, 0, 'G'},
        {"stepfactor", 1, 0, 'f'},    {"cores-per-host", 1, 0, 'K'}, {"emit-tuning", 1, 0, 'T'},
        {"wake-latency", 1, 0, 'L'},  {"intra-cache", 1, 0, 'X'},   {"intra-memory-bandwidth", 1, 0, 'Y'},
        {"intra-native", 1, 0, 'N'}, {"payload", 0, 0, 'P'},  {"emit-estimates", 1, 0, 'E'},
        {"backend", 1, 0, 'B'},       {"machine-cores", 1, 0, 'U'},  {"inter-burst", 1, 0, 'V'},
        {"warmup", 1, 0, 'Z'},
        {0, 0, 0, 0},
    };
    int ch, hosts_given = 0, rc = 0;
    while (rc == 0 && (ch = getopt_long(argc, argv, "b:e:f:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'R': rc = cli_int("plexus-whatif", "--ranks", optarg, 2, INT_MAX, &O.ranks); break;
        case 'H': rc = cli_int("plexus-whatif", "--hosts", optarg, 1, INT_MAX, &O.hosts); hosts_given = 1; break;
        case 'a': set_key(K_INTRA_LAT, optarg); break;
        case 'w': set_key(K_INTRA_BW, optarg); break;
        case 'A': set_key(K_INTER_LAT, optarg); break;
        case 'W': set_key(K_INTER_BW, optarg); break;
        case 'J': set_key(K_INJECT_BW, optarg); break;
        case 'K': set_key(K_CORES, optarg); break;
        case 'U': set_key(K_MACHINE_CORES, optarg); break;
        case 'V': set_key(K_BURST, optarg); break;
        case 'Z': rc = cli_int("plexus-whatif", "--warmup", optarg, 0, INT_MAX, &O.warmup); break;
        case 'L': set_key(K_WAKE, optarg); break;
        case 'X': set_key(K_CACHE, optarg); break;
        case 'Y': set_key(K_MEMORY, optarg); break;
        case 'N': set_key(K_NATIVE, optarg); break;
        case 'T': O.tuning = optarg; break;
        case 'E': O.estimates = optarg; break;
        case 'B': O.backend = optarg; break;
        case 'P': O.payload = 1; break;
        case 'G': O.reduce_bw = optarg; break;
        case 'b': rc = cli_size("plexus-whatif", "-b/--minbytes", optarg, &O.minb); break;
        case 'e': rc = cli_size("plexus-whatif", "-e/--maxbytes", optarg, &O.maxb); break;
        case 'f': rc = cli_double_above("plexus-whatif", "-f/--stepfactor", optarg, 1.0, &O.factor); break;
        case 'C': O.csv = optarg; break;
        case 'M': O.model = optarg; break;
        case 'c':
            if (parse_colls(optarg) != 0)
                return 2;
            break;
        case 'g':
            if (parse_algos(optarg) != 0)
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (rc)
        return 2; /* a number refused: cli_args said why */
    if (optind < argc || O.ranks < 2 || O.hosts < 1 || O.ranks % O.hosts || O.minb < 4 || O.minb > O.maxb ||
        O.factor <= 1 || O.warmup < 0) {
        fprintf(stderr, "plexus-whatif: need --ranks >= 2 divisible by --hosts, 4 <= -b <= -e, -f > 1 and "
                        "--warmup >= 0\n");
        return 2;
    }
    int allreduce = 0;
    for (int c = 0; c < O.ncoll; c++)
        allreduce |= O.colls[c] == PLX_COLL_ALLREDUCE;
    for (int a = 0; O.tuning && a < O.nalgo; a++)
        if (!allreduce || !strcmp(O.algos[a], "auto")) {
            fprintf(stderr, "plexus-whatif: --emit-tuning compares allreduce algorithms, without auto\n");
            return 2;
        }
    if (O.backend && !O.estimates) {
        fprintf(stderr, "plexus-whatif: --backend names the backend of --emit-estimates' table\n");
        return 2;
    }
    static char rph[32];
    snprintf(rph, sizeof rph, "%d", O.ranks / O.hosts);
    O.val[K_RPH] = rph;
    O.given[K_RPH] = hosts_given;
    return -1;
}

/* The [core] tuner table: a row from each size where the fastest
 * algorithm changes (from 0 for the first), so a size between two swept
 * ones takes the smaller one's algorithm. */
static FILE *tuning;
static int tuning_last = -1;

static int tuning_open(void)
{
    if (!O.tuning)
        return 0;
    if (!(tuning = fopen(O.tuning, "w"))) {
        perror(O.tuning);
        return -1;
    }
    fprintf(tuning, "# plexus [core] tuner table, written by plexus-whatif: the model's fastest allreduce by size\n"
                    "# %d ranks, %d host(s)%s%s\n# allreduce RANKS FROM_BYTES ALGORITHM\n",
            O.ranks, O.hosts, O.model ? ", model " : "", O.model ? O.model : "");
    return 0;
}

static void tuning_note(size_t bytes, int best_a)
{
    if (!tuning || O.coll != PLX_COLL_ALLREDUCE || best_a < 0 || best_a == tuning_last)
        return;
    fprintf(tuning, "allreduce %d %zu %s\n", O.ranks, tuning_last < 0 ? (size_t)0 : bytes, O.algos[best_a]);
    tuning_last = best_a;
}

static void print_header(const char *coll)
{
    int over = O.reduce_bw != NULL;
    for (int k = 0; k < N_MODEL_KEYS; k++)
        over |= O.given[k];
    if (O.model)
        printf("# plexus-whatif: %d ranks; model %s%s\n", O.ranks, O.model, over ? " with the options given over it" : "");
    else
        printf("# plexus-whatif: %d ranks on %d host(s); intra %s, %s B/s; inter %s, %s B/s; injection %s B/s%s%s\n",
               O.ranks, O.hosts, O.val[K_INTRA_LAT], O.val[K_INTRA_BW], O.val[K_INTER_LAT], O.val[K_INTER_BW],
               O.val[K_INJECT_BW], O.reduce_bw ? "; reduction B/s " : "", O.reduce_bw ? O.reduce_bw : "");
    int reduces = O.coll == PLX_COLL_ALLREDUCE || O.coll == PLX_COLL_REDUCE_SCATTER;
    printf("# modelled %s (%s); time in us, algbw and busbw in GB/s\n", coll,
           O.coll == PLX_COLL_BARRIER ? "no data" : reduces ? "float sum, in place" : "float, in place");
    printf("# %10s", "size(B)");
    for (int a = 0; a < O.nalgo; a++)
        printf(" %12s %8s %8s", O.algos[a], "algbw", "busbw");
    printf("  fastest\n");
}

/* Size k's row of every algorithm (ns[a][k]), its fastest, and the
 * tuner's note; 1 where a run failed. */
static int print_row(FILE *csv, const char *coll, size_t total, size_t count, double busf,
                     double ns[][MAX_SIZES], int k)
{
    double best = -1;
    int best_a = -1, status = 0;
    printf("  %10zu", total);
    for (int a = 0; a < O.nalgo; a++) {
        double t = ns[a][k];
        if (t < 0) { /* 0 is a time: a model whose costs are all 0 */
            printf(" %12s %8s %8s", runs(count) ? "failed" : "too small", "-", "-");
            status |= runs(count); /* a size below a float per rank is no failure */
            continue;
        }
        double us = t / 1e3, algbw = t > 0 ? (double)total / t : 0, busbw = algbw * busf;
        printf(" %12.2f %8.3f %8.3f", us, algbw, busbw);
        if (csv)
            fprintf(csv, "%d,%d,%zu,%s,%.3f,%.4f,%.4f,%s\n", O.ranks, O.hosts, total, O.algos[a], us, algbw, busbw,
                    coll);
        if (best < 0 || t < best) {
            best = t;
            best_a = a;
        }
    }
    printf("  %s\n", best_a >= 0 ? O.algos[best_a] : "-");
    tuning_note(total, best_a);
    return status;
}

/* The sizes of O.coll's rows: counts (floats per rank, or per block) and
 * totals (the row's bytes, as plexus-bench counts them); their number. */
static int row_sizes(size_t *counts, size_t *totals)
{
    if (O.coll == PLX_COLL_BARRIER) {
        counts[0] = totals[0] = 0;
        return 1;
    }
    size_t blocks = per_rank_blocks() ? (size_t)O.ranks : 1;
    int n = 0;
    for (size_t bytes = O.minb; bytes <= O.maxb && n < MAX_SIZES; bytes = (size_t)((double)bytes * O.factor)) {
        counts[n] = bytes / 4 / blocks;
        totals[n] = counts[n] * 4 * blocks;
        n++;
    }
    return n;
}

/* nccl-tests' bus bandwidth factor of O.coll. */
static double bus_factor(void)
{
    double P = O.ranks;
    switch (O.coll) {
    case PLX_COLL_ALLREDUCE: return 2 * (P - 1) / P;
    case PLX_COLL_ALLGATHER: case PLX_COLL_REDUCE_SCATTER: return (P - 1) / P;
    default: return 1;
    }
}

/* O.coll's table of every algorithm; 1 where a run failed. */
static int sweep(FILE *csv)
{
    const char *coll = plx_coll_name(O.coll);
    print_header(coll);
    size_t counts[MAX_SIZES], totals[MAX_SIZES];
    int nsizes = row_sizes(counts, totals), status = 0;
    static double ns[MAX_ALGOS][MAX_SIZES];
    for (int a = 0; a < O.nalgo; a++)
        run(O.algos[a], 0, NULL, counts, nsizes, ns[a]);
    for (int k = 0; k < nsizes; k++)
        if (print_row(csv, coll, totals[k], counts[k], bus_factor(), ns, k) != 0)
            status = 1;
    return status;
}

/* The collectives (PLX_BIT(coll)) --backend runs natively: as a one-rank
 * communicator of it says, made with the runs' configuration (so a sim
 * one models as they do), else as its loaded plugin declares; -1 (said)
 * where plexus knows no such backend or could not load it. */
static long target_native(void)
{
    char kv[N_MODEL_KEYS + 1][128];
    const char *ov[N_MODEL_KEYS + 3] = {"sim.model=true"};
    ov[model_overrides(ov, 1, kv)] = NULL;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = O.backend;
    o.init = "mem://whatif-target";
    o.rank = 0;
    o.size = 1;
    o.overrides = ov;
    struct plx_comm *comm = NULL;
    uint32_t mask = 0;
    if (plx_comm_init(&o, &comm) == 0) {
        for (int k = 0; k < PLX_COLL_SEND; k++)
            if (plx_comm_native(comm, k, PLX_F32, PLX_SUM) == 1)
                mask |= 1u << k;
        plx_comm_destroy(comm);
        return mask;
    }
    int i = plx_backend_find(O.backend);
    struct plx_backend_info b = {.struct_size = sizeof b};
    if (i < 0 || plx_backend_info((size_t)i, &b) != 0) {
        fprintf(stderr, "plexus-whatif: --backend %s: %s\n", O.backend, plx_last_error());
        return -1;
    }
    if (!b.abi_major) {
        fprintf(stderr, "plexus-whatif: --backend %s: cannot tell which collectives it runs natively: not loaded "
                        "here (%s)\n", O.backend, b.reason);
        return -1;
    }
    return b.collectives;
}

/* O.coll's rows into f, counted in *rows; 1 where a run failed. A
 * collective that the backend runs natively and the model over messages,
 * or the other way round, gets no rows: the model's time is not that of
 * what runs. */
static int emit_coll(FILE *f, long target, int *rows)
{
    size_t counts[MAX_SIZES], totals[MAX_SIZES];
    double ns[MAX_SIZES];
    int nsizes = row_sizes(counts, totals), status = 0;
    int native = run("auto", 1, O.tuning, counts, nsizes, ns);
    const char *name = plx_coll_name(O.coll);
    if (O.backend && native != !!(target & (1L << O.coll))) {
        fprintf(f, "# no %s: %s runs it %s, the model %s\n", name, O.backend, native ? "over messages" : "natively",
                native ? "natively" : "over messages");
        fprintf(stderr, "plexus-whatif: --emit-estimates: no %s rows: %s runs it %s, the model %s\n", name,
                O.backend, native ? "over messages" : "natively", native ? "natively" : "over messages");
        return 0;
    }
    for (int k = 0; k < nsizes; k++) {
        if (ns[k] >= 0)
            *rows += fprintf(f, "%s %d %zu %.17g\n", name, O.ranks, totals[k], ns[k] / 1e9) > 0;
        else if (runs(counts[k]))
            status = 1;
    }
    return status;
}

/* The [core] estimates table: each collective's time by size of what the
 * core would run, its own choice ("auto"), through the tuner table this
 * run wrote where there is one, else as the configuration says (its
 * [core] tuner and allreduce_algo); 1 where a run failed. Written beside
 * the file and renamed over it, so a job that reads the table meanwhile
 * reads the old one or the new one, whole. */
static int emit_estimates(void)
{
    long target = O.backend ? target_native() : 0;
    if (target < 0)
        return 1;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", O.estimates, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        return 1;
    }
    fprintf(f, "# plexus [core] estimates table, written by plexus-whatif: the modelled time of the core's choice\n"
               "# %d ranks, %d host(s)%s%s; allreduce through %s\n",
            O.ranks, O.hosts, O.model ? ", model " : "", O.model ? O.model : "",
            O.tuning ? O.tuning : "the configured choice");
    if (O.backend)
        fprintf(f, "backend %s\n", O.backend);
    fprintf(f, "# COLL RANKS BYTES SECONDS\n");
    int status = 0, rows = 0;
    for (int c = 0; c < O.ncoll; c++) {
        O.coll = O.colls[c];
        status |= emit_coll(f, target, &rows);
    }
    if (rows == 0) {
        fprintf(stderr, "plexus-whatif: --emit-estimates: no rows, %s is left as it was\n", O.estimates);
        fclose(f);
        remove(tmp);
        return 1;
    }
    if (fclose(f) != 0 || rename(tmp, O.estimates) != 0) {
        perror(O.estimates);
        remove(tmp);
        return 1;
    }
    printf("# estimates: %s (%s%s)\n", O.estimates, O.backend ? "backend " : "every backend",
           O.backend ? O.backend : "");
    return status;
}

int main(int argc, char **argv)
{
    int status = parse_args(argc, argv);
    if (status >= 0)
        return status;
    /* A rank's large blocks (the core's arrays of one entry per peer) must
     * stay mappings that are never touched: glibc raises its mmap threshold
     * past large blocks freed, and then takes them from the heap, where
     * calloc writes them. */
    mallopt(M_MMAP_THRESHOLD, 64 << 10);
    if (O.model) {
        FILE *f = fopen(O.model, "r");
        if (!f) {
            perror(O.model);
            return 2;
        }
        fclose(f);
        /* Read with the process's configuration: the drop-in layers over it. */
        setenv("PLEXUS_CONFIG", O.model, 1);
    }
    if (load_sim() != 0)
        return 1;
    FILE *csv = NULL;
    if (O.csv && !(csv = fopen(O.csv, "w"))) {
        perror(O.csv);
        return 2;
    }
    if (tuning_open() != 0)
        return 2;
    if (csv)
        fprintf(csv, "ranks,hosts,bytes,algorithm,time_us,algbw_gbs,busbw_gbs,coll\n");
    status = 0;
    for (int c = 0; c < O.ncoll; c++) {
        O.coll = O.colls[c];
        status |= sweep(csv);
    }
    if ((csv && fclose(csv) != 0) || (tuning && fclose(tuning) != 0))
        status = 1;
    /* After the tuner table is whole: the core's choice reads it. */
    if (O.estimates)
        status |= emit_estimates();
    return status;
}
