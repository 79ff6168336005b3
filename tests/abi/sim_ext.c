/* sim_ext.c WANT_CHARGE WANT_FOOTPRINT: the core finds sim's "plexus.sim"
 * hooks (ABI 1.11's extension, or the table slots of a plugin of 1.6 to
 * 1.10: PLEXUS_SIM_ABI_MINOR presents one) and its generic algorithms call
 * them, or, where the plugin has none, runs without them. Each hook shows
 * in the modelled time of an allreduce: charge_reduce adds the reduction's
 * cost (model_reduce_bandwidth), op_footprint the cost of copies beyond the
 * host's cache (model_host_cache); without the hook the key changes nothing. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "ranks.h"

#define P 4
#define COUNT (64 * 1024)

static double (*model_clock)(void);

struct job {
    double end_ns[P];
    int bad;
};

static int run(struct rank_ctx *ctx, int init_status)
{
    struct job *j = ctx->arg;
    if (init_status) {
        fprintf(stderr, "rank %d: init: %s\n", ctx->rank, plx_last_error());
        return 1;
    }
    static _Thread_local int32_t in[COUNT], out[COUNT];
    for (size_t i = 0; i < COUNT; i++)
        in[i] = ctx->rank + (int32_t)i;
    if (plx_allreduce(ctx->comm, in, out, COUNT, PLX_I32, PLX_SUM) != 0 || out[7] != P * 7 + P * (P - 1) / 2) {
        fprintf(stderr, "rank %d: allreduce: %s\n", ctx->rank, plx_last_error());
        __atomic_add_fetch(&j->bad, 1, __ATOMIC_RELAXED);
    }
    j->end_ns[ctx->rank] = model_clock();
    return 0;
}

/* The latest rank's modelled time for the allreduce with key (or none). */
static double timed(const char *key, const char *key2)
{
    const char *ov[] = {"sim.model=true", "sim.model_intra_latency=2us", "sim.model_intra_bandwidth=1G",
                        "core.allreduce_algo=ring", key ? key : "sim.model=true", key2 ? key2 : "sim.model=true",
                        NULL};
    struct job j = {{0}, 0};
    if (run_ranks(P, "sim", ov, 60000, run, &j) != 0 || j.bad) {
        fprintf(stderr, "FAIL: the allreduce failed (%s)\n", key ? key : "no key");
        exit(1);
    }
    double end = 0;
    for (int r = 0; r < P; r++)
        end = j.end_ns[r] > end ? j.end_ns[r] : end;
    return end;
}

static int expect(const char *hook, int want, double base, double with)
{
    printf("%s: %.0f ns without its key, %.0f ns with\n", hook, base, with);
    if (want && !(with > base * 1.05)) {
        fprintf(stderr, "FAIL: %s was not called: its key did not change the modelled time\n", hook);
        return 1;
    }
    if (!want && with != base) {
        fprintf(stderr, "FAIL: %s was called, from a plugin that has none\n", hook);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(model_clock = (double (*)(void))dlsym(h, "plexus_sim_model_clock_ns"))) {
        fprintf(stderr, "no sim plugin with a model at %s: %s\n", path, dlerror());
        return 1;
    }
    double base = timed(NULL, NULL);
    int fails = expect("charge_reduce", atoi(argv[1]), base, timed("sim.model_reduce_bandwidth=256M", NULL));
    fails += expect("op_footprint", atoi(argv[2]), base,
                    timed("sim.model_host_cache=4K", "sim.model_host_memory_bandwidth=256M"));
    return fails != 0;
}
