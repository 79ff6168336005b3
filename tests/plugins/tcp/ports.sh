#!/bin/sh
# ports.sh PLEXUS_RUN PLEXUS_BENCH - a host whose local port range is used up
# by the connections of jobs that just ended (TIME_WAIT) refuses the next
# job's listeners: the ranks must say so, naming the range and how to see
# the connections, not only "Address already in use". In a network
# namespace of its own with a range of 40 ports, 4-rank jobs run back to
# back until one fails. First plexus-run's own store port: with a range of
# one port that a listener holds, it must say the same. Skips (77) when the
# namespace cannot be made.
set -u
run=$1
bench=$2
if [ "${PLEXUS_PORTS_INNER:-}" != 1 ]; then
    command -v unshare >/dev/null 2>&1 || { echo "skip: no unshare"; exit 77; }
    unshare -n true 2>/dev/null || { echo "skip: 'unshare -n' failed (needs root and network namespaces)"; exit 77; }
    PLEXUS_PORTS_INNER=1 exec unshare -n sh "$0" "$@"
fi
ip link set lo up 2>/dev/null || { echo "skip: cannot bring up lo in the namespace"; exit 77; }
echo "40000 40000" >/proc/sys/net/ipv4/ip_local_port_range 2>/dev/null ||
    { echo "skip: cannot set the namespace's ip_local_port_range"; exit 77; }
out=$(mktemp)
holder=
trap 'rm -f "$out"; [ -n "$holder" ] && kill "$holder" 2>/dev/null' EXIT
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3 to hold the one port"; exit 77; }
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1]); sys.stdout.flush(); time.sleep(60)' >"$out" &
holder=$!
for i in $(seq 50); do [ -s "$out" ] && break; sleep 0.1; done
[ "$(cat "$out")" = 40000 ] || { echo "FAILED: the holder did not take port 40000: $(cat "$out")"; exit 1; }
if "$run" -n 1 --timeout 10 true >"$out" 2>&1; then
    echo "FAILED: plexus-run found a port in a range whose one port is held"
    exit 1
fi
cat "$out"
grep -q "plexus-run: cannot find a free port.*no free port in net.ipv4.ip_local_port_range" "$out" ||
    { echo "FAILED: plexus-run's error does not name the port range"; exit 1; }
kill "$holder"
wait "$holder" 2>/dev/null
holder=
echo "40000 40039" >/proc/sys/net/ipv4/ip_local_port_range
for i in $(seq 15); do
    if ! "$run" -n 4 --timeout 60 "$bench" --backend tcp -b 8 -e 8 -n 2 -w 1 >"$out" 2>&1; then
        echo "job $i failed, as the range ran out:"
        grep -m 2 "plexus-bench" "$out"
        grep -q "Address already in use; no free port in net.ipv4.ip_local_port_range" "$out" && exit 0
        echo "FAILED: the error does not name the port range"
        exit 1
    fi
done
echo "FAILED: 15 jobs on a range of 40 ports never ran out (the test's premise)"
exit 1
