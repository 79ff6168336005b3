#!/bin/sh
# plot_compare.sh [BUILD_DIR] [PNG] - the README's plot (default
# docs/compare-allreduce.png) from one comparison run on this host: allreduce
# f32 sum in place between NP ranks (default 2): plexus shm and plexus tcp,
# Open MPI over shared memory (ob1 + vader) and over TCP (ob1 + tcp), torch's
# gloo, and the floor (bench/floor: the least traffic an allreduce can do),
# with the memcpy reference. Real transports only (no sim). The runs come
# from bench/compare_shm.sh and bench/compare.sh (REPS, SIZES as there; each
# point is the median over the reps); their tables and CSV files stay in
# RESULTS (default: a temporary folder, removed). A busy machine gives wrong
# numbers: it refuses to start while the load average is above half the
# cores (FORCE=1 runs anyway), and prints the load before and after.
set -u
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
png=${2:-$src/docs/compare-allreduce.png}
[ -x "$build/tools/plexus-bench" ] || { echo "no plexus build in '$build'"; exit 2; }
build=$(cd "$build" && pwd)
np=${NP:-2}
export NP=$np REPS=${REPS:-3} SIZES=${SIZES:-"8 1024 65536 1048576 16777216 67108864"}
load() { cut -d' ' -f1 /proc/loadavg; }
cores=$(nproc)
if [ "${FORCE:-0}" != 1 ] && awk -v l="$(load)" -v c="$cores" 'BEGIN { exit !(l > c / 2) }'; then
    echo "plot_compare: load average $(load) on $cores cores: the numbers would be wrong; run it on a quiet" \
        "machine (FORCE=1 runs anyway)"
    exit 1
fi
res=${RESULTS:-}
if [ -z "$res" ]; then
    res=$(mktemp -d)
    trap 'rm -rf "$res"' EXIT
fi
mkdir -p "$res/shm" "$res/tcp"
before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
RESULTS=$res/shm sh "$src/bench/compare_shm.sh" "$build" | tee "$res/compare_shm.txt" || exit 1
RESULTS=$res/tcp sh "$src/bench/compare.sh" "$build" | tee "$res/compare.txt" || exit 1
after=$(cut -d' ' -f1-3 /proc/loadavg)
files=""
for f in shm/shm tcp/plexus shm/ompi tcp/ompi tcp/gloo shm/floor; do # plexus shm, tcp; Open MPI vader, tcp; gloo; floor
    if [ -f "$res/$f-np$np.csv" ]; then
        files="$files $res/$f-np$np.csv"
    else
        echo "plot_compare: no $f-np$np.csv (that peer is absent or gave no figure): left out"
    fi
done
# shellcheck disable=SC2086 # one file a word
/usr/bin/python3 "$src/tools/plexus-plot.py" --place in -o "$png" \
    --title "allreduce f32 sum, in place, $np ranks on $(hostname -s) ($cores cores): median of $REPS reps; load $before before, $after after" \
    $files || exit 1
echo "plot_compare: $png from $(echo $files | wc -w) result files in $(($(date +%s) - t0)) s; load average $before before, $after after"
