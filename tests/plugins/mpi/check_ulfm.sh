#!/bin/sh
# check_ulfm.sh RUN_MPI IMPL PROGRAM PLEXUS_INFO: ulfm_mpi on 2 ranks under
# IMPL's launcher, then plexus-info under it: the plugin's description says
# what revoke maps to (MPIX_Comm_revoke) or why ULFM is absent.
run_mpi=$1 impl=$2 prog=$3 info=$4
be=mpi-${impl%%-*} # abi-mpich, abi-openmpi: mpi-abi
"$run_mpi" "$impl" 2 "$prog" "$be"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: ulfm_mpi exited $rc"; exit 1; }
out=$("$run_mpi" "$impl" 1 "$info" 2>&1)
line=$(echo "$out" | sed -n "/^$be\$/,/^\$/p" | grep 'description:')
echo "plexus-info: $line"
echo "$line" | grep -q 'revoke: \(MPIX_Comm_revoke (ULFM)\|no, ULFM is absent\)' ||
    { echo "FAIL: plexus-info does not say what revoke maps to on $be:"; echo "$out"; exit 1; }
