#!/bin/sh
# auth_job.sh PLEXUS_RUN PLEXUS_BENCH INTRUDER - a 3-rank tcp job under
# plexus-run with a job secret, rank 2 held back until the intruder has
# knocked on the store (no secret, another secret, silence) and on every
# open transport listener of ranks 0 and 1. The job must pass its checked
# collectives, the intruder must be shut out everywhere, and the job's log
# must name each refusal with the intruder's address.
set -u
run=$1
bench=$2
intruder=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $(( 20000 + $$ % 20000 )))
PLEXUS_JOB_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export PLEXUS_JOB_SECRET PLEXUS_CORE_AUTH_TIMEOUT_MS=1000 PLEXUS_TCP_AUTH_TIMEOUT_MS=1000 GO="$tmp/go"
# The intruder knocks on gloo 2022's per-pair listeners, and before rank 2
# starts: ranks that learn the layout first (auto) would wait for rank 2.
export PLEXUS_TCP_GLOO_WIRE=2022
# Rank 2 waits (at most 60 s) for the intruder's go.
"$run" -n 3 --port "$port" --timeout 150 sh -c '
    if [ "$RANK" = 2 ]; then
        i=0
        while [ ! -e "$GO" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
    fi
    exec "$0" "$@"' "$bench" --backend tcp --check --coll all -b 8 -e 256K -f 8 -n 2 -w 1 >"$tmp/job" 2>&1 &
job=$!
timeout 120 "$intruder" "$port" "$GO"
irc=$?
wait $job
jrc=$?
cat "$tmp/job"
fail=0
[ $irc = 0 ] || { echo "FAILED: the intruder got in somewhere (exit $irc)"; fail=1; }
[ $jrc = 0 ] || { echo "FAILED: the job failed (exit $jrc)"; fail=1; }
grep -q "total wrong elements: 0" "$tmp/job" || { echo "FAILED: the job did not check its results"; fail=1; }
check() {
    grep -q "$1" "$tmp/job" || { echo "FAILED: no log line matching: $1"; fail=1; }
}
check "dropping store client 127.0.0.1:[0-9]*: authentication failed: not a plexus authentication hello"
check "dropping store client 127.0.0.1:[0-9]*: authentication failed: closed by the client before it authenticated"
check "dropping store client 127.0.0.1:[0-9]*: not authenticated within 1000 ms"
check "refused a connection from 127.0.0.1:[0-9]* on its listener for rank [0-9]: not a plexus authentication hello"
check "refused a connection from 127.0.0.1:[0-9]* on its listener for rank [0-9]: wrong proof (MAC)"
[ $fail = 0 ] && echo "auth job checks passed"
exit $fail
