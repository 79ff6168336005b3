/* ranks.h - run N ranks as threads of this process on the sim backend (or
 * any in-process backend), each with its own communicator. */
#ifndef PLEXUS_TEST_RANKS_H
#define PLEXUS_TEST_RANKS_H

#include "plexus/plexus.h"
#include "check.h" /* CHECK, for every test that runs ranks */

struct rank_ctx {
    struct plx_comm *comm;
    int rank, size;
    void *arg;
};

/* Rank `rank` of a size-rank job on backend, rendezvous at init
 * (overrides: NULL or a NULL-terminated "section.key=value" list):
 * plx_comm_init's status, the communicator in *c. */
int join_rank(const char *backend, const char *init, int rank, int size, int64_t timeout_ms,
              const char *const *overrides, struct plx_comm **c);

/* Runs fn on `size` threads; each gets a communicator built with backend,
 * init "mem://<unique>", the given overrides and timeout. A thread whose
 * init fails gets comm NULL and fn still runs (to test init errors).
 * Returns the largest value fn returned. */
int run_ranks(int size, const char *backend, const char *const *overrides, int64_t timeout_ms,
              int (*fn)(struct rank_ctx *ctx, int init_status), void *arg);


#endif
