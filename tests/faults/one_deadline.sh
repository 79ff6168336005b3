#!/bin/sh
# one_deadline.sh INIT_ONCE STOP_AT_LISTEN_SO - init's timeout is one
# deadline over all its steps, not one per step. Rank 1 starts and waits
# for the store; rank 0, its host, comes 1.5 s later and stops itself
# (stop_at_listen.c) once the store is open, as its backend's rendezvous
# begins. With PLEXUS_CORE_TIMEOUT_MS=5s rank 1's plx_comm_init must fail
# within 6.5 s (5 s, and the 1 s init's failure exchange may take on a store
# that does not answer), naming rank 0; a fresh 5 s for each step took
# 12-32 s.
# On tcp and shm.
set -u
prog=$1
stopper=$2
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ms_now() { echo $(($(date +%s%N) / 1000000)); }
fail=0
for backend in tcp shm; do
    common="WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(port) PLEXUS_BACKEND=$backend \
PLEXUS_CORE_TIMEOUT_MS=5s"
    start=$(ms_now)
    env -u PLEXUS_INIT $common RANK=1 LOCAL_RANK=1 timeout -s KILL 60 "$prog" >"$tmp/r1" 2>&1 &
    r1=$!
    sleep 1.5
    env -u PLEXUS_INIT $common RANK=0 LOCAL_RANK=0 LD_PRELOAD="$stopper" STOP_AT_LISTEN=2 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$prog" >"$tmp/r0" 2>&1 &
    r0=$!
    pids="$r0 $r1"
    wait $r1
    rc=$?
    ms=$(($(ms_now) - start))
    state=$(ps -o stat= -p $r0 2>/dev/null)
    kill -CONT $r0 2>/dev/null
    kill -KILL $r0 2>/dev/null
    wait $r0 2>/dev/null
    said=$(tail -n 1 "$tmp/r1")
    took=$(echo "$said" | sed -n 's/^init failed after \([0-9]*\) ms.*/\1/p')
    case $state in
    T*) ;;
    *)
        echo "FAILED ($backend): rank 0 did not stop where the test stops it (state '$state'): $(tail -n 2 "$tmp/r0")"
        fail=1
        continue
        ;;
    esac
    if [ $rc = 0 ]; then
        echo "FAILED ($backend): rank 1's init succeeded without rank 0: $said"
        fail=1
    elif [ -z "$took" ]; then
        echo "FAILED ($backend): rank 1 did not say how long its init took: $said"
        fail=1
    elif [ "$took" -gt 6500 ]; then
        echo "FAILED ($backend): rank 1's init failed after more than 6.5 s with a 5 s timeout (a deadline per step): $said"
        fail=1
    elif ! echo "$said" | grep -q "rank 0"; then
        echo "FAILED ($backend): the error does not name rank 0: $said"
        fail=1
    else
        echo "ok ($backend): rank 1 failed after $ms ms (its init $took ms): $said"
    fi
done
[ $fail = 0 ] && echo ok
exit $fail
