/* sim_fibers.h - the sim plugin's coroutine ranks and model clock, for the
 * model tests: the plugin exports them (plexus_sim_run_ranks,
 * plexus_sim_model_clock_ns); a test dlopens the plugin of the build. */
#ifndef PLEXUS_TEST_SIM_FIBERS_H
#define PLEXUS_TEST_SIM_FIBERS_H

#include <stddef.h>
#include <stdint.h>

#include "plexus/plexus.h"

struct sim_fibers {
    double (*model_clock)(void);
    int (*run_ranks)(int nranks, size_t stack_bytes, void (*body)(int rank, void *arg), void *arg);
};

/* Load both from $PLEXUS_BUILD_ROOT/plugins/sim/plexus-sim.so: 0, or -1
 * after saying on stderr why not. */
int sim_fibers_load(struct sim_fibers *f);

/* Load the plugin and run body as nranks coroutine ranks (1 MiB stacks) of
 * the world url names, written there as "mem://NAME-PID": 0 with
 * plexus_sim_run_ranks's status in *rc, or 77 after saying why not (the
 * test's skip). */
int sim_fibers_run_world(const char *name, int nranks, void (*body)(int rank, void *arg), char *url, size_t url_len,
                         int *rc);

#endif
