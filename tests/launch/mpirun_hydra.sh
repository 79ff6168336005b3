#!/bin/sh
# plexus under MPICH's mpirun (Hydra, PMI-1 on PMI_FD) on a non-MPI backend,
# with no MASTER_ADDR: mpirun.mpich -np 2 and -np 4 of plexus-bench --check
# on tcp and on shm; plexus-info names the PMI bootstrap; the mpi backend
# shares the PMI connection with MPICH; a rank that never reaches
# plx_comm_init ends rank 0's bootstrap with a timeout that says so.
#   sh mpirun_hydra.sh BUILD_ROOT
set -u
build=$1
bench="$build/tools/plexus-bench"
info="$build/tools/plexus-info"
command -v mpirun.mpich >/dev/null 2>&1 || { echo "SKIP: mpirun.mpich (mpich) is not installed"; exit 77; }
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT RANK WORLD_SIZE PMIX_NAMESPACE PMIX_RANK PMI_FD PMI_RANK PMI_SIZE
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
unset SLURM_PROCID SLURM_NTASKS SLURM_JOB_ID SLURM_STEP_ID SLURM_STEP_NODELIST
hydra() {
    to=$1
    shift
    timeout "$to" mpirun.mpich "$@"
}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# plexus-info under Hydra: every rank says it meets through PMI.
out=$(PLEXUS_BACKEND=tcp hydra 60 -np 2 "$info" 2>&1)
lines=$(echo "$out" | grep '^bootstrap:')
echo "$lines"
[ "$(echo "$lines" | grep -c 'rank [01] of 2 (from MPICH); rendezvous: PMI at pmi://')" = 2 ] ||
    { echo "$out"; fail "plexus-info under mpirun.mpich does not name the PMI bootstrap on both ranks"; }

args="--check -b 8 -e 256K -f 8 -n 2 -w 1 --coll allreduce,broadcast,allgather"
check() { # backend np label
    out=$(PLEXUS_BACKEND=$1 hydra 120 -np "$2" "$bench" $args 2>&1)
    rc=$?
    # The table's header names the job: the backend and every rank.
    if [ $rc = 0 ] && echo "$out" | grep -q "backend $1, $2 ranks"; then
        echo "ok: mpirun.mpich -np $2 plexus-bench --check on $1$3"
    else
        echo "$out" | tail -n 20
        fail "mpirun.mpich -np $2 plexus-bench --check on $1$3: exit $rc"
    fi
}
for be in tcp shm; do
    for np in 2 4; do
        check $be $np ""
    done
done
# MPICH's MPI_Init speaks PMI on the same socket before plexus's exchange,
# and its MPI_Finalize ends the session.
if [ -e "$build/plugins/mpi/plexus-mpi-mpich.so" ]; then
    check mpi-mpich 2 " (MPICH and plexus on one PMI connection)"
fi

# Rank 1 is a program that never speaks PMI: rank 0's barrier cannot end,
# and its bootstrap times out naming the cause (no hang).
out=$(PLEXUS_BACKEND=tcp PLEXUS_CORE_TIMEOUT_MS=4000 hydra 90 -np 1 "$bench" $args : -np 1 sleep 60 2>&1)
rc=$?
echo "$out" | grep -i 'PMI bootstrap' | head -n 3
want='PMI bootstrap.*no answer to the barrier of the whole job in time'
if [ $rc != 0 ] && [ $rc != 124 ] && echo "$out" | grep -q "$want"; then
    echo "ok: a rank that never starts plexus ends the bootstrap with a timeout"
else
    echo "$out" | tail -n 20
    fail "a job with a rank that never starts plexus: exit $rc (124: it hung), or no PMI timeout error"
fi

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all mpirun.mpich (Hydra) PMI bootstrap checks passed"
