#!/bin/sh
# blackhole.sh INIT_ONCE - a store address whose SYNs are dropped (a
# firewall, a host that is down): with PLEXUS_CORE_TIMEOUT_MS=5s a rank
# that is not the store's host must fail within 7 s, naming the address.
# And a store named by a host name whose name server is the same dropped
# address (the namespace's own resolv.conf, which `ip netns exec` puts over
# /etc's): the lookup is bounded too (the resolver alone would wait 20 s).
# The address lies behind a veth pair between two network namespaces made
# here, with a permanent neighbour entry of a MAC address nobody has: the
# far end drops every frame, so connect() gets no answer at all (a
# blocking connect waits out the kernel's SYN retries, minutes).
# Skips (77) without root or network namespaces.
set -u
prog=$1
command -v ip >/dev/null 2>&1 || { echo "skip: no 'ip' command"; exit 77; }
ns=plxbh$$
far=plxbf$$
net=$(($$ % 200 + 20))
if ! ip netns add $ns 2>/dev/null; then
    echo "skip: 'ip netns add' failed (needs root and network namespaces)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'ip netns del $ns 2>/dev/null; ip netns del $far 2>/dev/null; rm -rf "$tmp" "/etc/netns/$ns"' EXIT
ip netns add $far || { echo "skip: second namespace failed"; exit 77; }
if ! ip link add bh$$ type veth peer name bf$$ 2>/dev/null; then
    echo "skip: cannot create a veth pair"
    exit 77
fi
ip link set bh$$ netns $ns && ip link set bf$$ netns $far &&
ip -n $ns addr add 10.79.$net.1/24 dev bh$$ && ip -n $ns link set bh$$ up && ip -n $ns link set lo up &&
ip -n $far link set bf$$ up &&
ip -n $ns neigh add 10.79.$net.2 lladdr 02:00:00:00:4f:99 dev bh$$ nud permanent ||
    { echo "FAILED: namespace setup"; exit 1; }
mkdir -p "/etc/netns/$ns" &&
    printf 'nameserver 10.79.%s.2\noptions timeout:10 attempts:2\n' $net >"/etc/netns/$ns/resolv.conf" ||
    { echo "FAILED: the namespace's resolv.conf"; exit 1; }
fail=0
for backend in auto tcp name; do
    addr=10.79.$net.2
    [ $backend = name ] && addr=store.plexus-blackhole.example
    start=$(date +%s%N)
    env -u PLEXUS_INIT RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=$addr MASTER_PORT=29555 \
        PLEXUS_BACKEND=$([ $backend = name ] && echo tcp || echo $backend) PLEXUS_CORE_TIMEOUT_MS=5s \
        timeout -s KILL 40 ip netns exec $ns "$prog" >"$tmp/out" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ $rc = 0 ]; then
        echo "FAILED ($backend): init succeeded against a dropped address: $(cat "$tmp/out")"
        fail=1
    elif [ $ms -gt 7000 ]; then
        echo "FAILED ($backend): took $ms ms to fail with a 5 s timeout (rc $rc): $(tail -n 2 "$tmp/out")"
        fail=1
    elif ! grep -q "$addr" "$tmp/out"; then
        echo "FAILED ($backend): the error does not name $addr: $(tail -n 2 "$tmp/out")"
        fail=1
    else
        echo "ok ($backend): failed in $ms ms: $(tail -n 1 "$tmp/out")"
    fi
done
[ $fail = 0 ] && echo ok
exit $fail
