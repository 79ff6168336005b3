#!/bin/sh
# check_prepared.sh RUN_MPI IMPL NP BENCH: prepared collectives on mpi-IMPL
# run through the plugin's own prepared call (the core's debug line
# "prepared in backend" for every collective on every rank) and check every
# element; with blocking_timeout = true the plugin declines (each run then
# goes through MPI_I* so that its timeout holds) and the results still check.
run=$1 impl=$2 np=$3 bench=$4
be=mpi-${impl%%-*} # abi-mpich, abi-openmpi: mpi-abi
sec=$(echo "MPI_${impl%%-*}" | tr a-z A-Z)
args="--backend $be --prepared --check --coll all -b 0 -e 256K -f 8 -n 3 -w 1 -d f32 -o sum"
out=$(env PLEXUS_CORE_LOG_LEVEL=debug sh "$run" "$impl" "$np" "$bench" $args 2>&1)
rc=$?
[ $rc = 77 ] && { echo "$out"; exit 77; }
[ $rc = 0 ] || { echo "$out" | grep -v DEBUG | tail -40; echo "FAIL: prepared run exited $rc"; exit 1; }
. "$(dirname "$0")/../../common/prepared_lines.sh"
prepared_everywhere "$out" "$be" "$np" || exit 1
out=$(env PLEXUS_CORE_LOG_LEVEL=debug PLEXUS_${sec}_BLOCKING_TIMEOUT=true sh "$run" "$impl" "$np" "$bench" $args 2>&1)
rc=$?
[ $rc = 0 ] || { echo "$out" | grep -v DEBUG | tail -40; echo "FAIL: blocking_timeout run exited $rc"; exit 1; }
echo "$out" | grep -q "total wrong elements: 0" || { echo "FAIL: blocking_timeout run unchecked"; exit 1; }
echo "$out" | grep -q "does not prepare it (.*blocking_timeout" ||
    { echo "FAIL: blocking_timeout = true did not decline the backend's prepared call"; exit 1; }
if echo "$out" | grep -q "prepared in backend"; then echo "FAIL: prepared in the backend despite blocking_timeout"; exit 1; fi
echo "$be P$np: prepared collectives through the plugin and, with blocking_timeout, through MPI_I*: ok"
