#!/bin/sh
# launch_mode.sh PLEXUS_RUN PLEXUS_BENCH - a backend whose ranks are threads
# of one process (sim) never serves ranks that are processes: a list moves on
# to the next backend (and --check passes), a name fails at once saying why.
set -u
run=$1
bench=$2
fail=0
out=$(PLEXUS_BACKEND=sim,tcp "$run" -n 2 "$bench" -b 8 -e 64K -f 8 -n 1 -w 0 --check 2>&1) ||
    { echo "FAILED: sim,tcp under plexus-run:"; echo "$out" | tail -5; fail=1; }
echo "$out" | grep -q "total wrong elements: 0" || { echo "FAILED: sim,tcp did not check out"; fail=1; }
out=$(PLEXUS_BACKEND=sim "$run" -n 2 "$bench" -b 8 -e 8 -n 1 -w 0 2>&1) && { echo "FAILED: sim served processes"; fail=1; }
echo "$out" | grep -q "backend sim runs every rank as a thread of one process" ||
    { echo "FAILED: no reason given:"; echo "$out" | tail -3; fail=1; }
[ $fail = 0 ] && echo ok
exit $fail
