#!/bin/sh
# check_collv_native.sh RUN_MPI IMPL NP TEST_COLLV: alltoallv/allgatherv on
# mpi-IMPL take the native path (the plugin's debug line "runs natively
# (MPI_...)" on every rank), and with native_collv = false the core's
# generic one (no such line); both pass test_collv's element checks and its
# disagreeing-counts cases (check_counts = true names the ranks natively).
run=$1 impl=$2 np=$3 prog=$4
be=mpi-${impl%%-*} # abi-mpich, abi-openmpi: mpi-abi
sec=$(echo "MPI_${impl%%-*}" | tr a-z A-Z)
out=$(env PLEXUS_DEBUG=$be PLEXUS_${sec}_CHECK_COUNTS=true sh "$run" "$impl" "$np" "$prog" --backend "$be" 2>&1)
rc=$?
[ $rc = 77 ] && { echo "$out"; exit 77; }
[ $rc = 0 ] || { echo "$out" | tail -40; echo "FAIL: native run exited $rc"; exit 1; }
n=$(echo "$out" | grep -c "$be: rank [0-9]*: alltoallv runs natively (MPI_")
[ "$n" = "$np" ] || { echo "$out" | grep -i native; echo "FAIL: $n of $np ranks logged the native alltoallv"; exit 1; }
out=$(env PLEXUS_DEBUG=$be PLEXUS_${sec}_NATIVE_COLLV=false sh "$run" "$impl" "$np" "$prog" --backend "$be" 2>&1)
rc=$?
[ $rc = 0 ] || { echo "$out" | tail -40; echo "FAIL: generic run (native_collv = false) exited $rc"; exit 1; }
if echo "$out" | grep -q "runs natively (MPI_"; then echo "FAIL: native path taken with native_collv = false"; exit 1; fi
echo "$be P$np: native and generic alltoallv/allgatherv ok"
