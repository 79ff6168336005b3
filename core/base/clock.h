/* clock.h - the process's monotonic clock. Stability: internal. */
#ifndef PLX_CORE_CLOCK_H
#define PLX_CORE_CLOCK_H

#include <stdint.h>

uint64_t plx__clock_ns(void);
/* The same clock at tick resolution (a few ms), never ahead of
 * plx__clock_ns and about half its cost: for the per-operation bookkeeping
 * (ledger times, retry limits) that the small-message path pays on every call. */
uint64_t plx__clock_coarse_ns(void);

#endif
