#!/bin/sh
# small_latency.sh BUILD [BUILD2 ...] - 2-rank allreduce (f32 sum, in place)
# time per op on plexus shm, one column per build directory (e.g. main's
# and a branch's), against Open MPI over shared memory (ob1 + vader,self:
# bench/mpi_allreduce_loop_openmpi of the first build), all interleaved:
# each rep runs every build and Open MPI once per size before the next rep.
# Prints, per size, microseconds per op as median [min-max] over reps, and
# the median over reps of each build's time / Open MPI's time in the same
# rep (< 1: plexus faster). The load average is printed before and after:
# on a shared machine the ratios hold better than the times.
# Environment: REPS (5), SIZES ("8 64 1024 1048576 16777216"), NP (2),
# NICE (5: the priority the runs take).
set -u
[ $# -ge 1 ] || { echo "usage: $0 BUILD [BUILD2 ...]"; exit 2; }
reps=${REPS:-5}
sizes=${SIZES:-"8 64 1024 1048576 16777216"}
np=${NP:-2}
nice=${NICE:-5}
builds=""
for b in "$@"; do
    [ -x "$b/tools/plexus-bench" ] || { echo "no $b/tools/plexus-bench"; exit 2; }
    builds="$builds $(cd "$b" && pwd)"
done
first=${builds# }
first=${first%% *}
ompi=$first/bench/mpi_allreduce_loop_openmpi
have_ompi=0
command -v mpirun.openmpi >/dev/null 2>&1 && [ -x "$ompi" ] && have_ompi=1
[ $have_ompi = 1 ] || echo "# skipping Open MPI: no mpirun.openmpi or $ompi"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

iters_for() { # bytes -> iterations: runs of roughly 10-200 ms
    if [ "$1" -le 1024 ]; then echo 20000; elif [ "$1" -le 65536 ]; then echo 2000
    elif [ "$1" -le 1048576 ]; then echo 200; else echo 20; fi
}
run_plexus() { # build bytes iters -> us
    PLEXUS_CONFIG_PATH=$1/devconfig nice -n "$nice" "$1/tools/plexus-run" -n "$np" --timeout 300 \
        "$1/tools/plexus-bench" --backend shm --inplace -b "$2" -e "$2" -n "$3" -w 200 2>/dev/null |
        awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }'
}
run_ompi() { # bytes iters -> us
    nice -n "$nice" timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
        --mca btl vader,self -np "$np" "$ompi" "$1" "$2" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1
}

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
rep=1
while [ "$rep" -le "$reps" ]; do
    for s in $sizes; do
        it=$(iters_for "$s")
        i=0
        for b in $builds; do
            echo "$(run_plexus "$b" "$s" "$it")" >"$out/b$i.$s.$rep" # echo: a line even when the run printed none
            i=$((i + 1))
        done
        [ $have_ompi = 1 ] && echo "$(run_ompi "$s" "$it")" >"$out/ompi.$s.$rep"
        printf '.' >&2
    done
    rep=$((rep + 1))
done
echo >&2
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

stats() { # files... -> "median [min-max]"
    cat "$@" 2>/dev/null | awk '$1 > 0' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) print "-"; else printf "%.3f [%.3f-%.3f]", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1] }'
}
ratio() { # a b size -> median over reps of a/b
    r=1
    while [ "$r" -le "$reps" ]; do
        printf '%s %s\n' "$(cat "$out/$1.$3.$r" 2>/dev/null)" "$(cat "$out/$2.$3.$r" 2>/dev/null)"
        r=$((r + 1))
    done | awk 'NF == 2 && $2 > 0 { print $1 / $2 }' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) print "-"; else printf "%.2f [%.2f-%.2f]", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1] }'
}
i=0
for b in $builds; do
    echo "# build $i: $b"
    i=$((i + 1))
done
for s in $sizes; do
    i=0
    for b in $builds; do
        printf '%9s B  build %d   %-28s us   /ompi %s\n' "$s" "$i" "$(stats "$out/b$i.$s".*)" "$(ratio "b$i" ompi "$s")"
        i=$((i + 1))
    done
    printf '%9s B  ompi-vader %-28s us\n' "$s" "$(stats "$out/ompi.$s".*)"
done
