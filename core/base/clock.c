/* clock.c - the process's monotonic clock, for every layer that keeps time
 * (stores' deadlines, CUDA's polling, the ledger). */
#include "clock.h"

#include <time.h>

#include "plexus/plexus.h"
#include "plexus/plugin.h"

_Static_assert(PLX__NEVER == PLX_DEADLINE_NEVER, "one spelling of no deadline");

uint64_t plx__clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The plugin SDK's rule, so that core and plugins read a timeout alike. */
uint64_t plx__deadline_ms(int64_t timeout_ms)
{
    return plx_plugin_deadline(timeout_ms);
}

int64_t plx__ms_left(uint64_t deadline_ns)
{
    if (deadline_ns == PLX__NEVER)
        return PLX_TIMEOUT_INFINITE;
    uint64_t now = plx__clock_ns();
    return deadline_ns > now + 1000000u ? (int64_t)((deadline_ns - now) / 1000000u) : 1;
}

uint64_t plx__clock_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
