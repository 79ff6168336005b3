/* host.h - the services struct the core hands to each plugin. Stability: internal. */
#ifndef PLX_CORE_HOST_H
#define PLX_CORE_HOST_H

#include "plexus/backend.h"

/* Fill *h with the core's services; ctx is the struct plx__backend the
 * host belongs to (for log category, error prefix and config section). */
void plx__host_init(struct plx_host *h, void *ctx);
uint64_t plx__clock_ns(void);
/* The same clock at tick resolution (a few ms), never ahead of
 * plx__clock_ns and about half its cost: for the per-operation bookkeeping
 * (ledger times, retry limits) that the small-message path pays on every call. */
uint64_t plx__clock_coarse_ns(void);

#endif
