#!/bin/sh
# pipe_fault.sh BIN kill|fail N SCHEDULE - start N pipeline stages by hand
# (plexus-run would stop the survivors itself) and check how each ends:
#   kill: stage N-2 SIGKILLs itself mid-pipeline; it must die by signal 9,
#         every other stage exit 0 (its error named the stage in time).
#   fail: stage 1's forward fails; every stage (it too) must exit 0.
set -u
bin=$1 mode=$2 n=$3 sched=$4
victim=$((n - 2))
[ "$mode" = fail ] && victim=1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $(( 20000 + $$ % 20000 )))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n PLEXUS_BACKEND=tcp
r=0
while [ $r -lt $n ]; do
    (RANK=$r LOCAL_RANK=$r timeout -s KILL 60 "$bin" "$mode" $victim 3 5000 "$sched" >"$tmp/$r.out" 2>&1
     echo $? >"$tmp/$r.rc") &
    r=$((r + 1))
done
wait
bad=0
r=0
while [ $r -lt $n ]; do
    rc=$(cat "$tmp/$r.rc")
    sed "s/^/[stage $r] /" "$tmp/$r.out"
    want=0
    [ "$mode" = kill ] && [ $r = $victim ] && want=137
    if [ "$rc" != $want ]; then
        echo "stage $r: exit status $rc, expected $want"
        bad=1
    fi
    r=$((r + 1))
done
[ $bad = 0 ] && echo ok
exit $bad
