#!/bin/sh
# slurm_early_exit.sh INIT_ONCE SOURCE_ROOT - under srun without -K, a task
# that exits before plx_comm_init must not leave the others waiting out
# their timeout (60 s here): the step must end within 10 s, its output
# naming the task, on auto (shm, one node) and on tcp. And when the port
# derived from the job and step ids is taken by a program that is not a
# store, every rank fails within 10 s, not only rank 0 (the others
# connected to the squatter and waited out the timeout). Runs in a private
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
# The derived port (launcher_slurm.c: 20000 + (job * 7919 + step) % 12000)
# of the allocation's first step, held by a listener that never answers.
cat >"$PLEXUS_SLURM_DIR/taken.sh" <<EOS
#!/bin/sh
port=\$((20000 + (SLURM_JOB_ID * 7919) % 12000))
python3 -c "import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', \$port)); s.listen(64); open('$PLEXUS_SLURM_DIR/squatting', 'w').close(); time.sleep(60)" &
squat=\$!
i=0; while [ ! -e "$PLEXUS_SLURM_DIR/squatting" ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
start=\$(date +%s%N)
timeout -s KILL 90 srun -n 3 -O --mpi=none env PLEXUS_BACKEND=tcp PLEXUS_CORE_TIMEOUT_MS=60s "$prog"
echo "rc \$? after \$(( (\$(date +%s%N) - start) / 1000000 )) ms on port \$port"
kill \$squat
EOS
out=$(timeout -s KILL 120 salloc -n 3 -O sh "$PLEXUS_SLURM_DIR/taken.sh" 2>&1)
ms=$(echo "$out" | sed -n 's/^rc [0-9]* after \([0-9]*\) ms.*/\1/p')
if [ -z "$ms" ] || echo "$out" | grep -q "^rc 0 "; then
    echo "FAILED (taken port): the step did not fail:"; echo "$out" | tail -n 5; fail=1
elif [ "$ms" -gt 10000 ]; then
    echo "FAILED (taken port): the step took $ms ms to end"; echo "$out" | tail -n 5; fail=1
elif [ "$(echo "$out" | grep -c "init failed")" -lt 3 ] || [ "$(echo "$out" | grep "init failed" | grep -c "Slurm task 0")" -lt 2 ]; then
    echo "FAILED (taken port): not every rank failed saying why:"; echo "$out" | tail -n 5; fail=1
else
    echo "ok (taken port): every rank failed, the step ended in $ms ms"; echo "$out" | grep "init failed"
fi
[ $fail = 0 ] && echo ok
exit $fail
