#!/bin/sh
# run_mpi.sh IMPL NP PROGRAM [ARGS...]: run PROGRAM on NP ranks under the
# launcher of IMPL (openmpi | mpich), or skip (77) if that launcher is absent.
impl=$1 np=$2
shift 2
case $impl in
openmpi)
    command -v mpirun.openmpi >/dev/null || { echo "skip: mpirun.openmpi not installed"; exit 77; }
    exec timeout 150 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
        -x PLEXUS_CONFIG_PATH -x PLEXUS_BACKEND "$@" ;;
mpich)
    command -v mpirun.mpich >/dev/null || { echo "skip: mpirun.mpich not installed"; exit 77; }
    exec timeout 150 mpirun.mpich -np "$np" "$@" ;;
esac
echo "unknown MPI implementation $impl"
exit 2
