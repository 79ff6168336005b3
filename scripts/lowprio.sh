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
level=${1:-}
case $level in
[1-9] | 1[0-9]) shift ;;
*)
    echo "usage: $0 LEVEL(1-19) CMD [ARG...]" >&2
    exit 2
    ;;
esac
if [ -z "${PLEXUS_LOWPRIO_INNER:-}" ] && command -v setsid >/dev/null; then
    PLEXUS_LOWPRIO_INNER=1 exec setsid -w sh "$0" "$level" "$@"
fi
# Only in a session of our own (setsid above): the caller's autogroup holds
# the caller too. Fails harmlessly without autogroups.
if [ -n "${PLEXUS_LOWPRIO_INNER:-}" ]; then
    { echo "$level" >/proc/self/autogroup; } 2>/dev/null
fi
unset PLEXUS_LOWPRIO_INNER
if [ "$level" -ge 19 ] && chrt --idle 0 true 2>/dev/null; then
    exec chrt --idle 0 "$@"
fi
exec nice -n "$level" "$@"
