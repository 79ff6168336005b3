#!/bin/sh
# check_states.sh PLEXUS_INFO PLEXUS_BENCH IMPL...: the documented states of
# the MPI plugins that were built (IMPL: openmpi, mpich) and of the `mpi`
# alias: without a launcher, and under the other implementation's launcher
# (where the plugin's MPI would otherwise silently run as size 1; its drop-in's
# requires_env keeps it from being loaded at all).
info=$1 bench=$2
shift 2
fail=0
expect() { # expect CASE TEXT OUTPUT
    echo "$3" | grep -q "$2" || { echo "FAIL $1: wanted '$2' in: $3"; fail=1; }
}
ompirun() { timeout 60 mpirun.openmpi --allow-run-as-root -x PLEXUS_CONFIG_PATH "$@"; }
out=$("$info" --backend mpi) && { echo "FAIL: the mpi alias usable without a launcher"; fail=1; }
expect no-launcher-alias "unavailable: not started by an MPI launcher" "$out"
for impl in "$@"; do
    case $impl in
    openmpi) launcher=mpirun.openmpi other=mpirun.mpich ;;
    mpich) launcher=mpirun.mpich other=mpirun.openmpi ;;
    *) echo "unknown implementation $impl"; exit 2 ;;
    esac
    out=$("$info" --backend mpi-$impl) && { echo "FAIL: mpi-$impl usable without a launcher"; fail=1; }
    expect no-launcher-$impl "unavailable: not started by $launcher" "$out"
    command -v $other >/dev/null || { echo "note: $other not installed, wrong-launcher case of mpi-$impl not run"; continue; }
    if [ $impl = openmpi ]; then
        out=$(timeout 60 mpirun.mpich -np 1 "$info" --backend mpi-openmpi) && { echo "FAIL: openmpi plugin usable under MPICH"; fail=1; }
        expect wrong-launcher-openmpi "not started by mpirun.openmpi (no OMPI_COMM_WORLD_SIZE in the environment) (not loaded)" "$out"
        out=$(timeout 60 mpirun.mpich -np 2 "$bench" --backend mpi-openmpi -b 8 -e 8 2>&1) && { echo "FAIL: init under the wrong launcher"; fail=1; }
        expect wrong-launcher-init-openmpi "not started by mpirun.openmpi" "$out"
    else
        out=$(ompirun -np 1 "$info" --backend mpi-mpich) && { echo "FAIL: mpich plugin usable under Open MPI"; fail=1; }
        expect wrong-launcher-mpich "not started by mpirun.mpich (no PMI_SIZE in the environment) (not loaded)" "$out"
        out=$(ompirun -np 2 "$bench" --backend mpi-mpich -b 8 -e 8 2>&1) && { echo "FAIL: init under the wrong launcher"; fail=1; }
        expect wrong-launcher-init-mpich "not started by mpirun.mpich" "$out"
    fi
    # the alias follows the launcher
    if command -v $launcher >/dev/null; then
        if [ $impl = openmpi ]; then out=$(ompirun -np 1 "$info" --backend mpi); else out=$(timeout 60 mpirun.mpich -np 1 "$info" --backend mpi); fi
        expect alias-under-$launcher "alias of mpi-$impl" "$out"
        expect alias-usable-under-$launcher "state: *usable" "$out"
    fi
done
[ $fail = 0 ] && echo "MPI plugin states as documented"
exit $fail
