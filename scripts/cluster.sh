#!/bin/sh
# cluster.sh - a cluster in a box: N network namespaces as hosts, each with
# a veth to a bridge (in a namespace of its own, the switch), every link
# rate-shaped with tc tbf both ways. The kernel here has no netem, so no
# delay is added: the links' own latency is measured and reported. Made and
# torn down in one run of this script, on every exit path; names carry the
# script's PID, so runs side by side do not meet.
#
#   sh scripts/cluster.sh [options] check
#       bring the cluster up, then measure: ping (ICMP echo) RTT host 0 -> each host, a
#       bulk TCP transfer host 0 -> host 1 (MB/s against the rate), a small
#       TCP ping-pong's round trip; prints key=value lines
#   sh scripts/cluster.sh [options] bench BUILD OUT [plexus-bench args]
#       run plexus-bench across the hosts (RANKS_PER_HOST ranks on each, the
#       store on host 0: MASTER_ADDR etc.); rank 0 writes OUT (csv or json by
#       its suffix, tools/bench_output.h's format)
#   sh scripts/cluster.sh [options] ranks -- CMD...
#       run CMD as every rank of one job (as bench runs plexus-bench); prints
#       rank 0's output
#   sh scripts/cluster.sh [options] exec -- CMD...
#       run CMD once in every host's namespace with HOST, HOSTS, HOST_ADDR,
#       MASTER_ADDR, CLUSTER_RATE, CLUSTER_NET (the first three octets) and
#       CLUSTER_NETNS (host i's namespace: that and i) set; waits for all
# Options: -n HOSTS (8), -r RATE (tc units, 1gbit; 0: unshaped), -p
# RANKS_PER_HOST (2), -t SECONDS (a limit on what runs inside, 300).
# Needs root, ip, tc, unshare and python3 (scripts/cluster_link.py measures the
# links); exits 77 (skip) when namespaces cannot be made.
set -u
HOSTS=8 RATE=1gbit RPH=2 LIMIT=300
while getopts n:r:p:t: opt; do
    case $opt in
    n) HOSTS=$OPTARG ;;
    r) RATE=$OPTARG ;;
    p) RPH=$OPTARG ;;
    t) LIMIT=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
mode=${1:-check}
[ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)

id=$$
sw=plxsw$id
net=$((id % 200 + 20))
tmp=$(mktemp -d)
made=""

ns() { echo "plxh${id}_$1"; }
addr() { echo "10.88.$net.$(($1 + 1))"; }

cleanup() {
    trap - EXIT INT TERM HUP
    kill_inside
    for n in $made; do ip netns del "$n" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

die() { echo "cluster.sh: $*" >&2; exit 1; }

# tbf on a device's egress: the rate, a burst of a few ms of it (at least
# 64 KiB: a GSO packet; bytes, the simulator's model_inter_burst reads it
# from check's output), the queue's wait capped at 50 ms.
BURST=262144
shape() { # namespace device
    [ "$RATE" = 0 ] && return 0
    tc -n "$1" qdisc add dev "$2" root tbf rate "$RATE" burst $BURST latency 50ms ||
        die "tc tbf $RATE on $2 in $1 failed"
}

up() {
    command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || { echo "skip: no ip or tc"; exit 77; }
    ip netns add "$sw" 2>/dev/null || { echo "skip: 'ip netns add' failed (needs root and network namespaces)"; exit 77; }
    made=$sw
    ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up && ip -n "$sw" link set lo up ||
        die "no bridge in $sw"
    i=0
    while [ $i -lt "$HOSTS" ]; do
        h=$(ns $i)
        ip netns add "$h" || die "ip netns add $h failed"
        made="$made $h"
        ip -n "$h" link add eth0 type veth peer name p$i netns "$sw" || die "no veth for host $i"
        ip -n "$sw" link set p$i master br0 && ip -n "$sw" link set p$i up &&
            ip -n "$h" addr add "$(addr $i)/24" dev eth0 && ip -n "$h" link set eth0 up &&
            ip -n "$h" link set lo up || die "host $i's link setup failed"
        shape "$h" eth0
        shape "$sw" p$i
        i=$((i + 1))
    done
    echo "hosts=$HOSTS rate=$RATE burst_bytes=$BURST net=10.88.$net.0/24 namespaces=$made"
    # The bridge forwards once its ports are up (no STP): wait for host 0
    # to reach the last host.
    t=0
    until ip netns exec "$(ns 0)" python3 "$here/cluster_link.py" ping "$(addr $((HOSTS - 1)))" 1 >/dev/null 2>&1; do
        t=$((t + 1))
        [ $t -lt 10 ] || die "host 0 cannot reach host $((HOSTS - 1))"
    done
}

# A host's commands run in its network namespace and a UTS namespace of
# its own, named host<i>: tools that count hosts by name see HOSTS of them.
in_host() { # host, command...
    h=$1
    shift
    timeout -s KILL "$LIMIT" ip netns exec "$(ns "$h")" unshare -u sh -c 'hostname "$0" && exec "$@"' "host$h" "$@"
}

check() {
    i=1
    while [ $i -lt "$HOSTS" ]; do
        in_host 0 python3 "$here/cluster_link.py" ping "$(addr $i)" 5 | sed "s/=/_host$i=/" ||
            die "no ping reply from host $i"
        i=$((i + 1))
    done
    port=$((20000 + id % 20000))
    in_host 1 python3 "$here/cluster_link.py" serve "$(addr 1)" $port >"$tmp/serve" 2>&1 &
    spid=$!
    in_host 0 python3 "$here/cluster_link.py" client "$(addr 1)" $port "${BULK_BYTES:-134217728}" || {
        cat "$tmp/serve"
        die "the link measurement failed"
    }
    wait $spid || die "the link server failed: $(cat "$tmp/serve")"
}

# Wait for the n jobs whose exit statuses land in PREFIX0.rc ...: once one
# fails, the others are killed (they would wait for it until their timeout).
watch() { # prefix n
    while :; do
        k=0 done=0
        while [ $k -lt "$2" ]; do
            if [ -s "$1$k.rc" ]; then
                done=$((done + 1))
                [ "$(cat "$1$k.rc")" = 0 ] || { kill_inside; break 2; }
            fi
            k=$((k + 1))
        done
        [ $done -lt "$2" ] || break
        sleep 0.2
    done
    wait
}

kill_inside() {
    for n in $made; do
        pids=$(ip netns pids "$n" 2>/dev/null)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    done
}

# RANKS_PER_HOST ranks on every host, one job (torchrun's variables, the
# store on host 0); rank 0's output is printed.
ranks() { # command...
    world=$((HOSTS * RPH))
    port=$((29000 + id % 1000))
    i=0
    while [ $i -lt "$HOSTS" ]; do
        l=0
        while [ $l -lt "$RPH" ]; do
            r=$((i * RPH + l))
            (in_host $i env RANK=$r LOCAL_RANK=$l LOCAL_WORLD_SIZE=$RPH WORLD_SIZE=$world \
                MASTER_ADDR="$(addr 0)" MASTER_PORT=$port PLEXUS_TCP_IFNAME=eth0 "$@" >"$tmp/r$r" 2>&1
             echo $? >"$tmp/r$r.rc") &
            l=$((l + 1))
        done
        i=$((i + 1))
    done
    watch "$tmp/r" $world
    rc=0 r=0
    while [ $r -lt $world ]; do
        if [ "$(cat "$tmp/r$r.rc")" != 0 ]; then
            echo "rank $r failed ($(cat "$tmp/r$r.rc")):"
            tail -5 "$tmp/r$r"
            rc=1
        fi
        r=$((r + 1))
    done
    cat "$tmp/r0"
    return $rc
}

bench() { # BUILD OUT(.csv or .json) plexus-bench args...
    build=$1 out=$2
    shift 2
    # every rank: the host count is gathered; rank 0 writes
    ranks "$build/tools/plexus-bench" --output "${out##*.}" "$out" "$@"
}

run_all() { # command...
    i=0
    while [ $i -lt "$HOSTS" ]; do
        (in_host $i env HOST=$i HOSTS="$HOSTS" HOST_ADDR="$(addr $i)" MASTER_ADDR="$(addr 0)" \
            CLUSTER_RATE="$RATE" CLUSTER_NETNS="$(ns '')" CLUSTER_NET="10.88.$net" "$@" >"$tmp/h$i" 2>&1; echo $? >"$tmp/h$i.rc") &
        i=$((i + 1))
    done
    watch "$tmp/h" "$HOSTS"
    rc=0 i=0
    while [ $i -lt "$HOSTS" ]; do
        sed "s/^/[host $i] /" "$tmp/h$i"
        [ "$(cat "$tmp/h$i.rc")" = 0 ] || rc=1
        i=$((i + 1))
    done
    return $rc
}

case $mode in
check) up; check ;;
bench) [ $# -ge 2 ] || die "bench needs BUILD and OUT"; up; bench "$@" ;;
ranks) [ "${1:-}" = -- ] && shift; [ $# -ge 1 ] || die "ranks needs a command"; up; ranks "$@" ;;
exec) [ "${1:-}" = -- ] && shift; [ $# -ge 1 ] || die "exec needs a command"; up; run_all "$@" ;;
*) die "unknown mode '$mode' (check, bench, ranks, exec)" ;;
esac
