#!/bin/sh
# netns.sh PLEXUS_BENCH - two "hosts": network namespaces joined by a veth
# pair (10.77.<x>.1 and .2), one rank in each, [tcp] ifname set to the veth,
# the store on rank 0's address. Runs every collective with --check.
# Skips (77) when namespaces cannot be made (not root, no ip, a container).
set -u
bench=$1
command -v ip >/dev/null 2>&1 || { echo "skip: no 'ip' command"; exit 77; }
id=$$
a=plxa$id
b=plxb$id
net=$((id % 200 + 20))
if ! ip netns add $a 2>/dev/null; then
    echo "skip: 'ip netns add' failed (needs root and network namespaces)"
    exit 77
fi
cleanup() { ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$tmp"; }
tmp=$(mktemp -d)
trap cleanup EXIT
ip netns add $b || { echo "skip: second namespace failed"; exit 77; }
if ! ip link add va$id type veth peer name vb$id 2>/dev/null; then
    echo "skip: cannot create a veth pair"
    exit 77
fi
ip link set va$id netns $a && ip link set vb$id netns $b &&
ip -n $a addr add 10.77.$net.1/24 dev va$id && ip -n $b addr add 10.77.$net.2/24 dev vb$id &&
ip -n $a link set va$id up && ip -n $b link set vb$id up &&
ip -n $a link set lo up && ip -n $b link set lo up || { echo "FAILED: veth setup"; exit 1; }
export MASTER_ADDR=10.77.$net.1 MASTER_PORT=29511 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 LOCAL_RANK=0 PLEXUS_BACKEND=tcp
args="--backend tcp --coll all --check -b 0 -e 4M -f 8 -n 2 -w 1"
(RANK=0 PLEXUS_TCP_IFNAME=va$id timeout -s KILL 100 ip netns exec $a "$bench" $args >"$tmp/0" 2>&1; echo $? >"$tmp/0.rc") &
(RANK=1 PLEXUS_TCP_IFNAME=vb$id timeout -s KILL 100 ip netns exec $b "$bench" $args >"$tmp/1" 2>&1; echo $? >"$tmp/1.rc") &
wait
sed 's/^/[rank 0] /' "$tmp/0"
sed 's/^/[rank 1] /' "$tmp/1"
if [ "$(cat "$tmp/0.rc")" = 0 ] && [ "$(cat "$tmp/1.rc")" = 0 ]; then echo ok; exit 0; fi
echo "FAILED: exit statuses $(cat "$tmp/0.rc") / $(cat "$tmp/1.rc")"
exit 1
