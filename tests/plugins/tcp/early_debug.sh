#!/bin/sh
# early_debug.sh PLEXUS_RUN EARLY_DEBUG - a 2-rank tcp job with
# PLEXUS_DEBUG=tcp whose one message comes before its receive is posted:
# the job passes, the backend's own debug lines show (the address a rank
# publishes), and rank 1 reports the payload it copied twice (at least
# that one: the barrier's may come early too).
set -u
run=$1
prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
PLEXUS_DEBUG=tcp "$run" -n 2 --timeout 60 "$prog" >"$out" 2>&1
rc=$?
cat "$out"
fail=0
[ $rc = 0 ] || { echo "FAILED: the job exited $rc"; fail=1; }
grep -q "DEBUG tcp '[^']*': rank 0 publishes" "$out" ||
    { echo "FAILED: PLEXUS_DEBUG=tcp showed no debug line of the tcp backend"; fail=1; }
# The message, at least (the barrier's may have come early too).
early=$(sed -n "s/.*DEBUG tcp '[^']*': rank 1: \([0-9]*\) payload(s) (\([0-9]*\) bytes) came before their receive was posted.*/\1 \2/p" "$out")
set -- $early
[ $# = 2 ] && [ "$1" -ge 1 ] && [ "$2" -ge 1024 ] ||
    { echo "FAILED: rank 1 did not report its early payload of 1024 bytes (got: '$early')"; fail=1; }
exit $fail
