#!/bin/sh
# The documented states of the MPI plugins: without a launcher, and under the
# other implementation's launcher (which would otherwise run as size 1).
info=$1 bench=$2
fail=0
expect() { # expect NAME STATUS_WANTED TEXT OUTPUT
    echo "$4" | grep -q "$3" || { echo "FAIL $1: wanted '$3' in: $4"; fail=1; }
}
out=$("$info" --backend mpi-openmpi) && { echo "FAIL: mpi-openmpi usable without a launcher"; fail=1; }
expect no-launcher-openmpi 1 "unavailable: not started by mpirun.openmpi" "$out"
out=$("$info" --backend mpi-mpich) && { echo "FAIL: mpi-mpich usable without a launcher"; fail=1; }
expect no-launcher-mpich 1 "unavailable: not started by mpirun.mpich" "$out"
out=$("$info" --backend mpi) && { echo "FAIL: the mpi alias usable without a launcher"; fail=1; }
expect no-launcher-alias 1 "unavailable: not started by an MPI launcher" "$out"
if command -v mpirun.mpich >/dev/null; then
    out=$(timeout 60 mpirun.mpich -np 1 "$info" --backend mpi-openmpi) && { echo "FAIL: openmpi plugin usable under MPICH"; fail=1; }
    expect wrong-launcher 1 "started by MPICH's launcher (PMI_SIZE is set); this plugin is for Open MPI" "$out"
    out=$(timeout 60 mpirun.mpich -np 2 "$bench" --backend mpi-openmpi -b 8 -e 8 2>&1) && { echo "FAIL: init under the wrong launcher"; fail=1; }
    expect wrong-launcher-init 1 "started by MPICH's launcher" "$out"
fi
if command -v mpirun.openmpi >/dev/null; then
    out=$(timeout 60 mpirun.openmpi --allow-run-as-root -np 1 -x PLEXUS_CONFIG_PATH "$info" --backend mpi-mpich) &&
        { echo "FAIL: mpich plugin usable under Open MPI"; fail=1; }
    expect wrong-launcher-mpich 1 "started by Open MPI's launcher (OMPI_COMM_WORLD_SIZE is set); this plugin is for MPICH" "$out"
fi
[ $fail = 0 ] && echo "MPI plugin states as documented"
exit $fail
