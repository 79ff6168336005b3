/* The sim network model at 1,024 ranks in timing-only mode
 * (sim.model_payload=false: messages carry sizes and virtual times, no
 * bytes), against the closed-form alpha-beta costs of the core's generic
 * algorithms at a power of two with one host and no injection limit (no
 * contention). Ranks are threads with small stacks; the program prints the
 * wall time and the peak memory of each run.
 *
 *   test_model_scale            the checks at 1,024 ranks
 *   test_model_scale P ALGO N   one allreduce of N bytes at P ranks, printed */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "plexus/plexus.h"

static int failures;
static double (*model_clock)(void);

#define ALPHA_NS 2000.0
static double beta_ns; /* 1G per second, as the key reads it: 2^30 bytes */

/* Threads of 256 KiB: 16,384 of them fit in a few GiB of address space. */
#define RANK_STACK ((size_t)256 << 10)

struct job {
    int coll;
    size_t count;      /* i32 elements (per rank for allgather) */
    const char *const *overrides;
    char init[64];
    int size;
    double *end_ns;
    int failed;
};

struct rank_arg {
    struct job *j;
    int rank;
};

static void *rank_main(void *p)
{
    struct rank_arg *ra = p;
    struct job *j = ra->j;
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.rank = ra->rank;
    o.size = j->size;
    o.init = j->init;
    o.overrides = j->overrides;
    o.timeout_ms = 600000;
    struct plx_comm *comm = NULL;
    int rc = plx_comm_init(&o, &comm);
    size_t out_n = j->coll == PLX_COLL_ALLGATHER ? j->count * (size_t)j->size : j->count;
    int32_t *in = calloc(j->count ? j->count : 1, 4), *out = calloc(out_n ? out_n : 1, 4);
    if (!rc && (!in || !out))
        rc = PLX_ERR_NOMEM;
    if (!rc)
        rc = j->coll == PLX_COLL_ALLGATHER ? plx_allgather(comm, in, out, j->count, PLX_I32)
                                           : plx_allreduce(comm, in, out, j->count, PLX_I32, PLX_SUM);
    j->end_ns[ra->rank] = model_clock();
    if (rc) {
        if (!__atomic_fetch_add(&j->failed, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "rank %d: %s\n", ra->rank, plx_last_error());
    }
    free(in);
    free(out);
    plx_comm_destroy(comm);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one collective on P threads; returns the latest rank clock (ns),
 * or -1 on failure. */
static double run(int P, int coll, const char *algo, size_t count, double *wall_s)
{
    static int counter;
    char algo_kv[64];
    snprintf(algo_kv, sizeof algo_kv, "core.allreduce_algo=%s", algo);
    /* No ledger files: each rank would scan the folder of all the others. */
    const char *ov[] = {"core.ledger_entries=0", "sim.model=true", "sim.model_payload=false", "sim.model_intra_latency=2us",
                        "sim.model_intra_bandwidth=1G", algo_kv, NULL};
    struct job j = {.coll = coll, .count = count, .overrides = ov, .size = P,
                    .end_ns = calloc((size_t)P, sizeof(double))};
    snprintf(j.init, sizeof j.init, "mem://scale-%d", ++counter);
    struct rank_arg *ra = calloc((size_t)P, sizeof *ra);
    pthread_t *th = calloc((size_t)P, sizeof *th);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RANK_STACK);
    double t0 = now_s();
    int started = 0;
    for (int i = 0; i < P; i++) {
        ra[i] = (struct rank_arg){&j, i};
        if (pthread_create(&th[i], &attr, rank_main, &ra[i]) != 0) {
            fprintf(stderr, "cannot start the thread of rank %d of %d\n", i, P);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    *wall_s = now_s() - t0;
    pthread_attr_destroy(&attr);
    double got = 0;
    for (int r = 0; r < P; r++)
        got = j.end_ns[r] > got ? j.end_ns[r] : got;
    int bad = j.failed || started < P;
    free(j.end_ns);
    free(ra);
    free(th);
    return bad ? -1 : got;
}

static int log2i(int p)
{
    int l = 0;
    while ((1 << (l + 1)) <= p)
        l++;
    return l;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Closed forms at a power of two P = 2^L, one segment per message. */
static double formula(const char *algo, int coll, int P, double n)
{
    double L = log2i(P), a = ALPHA_NS, b = beta_ns;
    if (coll == PLX_COLL_ALLGATHER) /* P - 1 sendrecv steps of one block (n per rank) */
        return (P - 1) * (a + n * b);
    if (!strcmp(algo, "recdbl")) /* L exchanges of the whole buffer */
        return L * (a + n * b);
    if (!strcmp(algo, "tree")) /* binomial reduce then broadcast: each L(a + n b) */
        return 2 * L * (a + n * b);
    if (!strcmp(algo, "rabenseifner")) /* halving then doubling: blocks n/2 .. n/P */
        return 2 * L * a + 2.0 * (P - 1) / P * n * b;
    return 2.0 * (P - 1) * a + 2.0 * (P - 1) / P * n * b; /* ring */
}

static void check(int P, const char *algo, int coll, size_t count)
{
    double n = (double)count * 4, wall;
    double got = run(P, coll, algo, count, &wall);
    double want = formula(algo, coll, P, n);
    double err = fabs(got - want) / want;
    int ok = got >= 0 && err <= 0.02;
    printf("%s %-9s %-12s P=%-5d bytes=%-8.0f model %12.0f ns formula %12.0f ns (%.2f%%) wall %.2f s, peak RSS %ld MiB\n",
           ok ? "ok  " : "FAIL", coll == PLX_COLL_ALLGATHER ? "allgather" : "allreduce", algo, P, n, got, want,
           100 * err, wall, peak_rss_kib() >> 10);
    fflush(stdout);
    if (!ok)
        failures++;
}

int main(int argc, char **argv)
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
    if (argc == 4) {
        int P = atoi(argv[1]);
        size_t bytes = strtoull(argv[3], NULL, 0);
        check(P, argv[2], PLX_COLL_ALLREDUCE, bytes / 4 ? bytes / 4 : 1);
        return failures ? 1 : 0;
    }
    const int P = 1024;
    check(P, "rabenseifner", PLX_COLL_ALLREDUCE, 1024);
    check(P, "recdbl", PLX_COLL_ALLREDUCE, 1024);
    check(P, "tree", PLX_COLL_ALLREDUCE, 1024);
    check(P, "ring", PLX_COLL_ALLGATHER, 16);
    dlclose(h);
    return failures ? 1 : 0;
}
