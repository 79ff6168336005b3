#!/bin/sh
# door.sh INIT_ONCE - launcher variables are checked before anything uses
# them: a bad value fails plx_comm_init at once, naming the variable (a port
# out of range was hosted on port % 65536 while the log printed the other;
# "abc" came back as getaddrinfo's words; LOCAL_RANK past LOCAL_WORLD_SIZE
# passed). Each case runs one rank with a 5 s timeout and must fail within
# 3 s with the variable's name in its error.
set -u
prog=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset PLEXUS_INIT PLEXUS_BACKEND OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE SLURM_PROCID \
      SLURM_NTASKS TORCHELASTIC_USE_AGENT_STORE
# expect NAME WORDS VAR=VALUE...: the run fails within 3 s and its error has NAME.
expect() {
    name=$1
    shift
    start=$(date +%s%N)
    env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
        PLEXUS_CORE_TIMEOUT_MS=5s "$@" timeout -s KILL 20 "$prog" >"$tmp/out" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ $rc = 0 ]; then
        echo "FAILED: $* was accepted: $(cat "$tmp/out")"
        fail=1
    elif ! grep -q "$name" "$tmp/out"; then
        echo "FAILED: $* failed without naming $name: $(tail -n 2 "$tmp/out")"
        fail=1
    elif [ $ms -gt 3000 ]; then
        echo "FAILED: $* took $ms ms to fail"
        fail=1
    else
        echo "ok: $* refused in $ms ms: $(grep -o "$name[^:]*" "$tmp/out" | head -n 1)"
    fi
}
base="RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1"
expect MASTER_PORT $base MASTER_PORT=70000
expect MASTER_PORT $base MASTER_PORT=abc
expect MASTER_PORT $base MASTER_PORT=0
expect MASTER_PORT $base MASTER_PORT=-5
expect MASTER_PORT $base "MASTER_PORT= 29500"
expect LOCAL_RANK $base MASTER_PORT=29500 LOCAL_RANK=1 LOCAL_WORLD_SIZE=1
expect LOCAL_RANK RANK=1 WORLD_SIZE=2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
expect LOCAL_WORLD_SIZE RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
expect RANK RANK=4 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
expect RANK RANK=+1 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
expect WORLD_SIZE RANK=0 WORLD_SIZE=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
expect WORLD_SIZE RANK=0 WORLD_SIZE=4x MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
expect OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=3 \
       OMPI_COMM_WORLD_LOCAL_SIZE=1
expect PLEXUS_INIT RANK=0 WORLD_SIZE=1 PLEXUS_INIT=tcp://127.0.0.1:70000
# A good launch still works (the store on a free port of loopback).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 29517)
if ! env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
     timeout -s KILL 30 "$prog" >"$tmp/out" 2>&1; then
    echo "FAILED: a good launch failed: $(cat "$tmp/out")"
    fail=1
fi
[ $fail = 0 ] && echo ok
exit $fail
