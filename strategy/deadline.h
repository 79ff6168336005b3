/* deadline.h - the strategy layer's timeouts by plexus's one rule
 * (plexus.h, applied by the SDK's plx_plugin_deadline): milliseconds;
 * PLX_TIMEOUT_DEFAULT takes the caller's configured default;
 * PLX_TIMEOUT_INFINITE never expires; any other negative value has expired
 * already. Deadlines are CLOCK_MONOTONIC nanoseconds, PLX_DEADLINE_NEVER
 * for none. Stability: internal. */
#ifndef PLX_STRATEGY_DEADLINE_H
#define PLX_STRATEGY_DEADLINE_H

#include <stdint.h>
#include <time.h>

#include "plexus/plugin.h"

static inline uint64_t plx__s_now_ns(void)
{
    return plx_plugin_now_ns();
}

/* timeout_ms from now; default_ms where timeout_ms is PLX_TIMEOUT_DEFAULT. */
static inline uint64_t plx__s_deadline(int64_t timeout_ms, int64_t default_ms)
{
    return plx_plugin_deadline(timeout_ms == PLX_TIMEOUT_DEFAULT ? default_ms : timeout_ms);
}

/* What is left of deadline_ns, for a call that takes a timeout in ms:
 * PLX_TIMEOUT_INFINITE for none, else at least 0. */
static inline int64_t plx__s_ms_left(uint64_t deadline_ns)
{
    if (deadline_ns == PLX_DEADLINE_NEVER)
        return PLX_TIMEOUT_INFINITE;
    uint64_t now = plx__s_now_ns();
    return now >= deadline_ns ? 0 : (int64_t)((deadline_ns - now + 999999u) / 1000000u);
}

/* deadline_ns as pthread_cond_timedwait takes it on a CLOCK_MONOTONIC
 * condition variable. */
static inline struct timespec plx__s_timespec(uint64_t deadline_ns)
{
    return (struct timespec){.tv_sec = (time_t)(deadline_ns / 1000000000u), .tv_nsec = (long)(deadline_ns % 1000000000u)};
}

#endif
