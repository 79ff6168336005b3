#!/bin/sh
# fault.sh FAULT_BIN MODE N - start N ranks by hand (not plexus-run: it would
# stop the survivors itself) and check how each one ends.
#   kill: the last rank SIGKILLs itself mid-allreduce; it must die by signal 9
#         and every other rank must exit 0 (it saw an error in time).
#   init: the last rank never starts; the others must fail init naming it.
set -u
bin=$1
mode=$2
n=$3
last=$((n - 1))
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $(( 20000 + $$ % 20000 )))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n PLEXUS_BACKEND=tcp
started=$n
[ "$mode" = init ] && started=$last
r=0
while [ $r -lt $started ]; do
    if [ "$mode" = kill ]; then
        (RANK=$r LOCAL_RANK=$r timeout -s KILL 60 "$bin" kill $last 5000 >"$tmp/$r.out" 2>&1; echo $? >"$tmp/$r.rc") &
    else
        (RANK=$r LOCAL_RANK=$r timeout -s KILL 60 "$bin" init 3000 $last >"$tmp/$r.out" 2>&1; echo $? >"$tmp/$r.rc") &
    fi
    r=$((r + 1))
done
wait
bad=0
r=0
while [ $r -lt $started ]; do
    rc=$(cat "$tmp/$r.rc")
    sed "s/^/[rank $r] /" "$tmp/$r.out"
    want=0
    [ "$mode" = kill ] && [ $r = $last ] && want=137
    if [ "$rc" != $want ]; then
        echo "rank $r: exit status $rc, expected $want"
        bad=1
    fi
    r=$((r + 1))
done
[ $bad = 0 ] && echo ok
exit $bad
