/* clock.h - the process's monotonic clock. Stability: internal. */
#ifndef PLX_CORE_CLOCK_H
#define PLX_CORE_CLOCK_H

#include <stdint.h>

uint64_t plx__clock_ns(void);
/* No deadline: later than any time on this clock, so `now >= deadline`
 * never holds (the plugin ABI's PLX_DEADLINE_NEVER too). */
#define PLX__NEVER UINT64_MAX
/* The deadline timeout_ms from now: PLX__NEVER for PLX_TIMEOUT_INFINITE,
 * now (already passed) for any other negative value. */
uint64_t plx__deadline_ms(int64_t timeout_ms);
/* What is left of deadline_ns in milliseconds, for a call that takes a
 * timeout: PLX_TIMEOUT_INFINITE for PLX__NEVER, else at least 1 (a passed
 * deadline still gives the call one look). */
int64_t plx__ms_left(uint64_t deadline_ns);
/* The same clock at tick resolution (a few ms), never ahead of
 * plx__clock_ns and about half its cost: for the per-operation bookkeeping
 * (ledger times, retry limits) that the small-message path pays on every call. */
uint64_t plx__clock_coarse_ns(void);

#endif
