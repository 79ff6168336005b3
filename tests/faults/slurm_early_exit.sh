#!/bin/sh
# slurm_early_exit.sh INIT_ONCE SOURCE_ROOT - under srun without -K, a task
# that exits before plx_comm_init must not leave the others waiting out
# their timeout (60 s here): the step must end within 10 s, its output
# naming the task, on auto (shm, one node) and on tcp. Runs in a private
# single-node Slurm (tests/launch/slurm_local.sh; skips, 77, without it).
set -u
prog=$1
src=$2
if [ "${PLEXUS_SLURM_DIR:-}" = "" ]; then
    exec sh "$src/tests/launch/slurm_local.sh" sh "$0" "$@"
fi
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
fail=0
for backend in auto tcp; do
    start=$(date +%s%N)
    out=$(timeout -s KILL 90 srun -n 3 -O --mpi=none env PLEXUS_BACKEND=$backend PLEXUS_CORE_TIMEOUT_MS=60s \
          sh -c 'if [ "$SLURM_PROCID" = 2 ]; then exit 3; fi; exec "$0"' "$prog" 2>&1)
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ $rc = 0 ]; then
        echo "FAILED ($backend): the step succeeded without task 2"; fail=1
    elif [ $ms -gt 10000 ]; then
        echo "FAILED ($backend): the step took $ms ms to end (rc $rc)"; echo "$out" | tail -n 4; fail=1
    elif [ "$(echo "$out" | grep "init failed" | grep -c "Slurm task 2")" -lt 2 ]; then
        echo "FAILED ($backend): ranks 0 and 1 do not both name task 2:"; echo "$out" | tail -n 4; fail=1
    else
        echo "ok ($backend): the step ended in $ms ms"; echo "$out" | grep "init failed" | head -n 1
    fi
done
[ $fail = 0 ] && echo ok
exit $fail
