#!/bin/sh
# cluster_peers.sh BUILD OUT - plexus tcp against Open MPI over tcp and
# torch's gloo on the cluster in a box (scripts/cluster.sh): the same shaped
# links, HOSTS x RANKS_PER_HOST ranks, one float32 SUM allreduce loop each
# (5 warm-up, a barrier, ITERS back to back, the slowest rank's average).
# REPS rounds interleaved: every peer once per round, each on a fresh
# cluster. plexus runs three times: tcp with its own choice of algorithm
# (plexus-auto) and with ring (plexus-ring), and the hierarchy a job with
# several ranks a host gets by default (plexus-hier: shm within a host, tcp
# across, the core's choice of algorithm on each); plexus-hier-whole, where
# PEERS names it, is that hierarchy with its allreduce unchunked ([core]
# hier_chunk_bytes = 0). Writes OUT/link.txt (cluster.sh check),
# OUT/runs.csv (peer, bytes, rep, time_us) and
# OUT/table.csv (medians, busbw, the link's share, the spread); the load
# before and after is in OUT/load.txt.
#   HOSTS=8 RANKS_PER_HOST=2 RATE=1gbit REPS=5 sh bench/cluster_peers.sh build out
set -eu
build=$(cd "$1" && pwd) out=$2
here=$(cd "$(dirname "$0")" && pwd)
HOSTS=${HOSTS:-8} RPH=${RANKS_PER_HOST:-2} RATE=${RATE:-1gbit} REPS=${REPS:-5} ITERS=${ITERS:-5}
SIZES=${SIZES:-8 1048576 16777216 33554432}
PEERS=${PEERS:-plexus-auto plexus-ring plexus-hier openmpi gloo}
# A peer whose part this machine lacks is left out, saying so (a fresh
# machine has no torch until scripts/deps.sh --test-peers).
kept=""
for p in $PEERS; do
    case $p in
    gloo) /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null ||
              { echo "# skipping gloo: /usr/bin/python3 has no torch.distributed"; continue; } ;;
    openmpi) [ -x "$build/bench/mpi_allreduce_loop_openmpi" ] && command -v mpirun >/dev/null ||
                 { echo "# skipping openmpi: no mpirun or no bench/mpi_allreduce_loop_openmpi"; continue; } ;;
    esac
    kept="$kept $p"
done
PEERS=$kept
cluster="sh $here/../scripts/cluster.sh -n $HOSTS -p $RPH -r $RATE -t 1200"
mkdir -p "$out"
uptime >"$out/load.txt"
rc=0
sh "$here/../scripts/cluster.sh" -n 2 -r "$RATE" check >"$out/link.txt" 2>&1 || rc=$?
[ $rc = 0 ] || { cat "$out/link.txt"; echo "cluster_peers.sh: the link check failed ($rc)"; exit $rc; }
echo "peer,bytes,rep,time_us" >"$out/runs.csv"
plexus() { # ALGO (auto: the tuner's choice; hier: shm+tcp, auto; hier-whole: hier unchunked) rep
    backend=tcp algo=$1 chunk=4M
    case $1 in hier) backend=shm+tcp algo=auto ;; hier-whole) backend=shm+tcp algo=auto chunk=0 ;; esac
    for b in $SIZES; do
        PLEXUS_CORE_HIER_CHUNK_BYTES=$chunk PLEXUS_CORE_ALLREDUCE_ALGO=$algo $cluster bench "$build" "$out/p.csv" --backend $backend --coll allreduce \
            --inplace -b "$b" -e "$b" -n "$ITERS" -w 5 >"$out/last.log" 2>&1 || return 1
        /usr/bin/python3 -c "
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print('%s,%s,%s,%s' % (sys.argv[2], r['size_bytes'], sys.argv[3], r['time_us']))" \
            "$out/p.csv" "plexus-$1" "$2" >>"$out/runs.csv"
    done
}
peer_lines() { # peer rep: "[host 0] BYTES US" lines from last.log, one per size
    sed -n 's/^\[host 0\] \([0-9]*\) \([0-9.]*\)$/\1 \2/p' "$out/last.log" >"$out/last.rows"
    [ "$(wc -l <"$out/last.rows")" -eq "$(echo $SIZES | wc -w)" ] || return 1
    while read -r b t; do echo "$1,$b,$2,$t"; done <"$out/last.rows" >>"$out/runs.csv"
}
rep=1
while [ $rep -le "$REPS" ]; do
    for p in $PEERS; do
        case $p in
        plexus-*) plexus "${p#plexus-}" $rep ;;
        openmpi) $cluster exec -- sh "$here/cluster_mpi_host.sh" "$build/bench/mpi_allreduce_loop_openmpi" \
                     "$RPH" "$ITERS" $SIZES >"$out/last.log" 2>&1 && peer_lines openmpi $rep ;;
        gloo) $cluster exec -- /usr/bin/python3 "$here/cluster_gloo_host.py" "$RPH" "$ITERS" $SIZES \
                  >"$out/last.log" 2>&1 && peer_lines gloo $rep ;;
        esac || { echo "cluster_peers.sh: $p round $rep failed:"; tail -5 "$out/last.log"; exit 1; }
        echo "round $rep $p done"
    done
    rep=$((rep + 1))
done
uptime >>"$out/load.txt"
/usr/bin/python3 - "$out" "$HOSTS" "$RPH" <<'PY'
import csv, statistics, sys, os, re
out, hosts, rph = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = hosts * rph
link = open(os.path.join(out, "link.txt")).read()
m = re.search(r"bulk_mbps=([0-9.]+)", link)
link_gbs = float(m.group(1)) / 1000 if m else None
runs = {}
for r in csv.DictReader(open(os.path.join(out, "runs.csv"))):
    runs.setdefault((int(r["bytes"]), r["peer"]), []).append(float(r["time_us"]))
with open(os.path.join(out, "table.csv"), "w") as f:
    f.write("bytes,peer,time_us,min_us,max_us,busbw_gbs,link_share,reps\n")
    for (b, p), v in sorted(runs.items()):
        t = statistics.median(v)
        bus = b / t / 1e3 * 2 * (n - 1) / n
        share = "%.3f" % (bus / link_gbs) if link_gbs else ""
        f.write("%d,%s,%.2f,%.2f,%.2f,%.4f,%s,%d\n" % (b, p, t, min(v), max(v), bus, share, len(v)))
PY
cat "$out/table.csv"
