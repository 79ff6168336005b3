/* host.h - the services struct the core hands to each plugin. Stability: internal. */
#ifndef PLX_CORE_HOST_H
#define PLX_CORE_HOST_H

#include "clock.h" /* plx__clock_ns, which the host hands to plugins */
#include "plexus/backend.h"

struct plx__backend;

/* What a host table's ctx points at: the backend it serves (log category,
 * config section) and, for a communicator's instance (ABI 1.5), that
 * communicator's name and configuration (NULL in the process-wide table). */
struct plx__host_ctx {
    const struct plx__backend *be;
    const char *comm;
    const struct plx_config *config; /* what the instance's config_get reads */
};

/* Fill *h with the core's services for ctx (its owner keeps it alive). */
void plx__host_init(struct plx_host *h, struct plx__host_ctx *ctx);

#endif
