#!/bin/sh
# hier_netns.sh MATRIX PLEXUS_BENCH - two "hosts" (network namespaces joined
# by a veth pair), two ranks in each: different network namespaces give
# different host identities (core/common/hostid.h hashes the netns inode),
# so `auto` finds shm unusable for the whole job and composes shm inside
# each namespace with tcp across (hier.c), with nothing configured but
# MASTER_ADDR (tcp publishes the address that routes to it). Runs the matrix
# (blocking and nonblocking) that way and checks the log says so, and that
# shm counts the four ranks that share this machine's cores, then
# compares allreduce 16 MiB busbw: hierarchical against flat tcp on the same
# four ranks, interleaved (REPS, default 2; printed, not judged).
# Skips (77) when namespaces cannot be made (not root, no ip, a container).
set -u
matrix=$1
bench=$2
command -v ip >/dev/null 2>&1 || { echo "skip: no 'ip' command"; exit 77; }
id=$$
a=plxha$id
b=plxhb$id
net=$((id % 200 + 20))
if ! ip netns add $a 2>/dev/null; then
    echo "skip: 'ip netns add' failed (needs root and network namespaces)"
    exit 77
fi
cleanup() { ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$tmp"; }
tmp=$(mktemp -d)
trap cleanup EXIT
ip netns add $b || { echo "skip: second namespace failed"; exit 77; }
if ! ip link add ha$id type veth peer name hb$id 2>/dev/null; then
    echo "skip: cannot create a veth pair"
    exit 77
fi
ip link set ha$id netns $a && ip link set hb$id netns $b &&
ip -n $a addr add 10.78.$net.1/24 dev ha$id && ip -n $b addr add 10.78.$net.2/24 dev hb$id &&
ip -n $a link set ha$id up && ip -n $b link set hb$id up &&
ip -n $a link set lo up && ip -n $b link set lo up || { echo "FAILED: veth setup"; exit 1; }
port=$((29600 + id % 300))
export MASTER_ADDR=10.78.$net.1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2
unset PLEXUS_BACKEND

# run LABEL BACKEND PROGRAM ARGS...: ranks 0, 1 in namespace a, 2, 3 in b.
run() {
    label=$1 backend=$2
    shift 2
    port=$((port + 1))
    for r in 0 1 2 3; do
        if [ $r -lt 2 ]; then ns=$a; else ns=$b; fi
        (MASTER_PORT=$port RANK=$r LOCAL_RANK=$((r % 2)) PLEXUS_BACKEND=$backend \
         PLEXUS_CORE_LOG_LEVEL=info timeout -s KILL 150 ip netns exec $ns "$@" >"$tmp/$label.$r" 2>&1
         echo $? >"$tmp/$label.$r.rc") &
    done
    wait
    st=0
    for r in 0 1 2 3; do
        [ "$(cat "$tmp/$label.$r.rc")" = 0 ] || st=1
    done
    return $st
}
fail=0
for nb in 0 1; do
    if ! run matrix$nb auto "$matrix" auto $nb; then
        echo "FAILED: matrix (nonblocking=$nb) under auto across two namespaces:"
        for r in 0 1 2 3; do grep -v "^plexus" "$tmp/matrix$nb.$r" | sed "s/^/[rank $r] /" | tail -5; done
        fail=1
    fi
    grep -h "cases per rank" "$tmp/matrix$nb".[0-3] | sed 's/^/  /'
    if ! grep -q "hierarchical, 2 host(s) x 2 rank(s): shm inside, tcp across" "$tmp/matrix$nb.0"; then
        echo "FAILED: auto did not compose shm and tcp:"; grep -i "backend\|hier" "$tmp/matrix$nb.0" | head -5
        fail=1
    fi
    # The two "hosts" are one machine: shm inside each is told that the job's
    # four ranks share its cores (ABI 1.14), and sleeps in its waits where
    # they outnumber the cores, so that the ranks it waits for, and the
    # other host's, get them.
    # shm counts the CPUs this process may run on; nproc would also follow
    # OMP_NUM_THREADS or OMP_THREAD_LIMIT where the environment sets them.
    cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    verdict="waits may spin"
    [ "$cores" -gt 1 ] && [ "$cores" -lt 4 ] && verdict="waits sleep after their looks"
    line="shm: rank 0: 4 ranks of the job share this machine's $cores cores (2 on this host): $verdict"
    if ! grep -qF "$line" "$tmp/matrix$nb.0"; then
        echo "FAILED: shm did not count the machine's ranks; wanted '$line', got:"
        grep "shm" "$tmp/matrix$nb.0" | head -5
        fail=1
    fi
done
[ $fail = 0 ] || exit 1

# busbw of allreduce 16 MiB: hierarchical (auto) and flat tcp, same ranks, interleaved.
echo "allreduce f32 16 MiB, 4 ranks in 2 namespaces, busbw GB/s (rep by rep):"
reps=${REPS:-2}
i=1
while [ $i -le "$reps" ]; do
    for mode in shm+tcp tcp; do
        run bench "$mode" "$bench" --inplace -b 16M -e 16M -n 10 -w 2 || { echo "FAILED: bench $mode"; cat "$tmp/bench.0"; exit 1; }
        if [ $mode = shm+tcp ] && ! grep -q "hierarchical, 2 host" "$tmp/bench.0"; then echo "FAILED: $mode ran flat"; exit 1; fi
        # What the communicator says it runs on names both parts, as the user asked for them.
        if [ $mode = shm+tcp ] && ! grep -q "^# plexus-bench: backend shm+tcp," "$tmp/bench.0"; then
            echo "FAILED: a hierarchical communicator does not name itself shm+tcp:"
            grep "^# plexus-bench" "$tmp/bench.0"
            exit 1
        fi
        bw=$(awk '$2 ~ /^[0-9]+$/ && $1 == 16777216 { print $8 }' "$tmp/bench.0")
        us=$(awk '$2 ~ /^[0-9]+$/ && $1 == 16777216 { print $6 }' "$tmp/bench.0")
        echo "  rep $i  $mode: $us us, busbw $bw"
    done
    i=$((i + 1))
done
echo ok
