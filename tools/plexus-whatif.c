/* plexus-whatif - which allreduce algorithm is fastest at this scale? Runs
 * the core's generic algorithms over the sim backend's network model in
 * timing-only mode (ranks are threads; messages carry sizes and virtual
 * times, not their bytes) and prints, per size, each algorithm's modelled
 * time, algbw and busbw (nccl-tests columns) and the fastest one.
 *
 *   plexus-whatif --ranks 1024 --hosts 128 --inter-latency 5us \
 *                 --inter-bandwidth 12G -b 8 -e 64M --csv out.csv
 *
 * Each row is one run on fresh communicators: the modelled time is the
 * latest rank's virtual clock when the operation returns. */
#include <dlfcn.h>
#include <getopt.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexus/plexus.h"

static const char *const ALGOS[] = {"ring", "recdbl", "tree", "rabenseifner"};
enum { NALGO = 4 };
#define RANK_STACK ((size_t)256 << 10)

struct opts {
    int ranks, hosts;
    size_t minb, maxb;
    const char *intra_lat, *intra_bw, *inter_lat, *inter_bw, *inject_bw, *csv;
};
static struct opts O = {1024, 1, 8, 64u << 20, "1us", "50G", "5us", "12G", "0", NULL};
static double (*model_clock)(void);

struct job {
    const char *const *ov;
    char init[64];
    size_t count;
    double *end_ns;
    int failed;
};

static int (*run_ranks)(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg), void *arg);

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
    if (!model_clock || !run_ranks) {
        fprintf(stderr, "plexus-whatif: the sim plugin has no network model with coroutine ranks\n");
        return -1;
    }
    return 0;
}

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
    o.timeout_ms = 600000;
    struct plx_comm *comm = NULL;
    int rc = plx_comm_init(&o, &comm);
    float *buf = calloc(j->count, sizeof *buf);
    if (!rc && !buf)
        rc = PLX_ERR_NOMEM;
    if (!rc)
        rc = plx_allreduce(comm, buf, buf, j->count, PLX_F32, PLX_SUM);
    j->end_ns[rank] = model_clock();
    if (rc && !j->failed++)
        fprintf(stderr, "plexus-whatif: rank %d: %s: %s\n", rank, plx_err_name(rc), plx_last_error());
    free(buf);
    plx_comm_destroy(comm);
}

/* Modelled ns of one allreduce of count floats with algo, or -1. */
static double run(const char *algo, size_t count)
{
    static int serial;
    char kv[8][96];
    snprintf(kv[0], sizeof kv[0], "core.allreduce_algo=%s", algo);
    snprintf(kv[1], sizeof kv[1], "sim.model_ranks_per_host=%d", O.ranks / O.hosts);
    snprintf(kv[2], sizeof kv[2], "sim.model_intra_latency=%s", O.intra_lat);
    snprintf(kv[3], sizeof kv[3], "sim.model_intra_bandwidth=%s", O.intra_bw);
    snprintf(kv[4], sizeof kv[4], "sim.model_inter_latency=%s", O.inter_lat);
    snprintf(kv[5], sizeof kv[5], "sim.model_inter_bandwidth=%s", O.inter_bw);
    snprintf(kv[6], sizeof kv[6], "sim.model_injection_bandwidth=%s", O.inject_bw);
    const char *ov[] = {"sim.model=true", "sim.model_payload=false", "core.ledger_entries=0",
                        kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], NULL};
    struct job j = {.ov = ov, .count = count, .end_ns = calloc((size_t)O.ranks, sizeof(double))};
    snprintf(j.init, sizeof j.init, "mem://whatif-%d", ++serial);
    if (!j.end_ns) {
        fprintf(stderr, "plexus-whatif: out of memory\n");
        exit(1);
    }
    /* Coroutines in virtual-time order: shared links are charged in the
     * order the model's time says, so answers across hosts repeat. */
    int rc = run_ranks(O.ranks, RANK_STACK, rank_main, &j);
    double t = 0;
    for (int i = 0; i < O.ranks; i++)
        t = j.end_ns[i] > t ? j.end_ns[i] : t;
    if (j.failed || rc)
        t = -1;
    free(j.end_ns);
    return t;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    }
    return (size_t)v;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: plexus-whatif [options]\n"
               "  --ranks N               simulated ranks (default 1024)\n"
               "  --hosts H               hosts, N/H consecutive ranks each (default 1)\n"
               "  --intra-latency T       within a host (default 1us)\n"
               "  --intra-bandwidth B/s   within a host (default 50G)\n"
               "  --inter-latency T       across hosts (default 5us)\n"
               "  --inter-bandwidth B/s   a host's NIC (default 12G, about 100 Gb/s)\n"
               "  --injection-bandwidth B/s  per rank (default 0: no limit)\n"
               "  -b, --minbytes SIZE     smallest allreduce (default 8)\n"
               "  -e, --maxbytes SIZE     largest (default 64M); sizes double\n"
               "  --csv FILE              also write size,algorithm,time_us,algbw,busbw rows\n"
               "Bandwidths take K, M, G suffixes (powers of 1024, bytes per second).\n");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"ranks", 1, 0, 'R'},         {"hosts", 1, 0, 'H'},           {"intra-latency", 1, 0, 'a'},
        {"intra-bandwidth", 1, 0, 'w'}, {"inter-latency", 1, 0, 'A'}, {"inter-bandwidth", 1, 0, 'W'},
        {"injection-bandwidth", 1, 0, 'J'}, {"minbytes", 1, 0, 'b'}, {"maxbytes", 1, 0, 'e'},
        {"csv", 1, 0, 'C'},           {"help", 0, 0, 'h'},            {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "b:e:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'R': O.ranks = atoi(optarg); break;
        case 'H': O.hosts = atoi(optarg); break;
        case 'a': O.intra_lat = optarg; break;
        case 'w': O.intra_bw = optarg; break;
        case 'A': O.inter_lat = optarg; break;
        case 'W': O.inter_bw = optarg; break;
        case 'J': O.inject_bw = optarg; break;
        case 'b': O.minb = parse_size(optarg); break;
        case 'e': O.maxb = parse_size(optarg); break;
        case 'C': O.csv = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (O.ranks < 2 || O.hosts < 1 || O.ranks % O.hosts || O.minb < 4 || O.minb > O.maxb) {
        fprintf(stderr, "plexus-whatif: need --ranks >= 2 divisible by --hosts, and 4 <= -b <= -e\n");
        return 2;
    }
    if (load_sim() != 0)
        return 1;
    FILE *csv = NULL;
    if (O.csv && !(csv = fopen(O.csv, "w"))) {
        perror(O.csv);
        return 2;
    }
    if (csv)
        fprintf(csv, "ranks,hosts,bytes,algorithm,time_us,algbw_gbs,busbw_gbs\n");
    printf("# plexus-whatif: %d ranks on %d host(s); intra %s, %s B/s; inter %s, %s B/s; injection %s B/s\n",
           O.ranks, O.hosts, O.intra_lat, O.intra_bw, O.inter_lat, O.inter_bw, O.inject_bw);
    printf("# modelled allreduce (float sum, in place); time in us, algbw and busbw in GB/s\n");
    printf("# %10s", "size(B)");
    for (int a = 0; a < NALGO; a++)
        printf(" %12s %8s %8s", ALGOS[a], "algbw", "busbw");
    printf("  fastest\n");
    int status = 0;
    for (size_t bytes = O.minb; bytes <= O.maxb; bytes *= 2) {
        size_t count = bytes / 4;
        double best = -1;
        int best_a = -1;
        printf("  %10zu", count * 4);
        for (int a = 0; a < NALGO; a++) {
            double ns = run(ALGOS[a], count);
            if (ns <= 0) {
                printf(" %12s %8s %8s", "failed", "-", "-");
                status = 1;
                continue;
            }
            double us = ns / 1e3, algbw = (double)(count * 4) / ns, busbw = algbw * 2.0 * (O.ranks - 1) / O.ranks;
            printf(" %12.2f %8.3f %8.3f", us, algbw, busbw);
            if (csv)
                fprintf(csv, "%d,%d,%zu,%s,%.3f,%.4f,%.4f\n", O.ranks, O.hosts, count * 4, ALGOS[a], us, algbw,
                        busbw);
            if (best < 0 || ns < best) {
                best = ns;
                best_a = a;
            }
        }
        printf("  %s\n", best_a >= 0 ? ALGOS[best_a] : "-");
        fflush(stdout);
        if (csv)
            fflush(csv);
    }
    if (csv && fclose(csv) != 0)
        status = 1;
    return status;
}
