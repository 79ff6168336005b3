#!/bin/sh
# fallback_netns.sh INIT_ONCE - `auto` falls back only to backends that can
# serve the job: two "hosts" (network namespaces joined by a veth pair), one
# rank in each, PLEXUS_TCP_IFNAME=nosuch0, nothing else set. shm refuses
# (the ranks span hosts), tcp refuses (no such interface), and sim, whose
# ranks are threads of one process, must not be tried: every rank must fail
# within LIMIT_MS (2 s by default) of its start, naming the interface and
# each refusal, not wait out the 30 s timeout. Skips (77) without root or
# network namespaces.
set -u
prog=$1
limit=${LIMIT_MS:-2000}
command -v ip >/dev/null 2>&1 || { echo "skip: no 'ip' command"; exit 77; }
id=$$
a=plxfa$id
b=plxfb$id
net=$((id % 200 + 20))
if ! ip netns add $a 2>/dev/null; then
    echo "skip: 'ip netns add' failed (needs root and network namespaces)"
    exit 77
fi
tmp=$(mktemp -d)
cleanup() { ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
ip netns add $b || { echo "skip: second namespace failed"; exit 77; }
if ! ip link add fa$id type veth peer name fb$id 2>/dev/null; then
    echo "skip: cannot create a veth pair"
    exit 77
fi
ip link set fa$id netns $a && ip link set fb$id netns $b &&
ip -n $a addr add 10.77.$net.1/24 dev fa$id && ip -n $b addr add 10.77.$net.2/24 dev fb$id &&
ip -n $a link set fa$id up && ip -n $b link set fb$id up &&
ip -n $a link set lo up && ip -n $b link set lo up || { echo "FAILED: veth setup"; exit 1; }
port=$((29300 + id % 300))
for r in 0 1; do
    if [ $r = 0 ]; then ns=$a; else ns=$b; fi
    (start=$(date +%s%N)
     env -u PLEXUS_BACKEND -u PLEXUS_INIT MASTER_ADDR=10.77.$net.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 \
         LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 PLEXUS_TCP_IFNAME=nosuch0 PLEXUS_CORE_TIMEOUT_MS=30s \
         timeout -s KILL 60 ip netns exec $ns "$prog" >"$tmp/$r" 2>&1
     echo $? >"$tmp/$r.rc"
     echo $(( ($(date +%s%N) - start) / 1000000 )) >"$tmp/$r.ms") &
done
wait
fail=0
for r in 0 1; do
    rc=$(cat "$tmp/$r.rc") ms=$(cat "$tmp/$r.ms")
    if [ "$rc" = 0 ]; then
        echo "FAILED: rank $r started with a wrong interface: $(cat "$tmp/$r")"
        fail=1
    elif [ "$ms" -gt "$limit" ]; then
        echo "FAILED: rank $r took $ms ms to fail (limit $limit): $(tail -n 1 "$tmp/$r")"
        fail=1
    elif ! grep "init failed" "$tmp/$r" | grep -q "nosuch0"; then
        echo "FAILED: rank $r's error does not name the interface: $(tail -n 1 "$tmp/$r")"
        fail=1
    elif ! grep "init failed" "$tmp/$r" | grep -q "shm: rank"; then
        echo "FAILED: rank $r's error does not say why shm refused: $(tail -n 1 "$tmp/$r")"
        fail=1
    else
        echo "ok: rank $r failed in $ms ms: $(tail -n 1 "$tmp/$r")"
    fi
done
[ $fail = 0 ] && echo ok
exit $fail
