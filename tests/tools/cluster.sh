#!/bin/sh
# scripts/cluster.sh's own test. check: 8 namespaces as hosts on links
# shaped to 400 Mbit/s come up; host 0 gets an ICMP echo from every other
# host (RTT > 0), a bulk TCP transfer carries the configured rate within
# 10% (payload bytes against the rate), a 1-byte TCP ping-pong's round trip
# is reported; afterwards none of the run's namespaces is left. bench:
# plexus-bench's checked allreduce over tcp on 4 hosts x 2 ranks, its CSV
# with a row per size, and tcp counting the 8 ranks whose cores it shares
# (the machine's, though each host has 2); then the ranks mode runs
# calib_pingpong --pairs as every rank. Skips (77) without root or
# namespaces.
#   sh cluster.sh SOURCE_ROOT BUILD_ROOT check|bench
set -u
src=$1 build=$2 what=${3:-check}
out=$(mktemp)
d=$(mktemp -d)
csv=$d/bench.csv
trap 'rm -f "$out"; rm -rf "$d"' EXIT
gone() { # the namespaces named on the output's namespaces= line are gone
    for n in $(sed -n 's/.*namespaces=//p' "$out"); do
        if ip netns list | awk '{ print $1 }' | grep -qx "$n"; then
            echo "FAIL: namespace $n left behind"
            return 1
        fi
    done
    [ -n "$(sed -n 's/.*namespaces=//p' "$out")" ] || { echo "FAIL: no namespaces= line"; return 1; }
}
if [ "$what" = check ]; then
    BULK_BYTES=67108864 sh "$src/scripts/cluster.sh" -n 8 -r 400mbit check >"$out" 2>&1
    rc=$?
    cat "$out"
    [ $rc = 77 ] && exit 77
    [ $rc = 0 ] || { echo "FAIL: cluster.sh check exit $rc"; exit 1; }
    gone || exit 1
    awk -F= '/^ping_rtt_ms_host/ { if ($2 > 0) pings++ }
             /^bulk_mbps=/ { bulk = $2 } /^pingpong_rtt_us=/ { pp = $2 }
             END { want = 400e6 / 8 / 1e6; err = (bulk - want) / want
                   printf "pings %d of 7; bulk %.1f MB/s against %.1f (%+.1f%%); ping-pong %s us\n", pings, bulk, want, 100 * err, pp
                   if (pings != 7) { print "FAIL: not every host answered"; exit 1 }
                   if (err < -0.10 || err > 0.10) { print "FAIL: bulk rate off by more than 10%"; exit 1 }
                   if (!(pp > 0)) { print "FAIL: no ping-pong round trip"; exit 1 } }' "$out" || exit 1
    echo ok
    exit 0
fi
[ -x "$build/tools/plexus-bench" ] || { echo "skip: no plexus-bench"; exit 77; }
PLEXUS_CORE_LOG_LEVEL=info sh "$src/scripts/cluster.sh" -n 4 -p 2 -r 1gbit -t 120 bench "$build" "$csv" --backend tcp --coll allreduce \
    --check -b 8 -e 1M -f 32 -n 3 -w 1 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: cluster.sh bench exit $rc"; exit 1; }
gone || exit 1
head -3 "$csv"
rows=$(awk -F, 'NR > 1' "$csv" | wc -l)
[ "$rows" -ge 4 ] || { echo "FAIL: $rows CSV rows, want a row per size (8 B .. 1 MiB by 32)"; exit 1; }
grep -q "rank 0: 8 ranks share this machine's" "$out" ||
    { echo "FAIL: rank 0's tcp did not count the 8 ranks on this machine (2 per host)"; exit 1; }
# ranks: any program as every rank; here every rank in a ping-pong pair
# across hosts at once.
sh "$src/scripts/cluster.sh" -n 4 -p 2 -r 1gbit -t 120 ranks -- "$build/bench/calib_pingpong" --backend tcp \
    -b 8 -e 8 --pairs 2 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || { echo "FAIL: cluster.sh ranks exit $rc"; exit 1; }
gone || exit 1
awk '$1 == 8 { ok = $2 > 0 } END { exit !ok }' "$out" || { echo "FAIL: no one-way time of the pairs"; exit 1; }
echo ok
