#!/bin/sh
# plexus under a real single-node Slurm (slurm_local.sh), with no
# MASTER_ADDR: srun -n 2 and -n 4 of plexus-bench --check with --mpi=none,
# pmi2 and pmix (pmix meets through PMIx's key-value space, pmi2 through
# Slurm's variables as none does); two steps of one job at the same time; sbatch of a 4-task
# step; a task that dies mid-run ends the step with its rank named.
#   sh slurm_bootstrap.sh BUILD_ROOT SOURCE_ROOT
set -u
if [ "${PLEXUS_SLURM_DIR:-}" = "" ]; then
    exec sh "$2/tests/launch/slurm_local.sh" sh "$0" "$@"
fi
build=$1
bench="$build/tools/plexus-bench"
info="$build/tools/plexus-info"
dir=$PLEXUS_SLURM_DIR
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT RANK WORLD_SIZE
export PLEXUS_BACKEND=tcp
args="--check -b 8 -e 256K -f 8 -n 2 -w 1 --coll allreduce,broadcast,allgather"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# A Slurm built without PMIx (Debian sid's 26.05) has no pmix plugin: its
# cases are skipped, saying so.
mpis="none pmi2"
if srun --mpi=list 2>&1 | grep -qw pmix; then
    mpis="$mpis pmix"
else
    echo "skip: srun --mpi=pmix: this Slurm has no pmix plugin (srun --mpi=list: $(srun --mpi=list 2>&1 |
        sed -n 's/^[[:space:]]\+//p' | tr '\n' ' '))"
fi
for mpi in $mpis; do
    for n in 2 4; do
        out=$(timeout 45 srun -n "$n" -O --mpi="$mpi" "$bench" $args 2>&1)
        rc=$?
        if [ $rc = 0 ]; then echo "ok: srun -n $n --mpi=$mpi plexus-bench --check"
        else echo "$out"; fail "srun -n $n --mpi=$mpi plexus-bench --check: exit $rc"; fi
    done
done

# Every task says it meets through the Slurm store, all at one url.
out=$(timeout 60 srun -n 2 -O "$info" 2>&1 | grep '^bootstrap:')
echo "$out"
[ "$(echo "$out" | grep -c 'rendezvous: Slurm at tcp://')" = 2 ] || fail "plexus-info under srun does not name the Slurm bootstrap"
[ "$(echo "$out" | sed 's/.*\(tcp:[^:]*:[^:]*\):.*/\1/' | sort -u | wc -l)" = 1 ] || fail "tasks of one step derive different urls"

# Under --mpi=pmix the tasks meet through PMIx: rank 0 publishes the store's
# address in the step's key-value space (no derived port).
case $mpis in
*pmix*)
    out=$(timeout 60 srun -n 2 -O --mpi=pmix "$info" 2>&1 | grep '^bootstrap:')
    echo "$out"
    [ "$(echo "$out" | grep -c 'rendezvous: PMIx at pmix://')" = 2 ] ||
        fail "plexus-info under srun --mpi=pmix does not name the PMIx bootstrap"
    ;;
esac

# Under --mpi=pmi2 they meet through Slurm's own variables, not its PMI
# server: that server takes one PMI-1 'init' a process, and an MPI library
# in the rank (mpi-mpich) must still be able to make its own.
out=$(timeout 60 srun -n 2 -O --mpi=pmi2 "$info" 2>&1)
echo "$out" | grep '^bootstrap:'
[ "$(echo "$out" | grep -c 'rendezvous: Slurm at ')" = 2 ] || fail "plexus-info under srun --mpi=pmi2 does not name the Slurm bootstrap"
[ "$(echo "$out" | grep -c "of 2 (from Slurm's PMI variables)")" = 2 ] ||
    fail "plexus-info under srun --mpi=pmi2 does not say Slurm set the ranks (it said MPICH before)"

# Two steps of one job at once: each task waits until all four are up
# before plexus-bench starts, so both stores are open at the same time.
cat >"$dir/two_steps.sh" <<EOF
#!/bin/sh
touch "$dir/up.\$SLURM_STEP_ID.\$SLURM_PROCID"
i=0
while [ \$(ls "$dir" | grep -c '^up\.') -lt 4 ]; do
    i=\$((i + 1)); [ \$i -lt 600 ] || { echo "step \$SLURM_STEP_ID: the other step never started"; exit 2; }
    sleep 0.1
done
exec "$bench" $args -n 5
EOF
chmod +x "$dir/two_steps.sh"
out=$(timeout 90 salloc -n 4 -O sh -c "srun -n 2 -O --exact '$dir/two_steps.sh' & a=\$!; srun -n 2 -O --exact '$dir/two_steps.sh' & b=\$!; wait \$a; ra=\$?; wait \$b; rb=\$?; echo steps \$ra \$rb" 2>&1)
if echo "$out" | grep -q '^steps 0 0$' && [ "$(ls "$dir" | grep -c '^up\.')" = 4 ]; then
    echo "ok: two steps of one job at the same time"
else echo "$out"; fail "two steps of one job at once"; fi

# sbatch of a script that runs one 4-task step.
cat >"$dir/batch.sh" <<EOF
#!/bin/sh
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT
srun -n 4 -O "$bench" $args
echo "step exit \$?"
EOF
timeout 90 sbatch --wait -n 4 -O -o "$dir/batch.out" "$dir/batch.sh" >/dev/null 2>&1
rc=$?
if grep -q '^step exit 0$' "$dir/batch.out" 2>/dev/null && [ $rc = 0 ]; then echo "ok: sbatch of a 4-task step"
else cat "$dir/batch.out" 2>/dev/null; fail "sbatch of a 4-task step: exit $rc"; fi

# Rank 1 dies in the middle of the run: the step ends (no hang) and the
# survivors' error names rank 1.
cat >"$dir/dies.sh" <<EOF
#!/bin/sh
if [ "\$SLURM_PROCID" = 1 ]; then
    "$bench" -b 1M -e 1M -n 100000 -w 1 &
    sleep 4
    kill -9 \$!
    exit 9
fi
exec "$bench" -b 1M -e 1M -n 100000 -w 1
EOF
chmod +x "$dir/dies.sh"
out=$(timeout 90 srun -n 2 -O "$dir/dies.sh" 2>&1)
rc=$?
echo "$out" | tail -n 6
if [ $rc != 0 ] && [ $rc != 124 ] && echo "$out" | grep -q 'PLX_ERR_PEER_LOST.*connection to rank 1'; then
    echo "ok: a dying task ends the step with its rank named"
else fail "a step with a dead task: exit $rc (124: it hung), or the survivors' error does not name rank 1"; fi

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all Slurm bootstrap checks passed"
