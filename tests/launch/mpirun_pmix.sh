#!/bin/sh
# plexus under Open MPI's mpirun (its PMIx server) on a non-MPI backend, with
# no MASTER_ADDR: mpirun -np 2 and -np 4 of plexus-bench --check on tcp and
# on shm; plexus-info names the PMIx bootstrap; a rank that never reaches
# plx_comm_init ends rank 0's bootstrap with a timeout that says so.
#   sh mpirun_pmix.sh BUILD_ROOT
set -u
build=$1
bench="$build/tools/plexus-bench"
info="$build/tools/plexus-info"
command -v mpirun.openmpi >/dev/null 2>&1 || { echo "SKIP: mpirun.openmpi (openmpi-bin) is not installed"; exit 77; }
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT RANK WORLD_SIZE PMIX_NAMESPACE PMIX_RANK
unset SLURM_PROCID SLURM_NTASKS SLURM_JOB_ID SLURM_STEP_ID SLURM_STEP_NODELIST
ompirun() {
    to=$1
    shift
    timeout "$to" mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "$@"
}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# plexus-info under mpirun: every rank says it meets through PMIx.
out=$(PLEXUS_BACKEND=tcp ompirun 60 -np 2 "$info" 2>&1)
lines=$(echo "$out" | grep '^bootstrap:')
echo "$lines"
if echo "$lines" | grep -q "without PMIx's header\|libpmix cannot be loaded\|libpmix lacks"; then
    echo "SKIP: $(echo "$lines" | head -n 1 | sed 's/.*rendezvous: //')"
    exit 77
fi
[ "$(echo "$lines" | grep -c 'rank [01] of 2 (from Open MPI); rendezvous: PMIx at pmix://')" = 2 ] ||
    { echo "$out"; fail "plexus-info under mpirun does not name the PMIx bootstrap on both ranks"; }

args="--check -b 8 -e 256K -f 8 -n 2 -w 1 --coll allreduce,broadcast,allgather"
for be in tcp shm; do
    for np in 2 4; do
        out=$(PLEXUS_BACKEND=$be ompirun 120 -np "$np" "$bench" $args 2>&1)
        rc=$?
        # The table's header names the job: the backend and every rank.
        if [ $rc = 0 ] && echo "$out" | grep -q "backend $be, $np ranks"; then
            echo "ok: mpirun -np $np plexus-bench --check on $be"
        else
            echo "$out" | tail -n 20
            fail "mpirun -np $np plexus-bench --check on $be: exit $rc"
        fi
    done
done

# Rank 1 is a program that never calls plx_comm_init: rank 0's fence cannot
# end, and its bootstrap times out naming the cause (no hang), within init's
# 4 s (the fence gets what is left of them).
out=$(PLEXUS_BACKEND=tcp PLEXUS_CORE_TIMEOUT_MS=4000 ompirun 90 -np 1 "$bench" $args : -np 1 sleep 60 2>&1)
rc=$?
echo "$out" | grep -i 'pmix' | head -n 3
fence_ms=$(echo "$out" | sed -n 's/.*PMIx bootstrap.*did not end within \([0-9]*\) ms.*/\1/p' | head -n 1)
if [ $rc != 0 ] && [ $rc != 124 ] && [ -n "$fence_ms" ] && [ "$fence_ms" -le 4000 ]; then
    echo "ok: a rank that never starts plexus ends the bootstrap with a timeout"
else
    echo "$out" | tail -n 20
    fail "a job with a rank that never starts plexus: exit $rc (124: it hung), or no PMIx timeout error"
fi

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all mpirun PMIx bootstrap checks passed"
