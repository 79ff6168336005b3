#!/bin/sh
# run_mpi.sh IMPL NP PROGRAM [ARGS...]: run PROGRAM on NP ranks under the
# launcher of IMPL (openmpi | mpich), or skip (77) if that launcher is absent.
impl=$1 np=$2
shift 2
# abi-mpich, abi-openmpi: plexus-mpi-abi with libmpi_abi.so.1 pointing at that
# implementation's ABI library (a private link first on LD_LIBRARY_PATH, as
# Debian's alternatives would), under that implementation's launcher.
case $impl in
abi-*)
    flavour=${impl#abi-}
    lib=$(ls /usr/lib/*/libmpi_abi_"$flavour".so.1* /usr/lib/libmpi_abi_"$flavour".so.1* 2>/dev/null | head -n 1)
    [ -n "$lib" ] || { echo "skip: no libmpi_abi_$flavour.so.1 (the MPI-5 ABI library of $flavour)"; exit 77; }
    dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-mpi-abi.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
    ln -s "$lib" "$dir/libmpi_abi.so.1"
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    plugin=${PLEXUS_BUILD_ROOT:-.}/plugins/mpi/plexus-mpi-abi.so
    echo "run_mpi: $plugin ($(sha256sum "$plugin" | cut -c1-16)) with libmpi_abi.so.1 -> $lib"
    impl=$flavour
    if [ "$flavour" = openmpi ]; then
        set -- -x LD_LIBRARY_PATH "$@"
    fi
    ;;
esac
case $impl in
openmpi)
    command -v mpirun.openmpi >/dev/null || { echo "skip: mpirun.openmpi not installed"; exit 77; }
    # Open MPI forwards only the variables named with -x: every PLEXUS_* that is set
    fwd=$(env | sed -n 's/^\(PLEXUS_[A-Za-z0-9_]*\)=.*/-x \1/p' | tr '\n' ' ')
    timeout 150 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -np "$np" $fwd "$@"
    exit $? ;;
mpich)
    command -v mpirun.mpich >/dev/null || { echo "skip: mpirun.mpich not installed"; exit 77; }
    timeout 150 mpirun.mpich -np "$np" "$@" # hydra forwards the whole environment
    exit $? ;;
esac
echo "unknown MPI implementation $impl"
exit 2
