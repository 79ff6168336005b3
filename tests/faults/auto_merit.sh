#!/bin/sh
# auto_merit.sh INIT_ONCE SOURCE_ROOT - `auto` goes by the placement, not
# by the launcher: on one host it picks shm under mpirun.openmpi (whose
# mpi-openmpi plugin is usable there) and under srun --mpi=pmi2 (whose
# PMI_SIZE makes mpi-mpich usable) of a private Slurm (slurm_local.sh),
# and says why in its first debug line; an explicit backend and a [core]
# prefer list still win. A launcher that is not installed skips its part;
# with neither, the test skips (77).
set -u
prog=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE PLEXUS_BACKEND
fail=0 ran=0
# check LABEL WANT FILE: every "backend X" line of FILE is WANT.
check() {
    got=$(grep -o '^backend [^,]*' "$3" | sort | uniq -c | tr -s ' ')
    if [ "$(grep -c "^backend $2," "$3")" -ge 2 ] && ! grep '^backend ' "$3" | grep -qv "^backend $2,"; then
        echo "ok: $1 picks $2"
    else
        echo "FAILED: $1: wanted $2 on every rank, got: ${got:-nothing}"
        grep -v DEBUG "$3" | tail -n 5
        fail=1
    fi
}
if command -v mpirun.openmpi >/dev/null 2>&1 && [ -e "$PLEXUS_BUILD_ROOT/plugins/mpi/plexus-mpi-openmpi.so" ]; then
    ran=1
    mpi="timeout -s KILL 60 mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 -x PLEXUS_CONFIG_PATH"
    $mpi -x PLEXUS_CORE_LOG_LEVEL=debug "$prog" >"$tmp/ompi" 2>&1
    check "mpirun.openmpi, auto" shm "$tmp/ompi"
    if ! grep "DEBUG core: comm 'world': backend shm:" "$tmp/ompi" | grep -q "one host"; then
        echo "FAILED: no debug line says why shm was chosen"; fail=1
    fi
    $mpi -x PLEXUS_BACKEND=mpi-openmpi "$prog" >"$tmp/ompi-named" 2>&1
    check "mpirun.openmpi, PLEXUS_BACKEND=mpi-openmpi" mpi-openmpi "$tmp/ompi-named"
    $mpi -x PLEXUS_CORE_PREFER=mpi-openmpi "$prog" >"$tmp/ompi-prefer" 2>&1
    check "mpirun.openmpi, PLEXUS_CORE_PREFER=mpi-openmpi" mpi-openmpi "$tmp/ompi-prefer"
else
    echo "skip part: no mpirun.openmpi or no mpi-openmpi plugin"
fi
# MPICH 5 under srun --mpi=pmi2 (PMI-1 wire) sends its address allgather as
# "cmd=put ... value=" lines of up to vallen_max (1024) value bytes, some
# of them uninitialised heap; Slurm 26 rejects a line over 1024 bytes ("value
# not properly terminated") and MPICH then aborts in UCX. Under meson's
# MALLOC_PERTURB_ that heap does not compress and a line reached 1028 bytes:
# the named MPICH run goes without it (a plain MPICH program shows the same
# line lengths; plexus only changes what the heap holds).
if [ -e "$PLEXUS_BUILD_ROOT/plugins/mpi/plexus-mpi-mpich.so" ] && command -v srun >/dev/null 2>&1; then
    cat >"$tmp/srun.sh" <<EOS
#!/bin/sh
timeout -s KILL 60 srun -n 2 -O --mpi=pmi2 env PLEXUS_CORE_LOG_LEVEL=debug "$prog" >"$tmp/pmi2" 2>&1
timeout -s KILL 60 srun -n 2 -O --mpi=pmi2 env -u MALLOC_PERTURB_ PLEXUS_BACKEND=mpi-mpich "$prog" >"$tmp/pmi2-named" 2>&1
exit 0
EOS
    sh "$src/tests/launch/slurm_local.sh" sh "$tmp/srun.sh"
    if [ $? = 77 ]; then
        echo "skip part: no private Slurm here"
    else
        ran=1
        check "srun --mpi=pmi2, auto" shm "$tmp/pmi2"
        check "srun --mpi=pmi2, PLEXUS_BACKEND=mpi-mpich" mpi-mpich "$tmp/pmi2-named"
    fi
else
    echo "skip part: no srun or no mpi-mpich plugin"
fi
[ $ran = 1 ] || { echo "skip: neither mpirun.openmpi nor Slurm with mpi-mpich"; exit 77; }
[ $fail = 0 ] && echo ok
exit $fail
