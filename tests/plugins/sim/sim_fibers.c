#include "sim_fibers.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int sim_fibers_load(struct sim_fibers *f)
{
    const char *root = getenv("PLEXUS_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/sim/plexus-sim.so", root ? root : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(f->model_clock = (double (*)(void))dlsym(h, "plexus_sim_model_clock_ns")) ||
        !(f->run_ranks = (int (*)(int, size_t, void (*)(int, void *), void *))dlsym(h, "plexus_sim_run_ranks"))) {
        fprintf(stderr, "no sim plugin with a model and coroutine ranks at %s: %s\n", path, dlerror());
        return -1;
    }
    return 0;
}
