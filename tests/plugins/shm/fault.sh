#!/bin/sh
# fault.sh FAULT_BIN MODE N [BYTES] - start N shm ranks by hand (not
# plexus-run: it would stop the survivors itself) and check how each ends
# (see fault.c and p2p_fault.c for the modes). The last rank is the one at fault. Afterwards
# /dev/shm must hold no new entry of plexus's (the segment is a memfd; other
# programs on a shared machine come and go there, so only names that could
# be ours count: plexus*, plx*, shm*).
set -u
bin=$1
mode=$2
n=$3
bytes=${4:-1048576}
last=$((n - 1))
tmo=4000
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $(( 20000 + $$ % 20000 )))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ours() { ls -a /dev/shm 2>/dev/null | grep -iE "^(plexus|plx|shm)" || true; }
ours >"$tmp/shm.before"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n
case $mode in corrupt|corrupt_addr) export PLEXUS_SHM_CORRUPT_RANK=$last PLEXUS_SHM_CORRUPT_AT=3;; esac
[ "$mode" = corrupt_addr ] && export PLEXUS_SHM_CORRUPT=addr PLEXUS_SHM_CMA=true
[ "$mode" = p2p_corrupt ] && export PLEXUS_SHM_P2P_CORRUPT_RANK=$last PLEXUS_SHM_P2P_CORRUPT_AT=3
started=$n
[ "$mode" = init ] && started=$last
r=0
while [ $r -lt $started ]; do
    (RANK=$r LOCAL_RANK=$r timeout -s KILL 60 "$bin" "$mode" $last $tmo $bytes >"$tmp/$r.out" 2>&1; echo $? >"$tmp/$r.rc") &
    r=$((r + 1))
done
wait
bad=0
r=0
while [ $r -lt $started ]; do
    rc=$(cat "$tmp/$r.rc")
    sed "s/^/[rank $r] /" "$tmp/$r.out"
    want=0
    case $mode in kill|p2p_kill) [ $r = $last ] && want=137;; esac
    if [ "$rc" != $want ]; then
        echo "rank $r: exit status $rc, expected $want"
        bad=1
    fi
    r=$((r + 1))
done
ours >"$tmp/shm.after"
if ! cmp -s "$tmp/shm.before" "$tmp/shm.after"; then
    echo "/dev/shm changed:"; diff "$tmp/shm.before" "$tmp/shm.after"
    bad=1
fi
[ $bad = 0 ] && echo ok
exit $bad
