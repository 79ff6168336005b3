#!/bin/sh
# plexus-whatif's timing-only runs against full runs (--payload: messages
# carry their bytes, ranks reduce them) on small clusters: every row's time
# must be the same, for each algorithm, at a power of two and not (the
# fold), and for allgather; a sweep's rows must be those of one fresh run
# per size. Then its memory at 4,096 ranks: under 64 KiB a
# rank, and within 16 MiB at 4 MiB of the same runs at 8 B (no payload
# byte, no scratch, no per-peer state that timing only does not use).
#   sh whatif_timing_only.sh PLEXUS-WHATIF
set -eu
tool="$1"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
bad=0
compare() { # name, then plexus-whatif's arguments
    name=$1
    shift
    "$tool" "$@" --csv "$d/t.csv" >/dev/null
    "$tool" "$@" --payload --csv "$d/f.csv" >/dev/null
    rows=$(awk -F, 'NR > 1 && $5 > 0 { n++ } END { print n + 0 }' "$d/t.csv")
    if ! cmp -s "$d/t.csv" "$d/f.csv"; then
        echo "FAIL: $name: timing-only and full runs differ:"
        diff "$d/t.csv" "$d/f.csv" | head -20
        bad=1
    elif [ "$rows" -lt 8 ] || [ "$rows" -ne "$(awk 'END { print NR - 1 }' "$d/t.csv")" ]; then
        echo "FAIL: $name: $rows rows with a time"
        bad=1
    else
        echo "ok: $name: $rows rows alike"
    fi
}
compare "16 ranks, 4 hosts" --ranks 16 --hosts 4 -b 8 -e 4M -f 8
compare "12 ranks, 3 hosts" --ranks 12 --hosts 3 -b 8 -e 1M -f 8
compare "8 ranks, one host, time-shared" --ranks 8 --cores-per-host 2 --wake-latency 5us \
    --reduce-bandwidth 4G -b 8 -e 1M -f 8
compare "allgather, 16 ranks, 4 hosts" --ranks 16 --hosts 4 --coll allgather -b 64 -e 4M -f 8

# A sweep runs every size of an algorithm on the same communicators, each
# from virtual time 0 on idle links (plexus_sim_run_phase): its rows must
# be those of one fresh run per size.
"$tool" --ranks 16 --hosts 4 -b 8 -e 4M -f 8 --csv "$d/sweep.csv" >/dev/null
: >"$d/single.csv"
for b in 8 64 512 4096 32768 262144 2097152; do
    "$tool" --ranks 16 --hosts 4 -b $b -e $b --csv "$d/one.csv" >/dev/null
    sed 1d "$d/one.csv" >>"$d/single.csv"
done
if sed 1d "$d/sweep.csv" | cmp -s - "$d/single.csv"; then
    echo "ok: a sweep's rows are those of fresh runs, size by size"
else
    echo "FAIL: a sweep's rows differ from fresh runs:"
    sed 1d "$d/sweep.csv" | diff - "$d/single.csv" | head -10
    bad=1
fi

if ! command -v python3 >/dev/null; then
    echo "no python3 to read peak memory: memory part skipped"
    exit $bad
fi
peak_kib() { # plexus-whatif's arguments; prints its peak resident KiB
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$tool" "$@"
}
small=$(peak_kib --ranks 4096 --hosts 512 --algos recdbl,tree,rabenseifner -b 8 -e 8)
large=$(peak_kib --ranks 4096 --hosts 512 --algos recdbl,tree,rabenseifner -b 4M -e 4M)
echo "peak resident, 4096 ranks: $small KiB at 8 B, $large KiB at 4 MiB"
if [ $((large - small)) -gt 16384 ] || [ "$large" -gt $((4096 * 64)) ]; then
    echo "FAIL: more than 16 MiB more at 4 MiB, or more than 64 KiB a rank"
    bad=1
fi
exit $bad
