#!/bin/sh
# check_prepared.sh BACKEND NP BENCH LAUNCHER [ARGS...]: prepared collectives
# on BACKEND run through the plugin's own prepared call (the core's debug
# line "prepared in backend" for every collective on every rank) and check
# every element, in and out of place: `LAUNCHER ARGS... BENCH --prepared ...`
# on NP ranks (a launcher that exits 77, nothing to run on, skips).
be=$1 np=$2 bench=$3
shift 3
out=$(PLEXUS_CORE_LOG_LEVEL=debug "$@" "$bench" --backend "$be" --prepared --check --coll all -b 0 -e 1M -f 8 -n 3 \
      -w 1 -d f32 -o sum 2>&1)
rc=$?
[ $rc = 77 ] && { echo "$out"; exit 77; }
[ $rc = 0 ] || { echo "$out" | grep -v DEBUG | tail -40; echo "FAIL: prepared run exited $rc"; exit 1; }
. "$(dirname "$0")/prepared_lines.sh"
prepared_everywhere "$out" "$be" "$np" || exit 1
echo "$be P$np: every collective prepared in the backend, checked"
