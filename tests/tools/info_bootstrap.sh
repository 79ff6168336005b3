#!/bin/sh
# info_bootstrap.sh PLEXUS_INFO - plexus-info's bootstrap line says each
# reason whole. Under MPICH's variables (PMI_RANK, PMI_SIZE) with no store
# named, no PMIx and no Slurm step, the line lists why each bootstrap was
# passed over; it used to be cut mid-word ("SLURM_ST:"). Then, where
# mpirun.mpich is installed, the same under the real launcher.
set -u
info=$1
fail=0
check() { # WHERE LINE: the line is whole (parentheses closed, the last clause there)
    open=$(printf '%s' "$2" | tr -cd '(' | wc -c)
    close=$(printf '%s' "$2" | tr -cd ')' | wc -c)
    if [ "$open" != "$close" ]; then
        echo "FAIL: $1: the bootstrap line is cut ($open '(' against $close ')'): $2"
        fail=1
    elif ! printf '%s' "$2" | grep -q 'rendezvous: .*: \(a\|the\|no\|rank\|Slurm\|PMI\)'; then
        echo "FAIL: $1: no reason in the bootstrap line: $2"
        fail=1
    else
        echo "ok $1: $2"
    fi
}
line=$(env -u MASTER_ADDR -u MASTER_PORT -u PLEXUS_INIT -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_PROCID \
    -u SLURM_JOB_ID -u PMI_FD -u OMPI_COMM_WORLD_RANK -u RANK -u WORLD_SIZE PMI_RANK=0 PMI_SIZE=2 \
    "$info" | grep '^bootstrap:')
[ -n "$line" ] || { echo "FAIL: plexus-info printed no bootstrap line"; exit 1; }
check "MPICH's variables" "$line"
printf '%s' "$line" | grep -q 'need a store)$' ||
    { echo "FAIL: the line does not end with its last clause: $line"; fail=1; }
if command -v mpirun.mpich >/dev/null 2>&1; then
    out=$(timeout 60 mpirun.mpich -n 2 "$info" 2>&1 | grep '^bootstrap:' | head -n 1)
    if [ -n "$out" ]; then check "mpirun.mpich -n 2" "$out"; else echo "note: mpirun.mpich gave no bootstrap line"; fi
else
    echo "note: no mpirun.mpich: the real launcher's line is not checked"
fi
exit $fail
