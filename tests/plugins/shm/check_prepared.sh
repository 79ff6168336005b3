#!/bin/sh
# check_prepared.sh PLEXUS_RUN BENCH NP: prepared collectives on shm run
# through the plugin's own prepared call (the core's debug line "prepared
# in backend 'shm'" for every collective on every rank) and check every
# element, in and out of place, with real processes.
run=$1 bench=$2 np=$3
out=$(PLEXUS_CORE_LOG_LEVEL=debug "$run" -n "$np" "$bench" --backend shm --prepared --check --coll all -b 0 -e 1M \
      -f 8 -n 3 -w 1 -d f32 -o sum 2>&1)
rc=$?
[ $rc = 0 ] || { echo "$out" | grep -v DEBUG | tail -40; echo "FAIL: prepared run exited $rc"; exit 1; }
. "$(dirname "$0")/../../common/prepared_lines.sh"
prepared_everywhere "$out" shm "$np" || exit 1
echo "shm P$np: every collective prepared in the backend, checked"
