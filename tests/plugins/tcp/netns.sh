#!/bin/sh
# netns.sh PLEXUS_BENCH MODE [4|6] - two "hosts": network namespaces joined
# by a veth pair, one rank in each, the store on rank 0's address
# (MASTER_ADDR), every collective with --check. MODE:
#   ifname   [tcp] ifname set to each side's veth (the explicit setting)
#   default  nothing set but MASTER_ADDR: tcp must publish the address that
#            routes to it, not loopback
#   auto     the same under backend = auto (shm refuses two hosts; tcp runs)
#   badif    [tcp] ifname names no interface: every rank fails at once with
#            a message naming it (no wait for the timeout)
# The last argument picks IPv4 (10.77.x.1/.2) or IPv6 (fd77:x::1/::2).
# Skips (77) when namespaces cannot be made (not root, no ip, a container).
set -u
bench=$1
mode=${2:-ifname}
fam=${3:-4}
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
if [ "$fam" = 6 ]; then
    ipa=fd77:$net::1 ipb=fd77:$net::2 plen=64 extra=nodad
else
    ipa=10.77.$net.1 ipb=10.77.$net.2 plen=24 extra=
fi
ip link set va$id netns $a && ip link set vb$id netns $b &&
ip -n $a addr add $ipa/$plen dev va$id $extra && ip -n $b addr add $ipb/$plen dev vb$id $extra &&
ip -n $a link set va$id up && ip -n $b link set vb$id up &&
ip -n $a link set lo up && ip -n $b link set lo up || { echo "FAILED: veth setup"; exit 1; }
export MASTER_ADDR=$ipa MASTER_PORT=$((29700 + id % 200)) WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 LOCAL_RANK=0
export PLEXUS_BACKEND=tcp PLEXUS_CORE_LOG_LEVEL=info
unset PLEXUS_TCP_IFNAME PLEXUS_TCP_ADDRESS
ifa= ifb= limit=${NETNS_LIMIT:-100}
case $mode in
    ifname) ifa=va$id ifb=vb$id ;;
    default) ;;
    auto) export PLEXUS_BACKEND=auto ;;
    badif) ifa=nosuch$id ifb=nosuch$id limit=20 ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
args="--coll all --check -b 0 -e 4M -f 8 -n 2 -w 1"
[ "$mode" = auto ] || args="--backend tcp $args"
start=$(date +%s)
(RANK=0 env ${ifa:+PLEXUS_TCP_IFNAME=$ifa} timeout -s KILL $limit ip netns exec $a "$bench" $args >"$tmp/0" 2>&1; echo $? >"$tmp/0.rc") &
(RANK=1 env ${ifb:+PLEXUS_TCP_IFNAME=$ifb} timeout -s KILL $limit ip netns exec $b "$bench" $args >"$tmp/1" 2>&1; echo $? >"$tmp/1.rc") &
wait
took=$(( $(date +%s) - start ))
sed 's/^/[rank 0] /' "$tmp/0" | grep -v "^\[rank 0\] *[0-9]" | tail -20
sed 's/^/[rank 1] /' "$tmp/1" | grep -v "^\[rank 1\] *[0-9]" | tail -20
rc0=$(cat "$tmp/0.rc") rc1=$(cat "$tmp/1.rc")
if [ "$mode" = badif ]; then
    # Both fail, quickly, each naming the interface it was told to use.
    fail=0
    for r in 0 1; do
        [ "$(cat "$tmp/$r.rc")" != 0 ] || { echo "FAILED: rank $r succeeded with ifname nosuch$id"; fail=1; }
        grep -q "ifname 'nosuch$id'" "$tmp/$r" || { echo "FAILED: rank $r's error does not name nosuch$id"; fail=1; }
    done
    [ "$rc0" != 137 ] && [ "$rc1" != 137 ] || { echo "FAILED: a rank hung until killed"; fail=1; }
    echo "both failed in ${took}s"
    [ $fail = 0 ] && echo ok
    exit $fail
fi
if [ "$rc0" = 0 ] && [ "$rc1" = 0 ]; then
    grep -h "wrong" "$tmp/0" | head -1
    echo ok
    exit 0
fi
echo "FAILED: exit statuses $rc0 / $rc1"
exit 1
