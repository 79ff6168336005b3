#!/bin/sh
# check_ulfm_shrink.sh PROGRAM PLEXUS_INFO NP: ulfm_shrink on NP ranks under
# `mpirun.openmpi --with-ft ulfm`, one of which dies; every survivor must
# say "survived". Skips (77) where this Open MPI has no ULFM to run: its
# mpirun knows no --with-ft (before Open MPI 5), or the plugin says ULFM
# is absent. The survivors must also end: Open MPI's finalize fence over
# every process can wait forever for the dead one, so the plugin skips it
# in ULFM jobs, which this checks too.
prog=$1 info=$2 np=$3
command -v mpirun.openmpi >/dev/null || { echo "SKIP: mpirun.openmpi not installed"; exit 77; }
fwd=$(env | sed -n 's/^\(PLEXUS_[A-Za-z0-9_]*\)=.*/-x \1/p' | tr '\n' ' ')
run() {
    n=$1
    shift
    # shellcheck disable=SC2086 # one option a word
    timeout 150 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --with-ft ulfm \
        --mca btl self,sm,tcp -np "$n" $fwd "$@"
}
if ! out=$(run 1 "$info" 2>&1); then
    if echo "$out" | grep -q -- "--with-ft"; then
        echo "SKIP: $(mpirun.openmpi --version | head -1) has no ULFM to start (mpirun knows no --with-ft)"
        exit 77
    fi
    echo "$out"
    echo "FAIL: plexus-info under mpirun --with-ft ulfm"
    exit 1
fi
line=$(echo "$out" | sed -n '/^mpi-openmpi$/,/^$/p' | grep 'description:')
case $line in
*"shrink: MPIX_Comm_shrink (ULFM)"*) ;;
*) echo "SKIP: the plugin does not shrink through ULFM here: $line"; exit 77 ;;
esac
# PLEXUS_DEBUG: every rank's plugin says whether MPI_Finalize skips its
# fence over the job's processes, which can wait forever for a dead one.
fwd="$fwd -x PLEXUS_DEBUG"
out=$(PLEXUS_DEBUG=mpi-openmpi run "$np" "$prog" mpi-openmpi 2>&1)
rc=$?
echo "$out"
echo "mpirun exited $rc"
[ $rc = 124 ] && { echo "FAIL: the job did not end within 150 s"; exit 1; }
# The victim's line can be lost with it: the survivors' must be there.
r=0
while [ -z "${OMPI_MCA_async_mpi_finalize:-}" ] && [ $r -lt $((np - 1)) ]; do
    echo "$out" | grep -q "rank $r's MPI_Finalize skips its fence" ||
        { echo "FAIL: rank $r's plugin did not skip MPI_Finalize's fence"; exit 1; }
    r=$((r + 1))
done
survived=$(echo "$out" | grep -c '^rank [0-9]*: survived$')
[ "$survived" = $((np - 1)) ] || { echo "FAIL: $survived of $((np - 1)) survivors say survived"; exit 1; }
echo "$out" | grep -q '^FAIL' && exit 1
exit 0
