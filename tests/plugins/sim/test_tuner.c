/* [core] tuner: the core's automatic allreduce choice takes its crossover
 * points from a table. Seen three ways: the core's debug line per choice
 * (PLEXUS_DEBUG=tuner) names the algorithm and the table's line; the sim
 * model's clock equals that of the named algorithm forced; and a bad table
 * fails plx_comm_init with file:line. The data is checked too. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranks.h"

static int failures;
static double (*model_clock)(void);

struct job {
    size_t count;     /* i32 per rank */
    double end_ns;    /* rank 0's modelled clock after the op */
    int bad;          /* ranks with a wrong element or a failed call */
    char init_err[1024]; /* rank 0's plx_comm_init error */
};

static int run(struct rank_ctx *ctx, int init_status)
{
    struct job *j = ctx->arg;
    if (init_status) {
        if (ctx->rank == 0)
            snprintf(j->init_err, sizeof j->init_err, "%s", plx_last_error());
        return 0;
    }
    int32_t *v = malloc(j->count * 4);
    for (size_t i = 0; i < j->count; i++)
        v[i] = (int32_t)(i % 31) + ctx->rank;
    int rc = plx_allreduce(ctx->comm, v, v, j->count, PLX_I32, PLX_SUM);
    int P = ctx->size, wrong = rc != 0;
    for (size_t i = 0; i < j->count && !wrong; i++)
        wrong = v[i] != (int32_t)(P * (int)(i % 31) + P * (P - 1) / 2);
    if (wrong)
        __atomic_add_fetch(&j->bad, 1, __ATOMIC_RELAXED);
    if (ctx->rank == 0)
        j->end_ns = model_clock();
    free(v);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
}

/* One allreduce of count i32 on P ranks with the overrides; what the core
 * logged to stderr meanwhile into log (up to len). */
static struct job one(int P, size_t count, const char *const *ov, char *log, size_t len)
{
    struct job j = {.count = count};
    char path[] = "/tmp/plexus-tuner-log-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    int rc = run_ranks(P, "sim", ov, 30000, run, &j);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t got = pread(fd, log, len - 1, 0);
    log[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    if (rc)
        j.bad++;
    return j;
}

static void expect(int ok, const char *what, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail ? ": " : "", detail ? detail : "");
    if (!ok)
        failures++;
}

/* With the table tab, an allreduce of bytes on P ranks is algo, from line. */
static void check_choice(const char *tab, int P, size_t bytes, const char *algo, int line)
{
    char kv[300], log[8192], want[400], what[200];
    snprintf(kv, sizeof kv, "core.tuner=%s", tab);
    const char *ov[] = {"sim.model=true", "sim.model_intra_latency=2us", "sim.model_intra_bandwidth=1G", kv, NULL};
    struct job t = one(P, bytes / 4, ov, log, sizeof log);
    snprintf(want, sizeof want, "tuner: allreduce of %zu B on %d ranks: %s (%s:%d)", bytes, P, algo, tab, line);
    snprintf(what, sizeof what, "%zu B on %d ranks takes %s (line %d)", bytes, P, algo, line);
    expect(strstr(log, want) && !t.bad, what, strstr(log, want) ? (t.bad ? "wrong data" : NULL) : log);
    /* The same modelled time as the algorithm forced: it ran. */
    char forced[64];
    snprintf(forced, sizeof forced, "core.allreduce_algo=%s", algo);
    const char *ov2[] = {"sim.model=true", "sim.model_intra_latency=2us", "sim.model_intra_bandwidth=1G", forced, NULL};
    struct job f = one(P, bytes / 4, ov2, log, sizeof log);
    char times[100];
    snprintf(times, sizeof times, "tuned %.0f ns, %s forced %.0f ns", t.end_ns, algo, f.end_ns);
    expect(t.end_ns == f.end_ns && t.end_ns > 0 && !f.bad, "  its modelled time is the forced algorithm's", times);
}

static void check_bad(const char *tab, const char *text, const char *want_at)
{
    write_file(tab, text);
    char kv[300], log[8192], want[400];
    snprintf(kv, sizeof kv, "core.tuner=%s", tab);
    const char *ov[] = {kv, NULL};
    struct job j = one(2, 16, ov, log, sizeof log);
    snprintf(want, sizeof want, "%s%s", tab, want_at);
    expect(strstr(j.init_err, want) != NULL, want, j.init_err[0] ? j.init_err : "plx_comm_init succeeded");
}

int main(void)
{
    setenv("PLEXUS_DEBUG", "tuner", 1);
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(model_clock = (double (*)(void))dlsym(h, "plexus_sim_model_clock_ns"))) {
        fprintf(stderr, "no sim plugin with a model at %s: %s\n", path, dlerror());
        return 1;
    }
    char tab[] = "/tmp/plexus-tuner-XXXXXX";
    int fd = mkstemp(tab);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    /* The ring/tree crossover at 8 KiB from 3 ranks; from 6 ranks recursive
     * doubling, then rabenseifner from 4 KiB. */
    write_file(tab, "# a crossover table\n"
                    "allreduce 3 0 tree\n"
                    "allreduce 3 8192 ring   # the crossover\n"
                    "\n"
                    "allreduce 6 0 recdbl\n"
                    "allreduce 6 4096 rabenseifner\n");
    check_choice(tab, 3, 4096, "tree", 2);
    check_choice(tab, 3, 8188, "tree", 2);
    check_choice(tab, 3, 8192, "ring", 3);
    check_choice(tab, 5, 65536, "ring", 3);
    check_choice(tab, 2, 4096, "tree", 2); /* below every RANKS: the smallest group */
    check_choice(tab, 6, 1024, "recdbl", 5);
    check_choice(tab, 8, 16384, "rabenseifner", 6);
    check_bad(tab, "allreduce 3 0 tree\n\nallreduce 3 64K ring\n", ":3: FROM_BYTES '64K'");
    check_bad(tab, "allreduce 3 0 tree\nallreduce 3 0 bogus\n", ":2: ALGORITHM 'bogus'");
    check_bad(tab, "allreduce 3 4096 tree\nallreduce 3 0 ring\n", ":2: rows must ascend");
    check_bad(tab, "allgather 3 0 ring\n", ":1: expected 'allreduce");
    check_bad(tab, "# nothing\n", ": no 'allreduce");
    char missing[400];
    snprintf(missing, sizeof missing, "%s.absent", tab);
    {
        char kv[500], log[8192];
        snprintf(kv, sizeof kv, "core.tuner=%s", missing);
        const char *ov[] = {kv, NULL};
        struct job j = one(2, 16, ov, log, sizeof log);
        expect(strstr(j.init_err, missing) && strstr(j.init_err, "cannot read"), "a missing table",
               j.init_err[0] ? j.init_err : "plx_comm_init succeeded");
    }
    unlink(tab);
    dlclose(h);
    return failures ? 1 : 0;
}
