/* host.h - the services struct the core hands to each plugin. Stability: internal. */
#ifndef PLX_CORE_HOST_H
#define PLX_CORE_HOST_H

#include "clock.h" /* plx__clock_ns, which the host hands to plugins */
#include "plexus/backend.h"

/* Fill *h with the core's services; ctx is the struct plx__backend the
 * host belongs to (for log category, error prefix and config section). */
void plx__host_init(struct plx_host *h, void *ctx);

#endif
