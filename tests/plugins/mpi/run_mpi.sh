#!/bin/sh
# run_mpi.sh IMPL NP PROGRAM [ARGS...]: run PROGRAM on NP ranks under the
# launcher of IMPL (openmpi | mpich), or skip (77) if that launcher is absent.
impl=$1 np=$2
shift 2
case $impl in
openmpi)
    command -v mpirun.openmpi >/dev/null || { echo "skip: mpirun.openmpi not installed"; exit 77; }
    # Open MPI forwards only the variables named with -x: every PLEXUS_* that is set
    fwd=$(env | sed -n 's/^\(PLEXUS_[A-Za-z0-9_]*\)=.*/-x \1/p' | tr '\n' ' ')
    exec timeout 150 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -np "$np" $fwd "$@" ;;
mpich)
    command -v mpirun.mpich >/dev/null || { echo "skip: mpirun.mpich not installed"; exit 77; }
    exec timeout 150 mpirun.mpich -np "$np" "$@" ;; # hydra forwards the whole environment
esac
echo "unknown MPI implementation $impl"
exit 2
