#!/bin/sh
# compare_trees.sh BEFORE_BUILD AFTER_BUILD - allreduce f32 sum on loopback
# over the tcp backend: two plexus build trees (e.g. the commit before a
# change and after it) and Open MPI over TCP (ob1 + tcp btl) in one
# interleaved run: for each rep, each rank count and each size, before, after
# and Open MPI run back to back, so the three share the machine's mood.
# Prints per cell the median microseconds per op with the range over the
# reps (min-max), then the medians of the per-rep ratios after/before and
# after/ompi (< 1: after is faster). REPS (default 7), NP ("2 4") and SIZES
# ("8 65536") override. Each tree uses its own drop-ins (devconfig/).
# RESULTS=DIR also writes one plexus-bench CSV per tree (or peer) and rank
# count there (before-npN.csv, after-npN.csv, ompi-npN.csv), for
# tools/plexus-plot.py.
set -u
[ $# -ge 2 ] || { echo "usage: compare_trees.sh BEFORE_BUILD AFTER_BUILD"; exit 2; }
before=$(cd "$1" && pwd) || exit 2
after=$(cd "$2" && pwd) || exit 2
src=$(cd "$(dirname "$0")/.." && pwd)
sizes=${SIZES:-"8 65536"}
nps=${NP:-"2 4"}
reps=${REPS:-7}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

iters_for() { # as compare.sh: runs of 30-250 ms
    if [ "$1" -le 64 ]; then echo 4000; elif [ "$1" -le 65536 ]; then echo 1000; else echo 200; fi
}

have_ompi=0
command -v mpirun.openmpi >/dev/null 2>&1 && [ -x "$after/bench/mpi_allreduce_loop_openmpi" ] && have_ompi=1
[ $have_ompi = 1 ] || echo "# skipping Open MPI: no mpirun.openmpi or $after/bench/mpi_allreduce_loop_openmpi"

run_plexus() { # tree np bytes iters -> us
    PLEXUS_CONFIG_PATH="$1/devconfig" "$1/tools/plexus-run" -n "$2" --timeout 300 "$1/tools/plexus-bench" \
        --backend tcp --inplace -b "$3" -e "$3" -n "$4" -w 5 2>/dev/null |
        awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }'
}
run_ompi() {
    timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np "$1" \
        "$after/bench/mpi_allreduce_loop_openmpi" "$2" "$3" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1
}

rep=1
while [ $rep -le "$reps" ]; do
    for np in $nps; do
        for s in $sizes; do
            it=$(iters_for "$s")
            # Alternate which tree goes first, so neither always runs warm.
            if [ $((rep % 2)) = 1 ]; then
                run_plexus "$before" "$np" "$s" "$it" >"$out/before.$np.$s.$rep"
                run_plexus "$after" "$np" "$s" "$it" >"$out/after.$np.$s.$rep"
            else
                run_plexus "$after" "$np" "$s" "$it" >"$out/after.$np.$s.$rep"
                run_plexus "$before" "$np" "$s" "$it" >"$out/before.$np.$s.$rep"
            fi
            [ $have_ompi = 1 ] && run_ompi "$np" "$s" "$it" >"$out/ompi.$np.$s.$rep"
            printf '.' >&2
        done
    done
    rep=$((rep + 1))
done
echo >&2

stats() { # who np size -> "median (min-max)"
    cat "$out/$1.$2.$3."* 2>/dev/null | awk 'NF == 1 && $1 > 0' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) { print "-"; exit }
             m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
             printf "%.1f (%.1f-%.1f)", m, v[0], v[n - 1] }'
}
ratio() { # a b np size -> median over reps of a/b
    r=1
    while [ $r -le "$reps" ]; do
        printf '%s %s\n' "$(cat "$out/$1.$3.$4.$r" 2>/dev/null)" "$(cat "$out/$2.$3.$4.$r" 2>/dev/null)"
        r=$((r + 1))
    done | awk 'NF == 2 && $2 > 0 { print $1 / $2 }' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) print "-"; else printf "%.2f", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

echo "# allreduce f32 sum, tcp on loopback, $reps interleaved reps; us per op: median (min-max)"
printf '%-3s %7s  %-22s %-22s %-22s %12s %10s\n' np bytes "before" "after" "ompi-tcp" "after/before" "after/ompi"
for np in $nps; do
    for s in $sizes; do
        printf '%-3s %7s  %-22s %-22s %-22s %12s %10s\n' "$np" "$s" "$(stats before "$np" "$s")" \
            "$(stats after "$np" "$s")" "$(stats ompi "$np" "$s")" "$(ratio after before "$np" "$s")" \
            "$(ratio after ompi "$np" "$s")"
    done
done

if [ -n "${RESULTS:-}" ]; then
    mkdir -p "$RESULTS" || exit 1
    . "$src/bench/results_csv.sh"
    results_peer before plexus-bench "tcp (before)"
    results_peer after plexus-bench "tcp (after)"
    results_peer ompi openmpi ob1-tcp
    echo "# result files: $(ls "$RESULTS" | tr '\n' ' ')"
fi
