#!/bin/sh
# lowprio.sh LEVEL CMD [ARG...] - run CMD in the background's share of the CPU:
# in a session of its own whose autogroup has nice LEVEL (1-19), and at 19
# also under SCHED_IDLE. With autogroups (kernel.sched_autogroup_enabled, on
# by default) the CPU is shared between sessions before the tasks in them,
# and meson starts every test in a session of its own: a SCHED_IDLE build in
# CI's own session took as much CPU as the test beside it (measured: two
# spinning loops on one core split it evenly), where nice only counts inside
# a session. Exit status: CMD's. Where setsid, chrt or autogroups are
# missing, what is there applies (nice at least).
level=$1
shift
if [ -z "${PLEXUS_LOWPRIO_INNER:-}" ] && command -v setsid >/dev/null; then
    PLEXUS_LOWPRIO_INNER=1 exec setsid -w sh "$0" "$level" "$@"
fi
unset PLEXUS_LOWPRIO_INNER
# The session's own autogroup (a new one, setsid above); fails harmlessly without autogroups.
{ echo "$level" >/proc/self/autogroup; } 2>/dev/null
if [ "$level" -ge 19 ] && chrt --idle 0 true 2>/dev/null; then
    exec chrt --idle 0 "$@"
fi
exec nice -n "$level" "$@"
