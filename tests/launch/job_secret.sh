#!/bin/sh
# A job under a process manager with a private key-value space (Open MPI's
# mpirun: PMIx; mpirun.mpich: Hydra's PMI) and no PLEXUS_JOB_SECRET set:
# rank 0 makes a secret and shares it there, so the job's store refuses a
# client that does not prove it (a torch-protocol GETNUMKEYS gets no answer)
# while the job's plexus-bench --check runs on and passes. With [core] auth
# off the same probe gets its answer (the probe can tell the two apart);
# plexus-info under the launcher says which applies and why.
#   sh job_secret.sh openmpi|mpich BUILD_ROOT
set -u
launcher=$1 build=$2
bench="$build/tools/plexus-bench"
case $launcher in
openmpi) run="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -x PLEXUS_CORE_AUTH" ;;
mpich) run="mpirun.mpich" ;;
*) echo "usage: $0 openmpi|mpich BUILD_ROOT"; exit 2 ;;
esac
command -v "${run%% *}" >/dev/null 2>&1 || { echo "SKIP: ${run%% *} is not installed"; exit 77; }
command -v ss >/dev/null 2>&1 || { echo "SKIP: ss (iproute2) is not installed"; exit 77; }
unset MASTER_ADDR MASTER_PORT PLEXUS_INIT PLEXUS_JOB_SECRET RANK WORLD_SIZE PMIX_NAMESPACE PMIX_RANK PMI_FD
unset PMI_RANK PMI_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE SLURM_PROCID SLURM_NTASKS SLURM_JOB_ID
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plexus-secret.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Every process below pid $1.
below() {
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$c"
        below "$c"
    done
}

# The port rank 0's store listens on (shm: the job's only plexus listener;
# only this job's processes, another job may run beside it), then one
# GETNUMKEYS (query byte 6; the answer is 8 bytes) without the handshake:
# "answered", "refused", or "gone" when the job had ended first.
probe() {
    i=0
    while [ $i -lt 300 ]; do
        pids=$(below "$1" | sed 's/ //g' | tr '\n' '|')
        # A launcher's own listener that its children inherit lists them too: not that one.
        port=$(ss -ltnpH 2>/dev/null | grep '"plexus-bench"' | grep -v 'hydra\|mpiexec\|mpirun\|orted\|prte' |
               grep -E "pid=(${pids%|}),"  | awk '{print $4}' | sed 's/.*://' | head -n 1)
        [ -n "$port" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    [ -n "$port" ] || { echo "no-store"; return; }
    python3 - "$port" <<'PY'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
except ConnectionRefusedError:
    print("gone")  # the job ended first
    sys.exit()
s.sendall(b"\x06")
got = b""
try:
    while len(got) < 8:
        b = s.recv(8 - len(got))
        if not b:
            break
        got += b
except OSError:
    pass
print("answered" if len(got) == 8 else "refused")
PY
}

# The job runs a few seconds (300 checked 16 MiB allreduces): the probe,
# a shell loop and then Python, must reach its store before it ends.
job() { # auth-mode label
    PLEXUS_CORE_AUTH=$1 PLEXUS_BACKEND=shm timeout 120 $run -np 2 "$bench" --check -b 16M -e 16M -n 300 -w 1 \
        >"$tmp/out" 2>&1 &
    jp=$!
    got=$(probe $jp)
    wait $jp
    rc=$?
    echo "$2: store probe: $got; job exit $rc"
    [ "$got" != gone ] || fail "$2: the job ended before the probe reached its store, so it cannot tell"
    [ $rc = 0 ] && grep -q "backend shm, 2 ranks" "$tmp/out" || { tail -n 20 "$tmp/out"; fail "$2: the job did not check right"; }
}
# plexus-info under the launcher says which applies and why.
out=$(PLEXUS_BACKEND=shm timeout 60 $run -np 2 "$build/tools/plexus-info" 2>&1)
echo "$out" | grep -m1 "rank 0 makes"
echo "$out" | grep -q "it proves the job secret rank 0 makes and shares through the process manager" ||
    fail "plexus-info under $launcher does not say that rank 0 makes and shares the job secret"
job auto "no secret set"
[ "$got" = refused ] || fail "no secret set: an unauthenticated client got an answer from the job's store ($got)"
job off "[core] auth = off"
[ "$got" = answered ] || fail "[core] auth = off: the probe got no answer ($got), so it cannot tell"

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "$launcher: the job's store refuses an unauthenticated client with no secret set"
