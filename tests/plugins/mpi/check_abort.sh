#!/bin/sh
# check_abort.sh RUN_MPI IMPL PROGRAM BACKEND: with abort_kills_job = true,
# plx_comm_abort ends the whole job through MPI_Abort: the launcher exits
# nonzero, well before the 60 s the other ranks would wait.
run_mpi=$1 impl=$2 prog=$3 backend=$4
start=$(date +%s)
out=$("$run_mpi" "$impl" 2 "$prog" "$backend" --abort-kills-job 2>&1)
rc=$? took=$(( $(date +%s) - start ))
[ $rc = 77 ] && { echo "$out"; exit 77; }
if [ $rc = 0 ] || [ $took -ge 50 ] || echo "$out" | grep -q "MPI_Abort was not called\|still running"; then
    echo "FAIL: rc=$rc after ${took}s, wanted the job ended by MPI_Abort:"; echo "$out"; exit 1
fi
echo "job ended by MPI_Abort (launcher rc=$rc after ${took}s)"
