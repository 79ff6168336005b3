/* plx_comm_estimate on sim communicators (ranks as threads).
 *
 *   test_sim_estimate           the API: bad arguments, no table, a table
 *                               for another backend, at another world size,
 *                               beyond its sizes, malformed (file:line), a
 *                               file written anew, and its answers
 *   test_sim_estimate e2e FILE P  each of FILE's rows at P ranks (FILE from
 *                               plexus-whatif --emit-estimates, the model in
 *                               PLEXUS_CONFIG): plx_comm_estimate answers the
 *                               row's time, and the collective run for real
 *                               (the data moved, default core keys) ends at
 *                               that modelled time on the latest rank
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranks.h"

static int failures;
static double (*model_clock)(void);

struct job {
    int coll;
    size_t bytes;         /* the row's, as plx_comm_estimate takes them */
    int run;              /* also run coll for real */
    int rc;               /* rank 0's plx_comm_estimate */
    double seconds;       /* its answer */
    char err[1024];       /* its message, or plx_comm_init's */
    double end_ns[64];    /* each rank's modelled clock after the run */
    int bad;              /* ranks whose run failed */
};

/* coll of j->bytes, in place, as plexus-bench sizes a row; 0 or the error. */
static int run_coll(struct rank_ctx *ctx, const struct job *j)
{
    size_t P = (size_t)ctx->size, blocks = j->coll == PLX_COLL_ALLGATHER || j->coll == PLX_COLL_REDUCE_SCATTER ? P : 1;
    size_t count = j->bytes / 4 / blocks;
    float *buf = calloc(count * blocks + 1, sizeof *buf);
    int rc = PLX_ERR_NOMEM;
    if (buf) {
        switch (j->coll) {
        case PLX_COLL_ALLREDUCE: rc = plx_allreduce(ctx->comm, buf, buf, count, PLX_F32, PLX_SUM); break;
        case PLX_COLL_ALLGATHER:
            rc = plx_allgather(ctx->comm, buf + (size_t)ctx->rank * count, buf, count, PLX_F32);
            break;
        case PLX_COLL_REDUCE_SCATTER:
            rc = plx_reduce_scatter(ctx->comm, buf, buf + (size_t)ctx->rank * count, count, PLX_F32, PLX_SUM);
            break;
        case PLX_COLL_BROADCAST: rc = plx_broadcast(ctx->comm, buf, count, PLX_F32, 0); break;
        case PLX_COLL_BARRIER: rc = plx_barrier(ctx->comm); break;
        default: rc = PLX_ERR_INVALID_ARG; break;
        }
    }
    free(buf);
    return rc;
}

static int body(struct rank_ctx *ctx, int init_status)
{
    struct job *j = ctx->arg;
    if (init_status) {
        if (ctx->rank == 0)
            snprintf(j->err, sizeof j->err, "plx_comm_init: %s", plx_last_error());
        __atomic_add_fetch(&j->bad, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (ctx->rank == 0) {
        j->rc = plx_comm_estimate(ctx->comm, j->coll, j->bytes, &j->seconds);
        snprintf(j->err, sizeof j->err, "%s", j->rc ? plx_last_error() : "");
    }
    if (j->run) {
        if (run_coll(ctx, j) != 0)
            __atomic_add_fetch(&j->bad, 1, __ATOMIC_RELAXED);
        j->end_ns[ctx->rank] = model_clock();
    }
    return 0;
}

/* Rank 0's estimate of coll at bytes on P sim ranks with the overrides. */
static struct job ask(int P, const char *const *ov, int coll, size_t bytes, int run)
{
    struct job j = {.coll = coll, .bytes = bytes, .run = run};
    if (run_ranks(P, "sim", ov, 60000, body, &j) != 0)
        j.bad++;
    return j;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
}

/* With table path at P ranks, coll of bytes answers rc (and want seconds,
 * or a message holding why). */
static void expect(const char *path, int P, int coll, size_t bytes, int rc, double want, const char *why)
{
    char kv[300];
    snprintf(kv, sizeof kv, "core.estimates=%s", path);
    const char *ov[] = {kv, NULL};
    struct job j = ask(P, path ? ov : NULL, coll, bytes, 0);
    int ok = !j.bad && j.rc == rc && (rc ? strstr(j.err, why) != NULL : fabs(j.seconds - want) <= 1e-15);
    printf("%s %s of %zu B on %d ranks: %s (%.9g s) %s\n", ok ? "ok  " : "FAIL", plx_coll_name(coll), bytes, P,
           plx_err_name(j.rc), j.seconds, j.err);
    if (!ok)
        failures++;
}

static void api(void)
{
    /* Bad arguments, on a real communicator. */
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "sim";
    o.init = "mem://estimate-args";
    o.rank = 0;
    o.size = 1;
    struct plx_comm *c = NULL;
    double s;
    CHECK(plx_comm_init(&o, &c) == 0);
    CHECK(plx_comm_estimate(NULL, PLX_COLL_ALLREDUCE, 8, &s) == PLX_ERR_INVALID_ARG);
    CHECK(plx_comm_estimate(c, PLX_COLL_ALLREDUCE, 8, NULL) == PLX_ERR_INVALID_ARG);
    CHECK(plx_comm_estimate(c, -1, 8, &s) == PLX_ERR_INVALID_ARG);
    CHECK(plx_comm_estimate(c, PLX_COLL_COUNT, 8, &s) == PLX_ERR_INVALID_ARG);
    plx_comm_destroy(c);
    /* No table configured. */
    expect(NULL, 2, PLX_COLL_ALLREDUCE, 8, PLX_ERR_UNSUPPORTED, 0, "no [core] estimates table is configured");
    char tab[] = "/tmp/plexus-estimate-XXXXXX";
    int fd = mkstemp(tab);
    CHECK(fd >= 0);
    close(fd);
    write_file(tab, "backend sim\nallreduce 2 8 1e-5\nallreduce 2 1024 3e-5\nbarrier 2 0 4e-6\n");
    expect(tab, 2, PLX_COLL_ALLREDUCE, 8, 0, 1e-5, NULL);
    expect(tab, 2, PLX_COLL_ALLREDUCE, 516, 0, 2e-5, NULL);
    expect(tab, 2, PLX_COLL_BARRIER, 0, 0, 4e-6, NULL);
    expect(tab, 2, PLX_COLL_ALLREDUCE, 2048, PLX_ERR_UNSUPPORTED, 0, "from 8 to 1024 B, not 2048 B");
    expect(tab, 3, PLX_COLL_ALLREDUCE, 8, PLX_ERR_UNSUPPORTED, 0, "has no allreduce rows at 3 ranks (only at 2)");
    expect(tab, 2, PLX_COLL_ALLGATHER, 8, PLX_ERR_UNSUPPORTED, 0, "has no allgather rows at 2 ranks");
    /* Written anew (another size, so the file's identity changes): read anew. */
    write_file(tab, "backend sim\nallreduce 2 8 2e-5\n");
    expect(tab, 2, PLX_COLL_ALLREDUCE, 8, 0, 2e-5, NULL);
    write_file(tab, "backend tcp\nallreduce 2 8 1.0e-5\n");
    expect(tab, 2, PLX_COLL_ALLREDUCE, 8, PLX_ERR_UNSUPPORTED, 0, "is a table for backend tcp, not sim");
    /* Malformed: the estimate fails naming file:line; the communicator works. */
    write_file(tab, "backend sim\nallreduce 2 8 1e-5\nallreduce 2 16 soon\n");
    char want[400];
    snprintf(want, sizeof want, "[core] estimates: %s:3: SECONDS 'soon'", tab);
    expect(tab, 2, PLX_COLL_ALLREDUCE, 8, PLX_ERR_CONFIG, 0, want);
    unlink(tab);
    snprintf(want, sizeof want, "%s: cannot read the estimates table", tab);
    expect(tab, 2, PLX_COLL_ALLREDUCE, 8, PLX_ERR_CONFIG, 0, want);
}

/* Every row of path at P ranks: the estimate is the row, and the run for
 * real ends at it. */
static void e2e(const char *path, int P)
{
    FILE *f = fopen(path, "r");
    if (!f || P < 1 || P > 64) {
        perror(path);
        exit(1);
    }
    char kv[4200], line[512], name[64];
    snprintf(kv, sizeof kv, "core.estimates=%s", path);
    const char *ov[] = {kv, "sim.model=true", "sim.model_payload=true", NULL};
    int rows = 0, ranks;
    size_t bytes;
    double want;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%63s %d %zu %lg", name, &ranks, &bytes, &want) != 4 || ranks != P)
            continue;
        rows++;
        int coll = -1;
        for (int k = 0; k < PLX_COLL_COUNT; k++)
            if (!strcmp(name, plx_coll_name(k)))
                coll = k;
        struct job j = ask(P, ov, coll, bytes, 1);
        double end = 0;
        for (int r = 0; r < P; r++)
            end = j.end_ns[r] > end ? j.end_ns[r] : end;
        int ok = !j.bad && j.rc == 0 && j.seconds == want && fabs(end / 1e9 - want) <= 1e-9 * want;
        printf("%s %-14s %9zu B on %d ranks: table %.6f us, estimate %.6f us, run %.6f us %s\n", ok ? "ok  " : "FAIL",
               name, bytes, P, want * 1e6, j.seconds * 1e6, end / 1e3, j.err);
        if (!ok)
            failures++;
    }
    fclose(f);
    printf("%d rows at %d ranks\n", rows, P);
    if (rows == 0)
        failures++;
}

int main(int argc, char **argv)
{
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char so[4096];
    snprintf(so, sizeof so, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(model_clock = (double (*)(void))dlsym(h, "plexus_sim_model_clock_ns"))) {
        fprintf(stderr, "no sim plugin with a model at %s: %s\n", so, dlerror());
        return 1;
    }
    if (argc == 4 && !strcmp(argv[1], "e2e"))
        e2e(argv[2], atoi(argv[3]));
    else
        api();
    dlclose(h);
    printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}
