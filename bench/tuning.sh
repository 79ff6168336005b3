#!/bin/sh
# tuning.sh [BUILD_DIR] [segment|spin]... - the figures behind tuned defaults
# whose comments in the code give only the reason (bench/tuning.md says
# which comment each section backs). Allreduce f32 sum, in place, tcp on
# loopback, plexus-bench under plexus-run; every setting of a cell runs
# back to back in each rep (the order alternating), REPS reps (default 5).
# Prints us per op as the median (min-max) over the reps and the load
# average at the start and the end: on a shared machine the load, not the
# setting, may decide the figure.
#   segment  [core] segment_bytes 128 KiB against 1 MiB; 64 MiB (SEG_SIZE),
#            2 and 4 ranks (SEG_NP)
#   spin     [tcp] busy_poll_us 0, 20us, 1000us and auto; 8 B (SPIN_SIZE),
#            2 and 4 ranks (SPIN_NP). BUSY=1 adds one foreign busy process
#            per core (`while :; do :; done`), as a training job's compute or
#            a build beside the job would.
#   steal    [shm] steal false against true (shm); 1 MiB and 16 MiB, 2 and 4
#            ranks (STEAL_NP); BUSY=1 as above
# Run from the source root: sh bench/tuning.sh build [segment] [spin] [steal]
build=$(cd "${1:-build}" && pwd) || exit 2
[ $# -gt 0 ] && shift
src=$(cd "$(dirname "$0")/.." && pwd)
sections=${*:-"segment spin"}
reps=${REPS:-5}
out=$(mktemp -d)
. "$src/bench/spinners.sh"
trap 'stop_spinners; rm -rf "$out"' EXIT

iters_for() { # bytes -> iterations (runs of tens to hundreds of ms)
    if [ "$1" -le 64 ]; then echo 4000; elif [ "$1" -le 65536 ]; then echo 1000; else echo 20; fi
}

run() { # np bytes env-assignment -> us per op (rank 0, in place)
    env "$3" PLEXUS_CONFIG_PATH="$build/devconfig" "$build/tools/plexus-run" -n "$1" --timeout 300 \
        "$build/tools/plexus-bench" --backend "${backend:-tcp}" --inplace -b "$2" -e "$2" -n "$(iters_for "$2")" -w 3 2>/dev/null |
        awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }'
}

stats() { # files... -> "median (min-max)"
    cat "$@" 2>/dev/null | awk 'NF == 1 && $1 > 0' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) { print "-"; exit }
             m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
             printf "%.1f (%.1f-%.1f)", m, v[0], v[n - 1] }'
}

table() { # name key size nps values... : one row per np, one column per value
    name=$1 key=$2 size=$3 nps=$4
    shift 4
    echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    rep=1
    while [ $rep -le "$reps" ]; do
        for np in $nps; do
            vals=$*
            [ $((rep % 2)) = 0 ] && vals=$(printf '%s\n' "$@" | tac | tr '\n' ' ')
            for v in $vals; do
                run "$np" "$size" "$key=$v" >"$out/$name.$np.$v.$rep"
            done
            printf '.' >&2
        done
        rep=$((rep + 1))
    done
    echo >&2
    echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# $name: allreduce of $size B, us per op, median (min-max) over $reps reps; $key ="
    printf '%-6s' "ranks"
    for v in "$@"; do printf ' %-24s' "$v"; done
    echo
    for np in $nps; do
        printf '%-6s' "$np"
        for v in "$@"; do printf ' %-24s' "$(stats "$out/$name.$np.$v."*)"; done
        echo
    done
}

echo "# $(nproc) cores online; build $build"
for s in $sections; do
    case $s in
    segment)
        table segment PLEXUS_CORE_SEGMENT_BYTES "${SEG_SIZE:-67108864}" "${SEG_NP:-2 4}" 131072 1048576 ;;
    spin)
        if [ "${BUSY:-0}" = 1 ]; then
            start_spinners
            echo "# with one busy process per core"
        fi
        table spin PLEXUS_TCP_BUSY_POLL_US "${SPIN_SIZE:-8}" "${SPIN_NP:-2 4}" 0 20us 1000us auto
        stop_spinners ;;
    steal)
        if [ "${BUSY:-0}" = 1 ]; then
            start_spinners
            echo "# with one busy process per core"
        fi
        backend=shm
        for size in 1048576 16777216; do
            table "steal-$size" PLEXUS_SHM_STEAL "$size" "${STEAL_NP:-2 4}" false true
        done
        backend=tcp
        stop_spinners ;;
    *) echo "tuning.sh: unknown section '$s' (segment, spin, steal)" >&2; exit 2 ;;
    esac
done
