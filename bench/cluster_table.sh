#!/bin/sh
# cluster_table.sh BUILD OUT - plexus's allreduce algorithms on the cluster
# in a box (scripts/cluster.sh): HOSTS x RANKS_PER_HOST ranks over tcp on
# links shaped to RATE, each algorithm forced in turn (core.allreduce_algo),
# REPS rounds interleaved (every algorithm once per round, each a fresh
# cluster). Writes OUT/link.txt (cluster.sh check: the links' own latency
# and rate; each round's in OUT/link-<rep>.txt, link.txt has the median
# ping-pong), OUT/<algo>-<rep>.csv (plexus-bench's CSV) and OUT/table.csv
# (bytes, algorithm, median time_us over the rounds, busbw, reps). The
# load the machine ran under is in OUT/load.txt. Sizes: MINBYTES to
# MAXBYTES by STEPFACTOR, or from the first to the last of SIZES.
#   HOSTS=8 RANKS_PER_HOST=2 RATE=1gbit REPS=3 sh bench/cluster_table.sh build out
set -eu
build=$1 out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
HOSTS=${HOSTS:-8} RPH=${RANKS_PER_HOST:-2} RATE=${RATE:-1gbit} REPS=${REPS:-3}
ALGOS=${ALGOS:-ring recdbl tree rabenseifner}
[ "$REPS" -ge 1 ] 2>/dev/null || { echo "cluster_table.sh: REPS must be a whole number >= 1 (got '$REPS')" >&2; exit 2; }
MINBYTES=${MINBYTES:-8} MAXBYTES=${MAXBYTES:-32M} STEPFACTOR=${STEPFACTOR:-4} ITERS=${ITERS:-5}
if [ -n "${SIZES:-}" ]; then
    set -- $SIZES
    MINBYTES=$1
    shift $(($# - 1))
    MAXBYTES=$1
fi
mkdir -p "$out"
uptime >"$out/load.txt"
rep=1
while [ $rep -le "$REPS" ]; do
    # The links' latency moves with the machine's idle state: measured
    # every round, and link.txt holds the median.
    BULK_BYTES=${BULK_BYTES:-67108864} sh "$here/scripts/cluster.sh" -n 2 -r "$RATE" check >"$out/link-$rep.txt"
    for a in $ALGOS; do
        PLEXUS_CORE_ALLREDUCE_ALGO=$a sh "$here/scripts/cluster.sh" -n "$HOSTS" -p "$RPH" -r "$RATE" -t 900 \
            bench "$build" "$out/$a-$rep.csv" --backend tcp --coll allreduce --inplace \
            -b "$MINBYTES" -e "$MAXBYTES" -f "$STEPFACTOR" -n "$ITERS" -w 1 >"$out/$a-$rep.log" 2>&1 ||
            { echo "cluster_table.sh: $a round $rep failed:"; tail -5 "$out/$a-$rep.log"; exit 1; }
        echo "round $rep $a done"
    done
    rep=$((rep + 1))
done
uptime >>"$out/load.txt"
python3 - "$out" $ALGOS <<'PY'
import csv, statistics, sys, glob, os
out, algos = sys.argv[1], sys.argv[2:]
links = sorted(glob.glob(os.path.join(out, "link-*.txt")))
rtts = [float(l.split("=", 1)[1]) for f in links for l in open(f) if l.startswith("pingpong_rtt_us=")]
if not rtts:
    sys.exit("cluster_table.sh: no round's link check reported pingpong_rtt_us (see %s)" % ", ".join(links))
with open(os.path.join(out, "link.txt"), "w") as f:
    for l in open(links[0]):
        if not l.startswith("pingpong_rtt_us="):
            f.write(l)
    f.write("pingpong_rtt_us=%.1f\npingpong_rtt_us_rounds=%s\n" % (statistics.median(rtts), ",".join(map(str, rtts))))
rows = {}
for a in algos:
    for f in sorted(glob.glob(os.path.join(out, a + "-*.csv"))):
        for r in csv.DictReader(open(f)):
            rows.setdefault((int(r["size_bytes"]), a), []).append((float(r["time_us"]), float(r["busbw_gbs"])))
with open(os.path.join(out, "table.csv"), "w") as f:
    f.write("bytes,algorithm,time_us,busbw_gbs,reps\n")
    for (b, a), v in sorted(rows.items()):
        f.write("%d,%s,%.3f,%.4f,%d\n" % (b, a, statistics.median(t for t, _ in v),
                                           statistics.median(x for _, x in v), len(v)))
PY
cat "$out/table.csv"
