#!/bin/sh
# compare_shm.sh [BUILD_DIR] - allreduce f32 sum between ranks of this host:
# plexus shm and plexus tcp (plexus-bench under plexus-run, in place) against
# Open MPI over shared memory (ob1 + vader,self) and MPICH (its default:
# ch4:ucx shared memory), interleaved per size, the whole sweep REPS times
# (default 3), and plexus ucc (UCC's CPU teams, where plexus-info finds UCC
# usable). plexus shm runs twice: on ordinary buffers and on registered
# ones (plexus-bench --registered: plx_mem_alloc, one pass). Prints
# microseconds per op (rep1 / rep2 / ...), the floor (bench/floor in place: threads
# summing straight into every output, the least traffic an allreduce can
# do) and a single-thread memcpy of the same size (plexus-bench --memcpy,
# measured in the shm run) as the physical references, and the median over
# reps of the per-rep ratios (< 1: the first faster). NP="2 4" and
# SIZES="..." override; an absent peer is skipped. RESULTS=DIR also writes
# one plexus-bench CSV per peer and rank count there (shm-npN.csv carries
# the memcpy reference; floor-npN.csv the floor), for tools/plexus-plot.py.
set -u
build=${1:-build}
[ -d "$build" ] || { echo "no build directory '$build'"; exit 2; }
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
export PLEXUS_CONFIG_PATH=${PLEXUS_CONFIG_PATH:-$build/devconfig}
sizes=${SIZES:-"8 65536 1048576 16777216"}
nps=${NP:-"2 4"}
reps=${REPS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

iters_for() { # bytes -> iterations: runs of 20-250 ms
    if [ "$1" -le 64 ]; then echo 4000; elif [ "$1" -le 65536 ]; then echo 1000
    elif [ "$1" -le 1048576 ]; then echo 200; else echo 20; fi
}

have_ompi=0; have_mpich=0
command -v mpirun.openmpi >/dev/null 2>&1 && [ -x "$build/bench/mpi_allreduce_loop_openmpi" ] && have_ompi=1
command -v mpirun.mpich >/dev/null 2>&1 && [ -x "$build/bench/mpi_allreduce_loop_mpich" ] && have_mpich=1
[ $have_ompi = 1 ] || echo "# skipping Open MPI: no mpirun.openmpi or $build/bench/mpi_allreduce_loop_openmpi"
[ $have_mpich = 1 ] || echo "# skipping MPICH: no mpirun.mpich or $build/bench/mpi_allreduce_loop_mpich"
have_ucc=0
"$build/tools/plexus-info" --backend ucc >/dev/null 2>&1 && have_ucc=1
[ $have_ucc = 1 ] || echo "# skipping plexus ucc: $("$build/tools/plexus-info" --backend ucc 2>&1 | grep -m1 'state:')"

run_plexus() { # backend np bytes iters [memcpy-file] -> us ($REG: extra plexus-bench option)
    "$build/tools/plexus-run" -n "$2" --timeout 300 "$build/tools/plexus-bench" --backend "$1" --inplace --memcpy ${REG:-} \
        -b "$3" -e "$3" -n "$4" -w 5 >"$out/run" 2>&1
    awk -v m="${5:-/dev/null}" '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; print $12 > m; f = 1; exit }
        END { exit !f }' "$out/run" ||
        { echo "# plexus $1${REG:+ $REG} np $2, $3 B gave no figure:"; grep -v '^\[rank [0-9]*\] *[0-9#]' "$out/run" | tail -5; } >>"$out/failed.log"
}
run_ompi() {
    timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl vader,self \
        -np "$1" "$build/bench/mpi_allreduce_loop_openmpi" "$2" "$3" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1
}
run_floor() { # np bytes iters -> us
    "$build/bench/floor" "$1" "$2" "$3" inplace 2>/dev/null | awk 'NF == 3 { print $3 }' | tail -1
}
run_mpich() { # MPICH/UCX busy-polls: oversubscribed it falls to time slices, so fewer iterations
    it=$3
    [ "$1" -gt 2 ] && it=$(( it / 20 > 5 ? it / 20 : 5 ))
    UCX_NET_DEVICES=lo timeout 300 mpirun.mpich -iface lo -np "$1" "$build/bench/mpi_allreduce_loop_mpich" "$2" "$it" \
        2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1
}

rep=1
while [ $rep -le "$reps" ]; do
    for np in $nps; do
        for s in $sizes; do
            it=$(iters_for "$s")
            echo "$(run_plexus shm "$np" "$s" "$it" "$out/memcpy.$np.$s.$rep")" >"$out/shm.$np.$s.$rep"
            echo "$(REG=--registered run_plexus shm "$np" "$s" "$it")" >"$out/reg.$np.$s.$rep"
            echo "$(run_plexus tcp "$np" "$s" "$it")" >"$out/tcp.$np.$s.$rep"
            [ $have_ucc = 1 ] && echo "$(run_plexus ucc "$np" "$s" "$it")" >"$out/ucc.$np.$s.$rep"
            echo "$(run_floor "$np" "$s" "$it")" >"$out/floor.$np.$s.$rep"
            [ $have_ompi = 1 ] && echo "$(run_ompi "$np" "$s" "$it")" >"$out/ompi.$np.$s.$rep"
            [ $have_mpich = 1 ] && echo "$(run_mpich "$np" "$s" "$it")" >"$out/mpich.$np.$s.$rep"
            printf '.' >&2
        done
    done
    rep=$((rep + 1))
done
echo >&2
# Say why a run left its cell empty ("-").
[ -f "$out/failed.log" ] && cat "$out/failed.log" >&2

cell() { # peer np size -> "a / b / c"
    v=""
    r=1
    while [ $r -le "$reps" ]; do
        x=$(cat "$out/$1.$2.$3.$r" 2>/dev/null)
        v="$v${v:+ / }${x:--}"
        r=$((r + 1))
    done
    echo "$v"
}
memcpy_us() { # np size -> median single-thread memcpy time (us) of the size
    r=1
    while [ $r -le "$reps" ]; do
        cat "$out/memcpy.$1.$2.$r" 2>/dev/null
        r=$((r + 1))
    done | awk -v b="$2" '$1 > 0 { print b / ($1 * 1e3) }' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) print "-"; else printf "%.2f", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}
# a's time / b's time per rep (a rep's runs are interleaved), median over reps
ratio() { # a b np size
    r=1
    while [ $r -le "$reps" ]; do
        printf '%s %s\n' "$(cat "$out/$1.$3.$4.$r" 2>/dev/null)" "$(cat "$out/$2.$3.$4.$r" 2>/dev/null)"
        r=$((r + 1))
    done | awk 'NF == 2 && $2 > 0 { print $1 / $2 }' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) print "-"; else printf "%.2f", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

echo "# load average before the table: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
printf '%-3s %9s  %-24s %-24s %-24s %-24s %-24s %-24s %-24s %9s %9s %9s %9s %9s %9s %9s %9s\n' np bytes \
    "plexus-shm us" "shm-registered us" "plexus-tcp us" "plexus-ucc us" "ompi-shm us" "mpich us" "floor us" \
    "memcpy us" "shm/ompi" "reg/ompi" "reg/floor" "shm/mpich" "tcp/ompi" "ucc/ompi" "ucc/shm"
for np in $nps; do
    for s in $sizes; do
        printf '%-3s %9s  %-24s %-24s %-24s %-24s %-24s %-24s %-24s %9s %9s %9s %9s %9s %9s %9s %9s\n' "$np" "$s" \
            "$(cell shm "$np" "$s")" "$(cell reg "$np" "$s")" "$(cell tcp "$np" "$s")" "$(cell ucc "$np" "$s")" \
            "$(cell ompi "$np" "$s")" "$(cell mpich "$np" "$s")" "$(cell floor "$np" "$s")" "$(memcpy_us "$np" "$s")" \
            "$(ratio shm ompi "$np" "$s")" "$(ratio reg ompi "$np" "$s")" "$(ratio reg floor "$np" "$s")" \
            "$(ratio shm mpich "$np" "$s")" "$(ratio tcp ompi "$np" "$s")" "$(ratio ucc ompi "$np" "$s")" \
            "$(ratio ucc shm "$np" "$s")"
    done
done

if [ -n "${RESULTS:-}" ]; then
    mkdir -p "$RESULTS" || exit 1
    . "$src/bench/results_csv.sh"
    results_peer shm plexus-bench shm memcpy
    results_peer reg plexus-bench shm-registered
    results_peer tcp plexus-bench tcp
    [ $have_ucc = 1 ] && results_peer ucc plexus-bench ucc
    results_peer ompi openmpi ob1-vader
    results_peer mpich mpich ch4
    results_peer floor floor "threads (least traffic)"
    echo "# result files: $(ls "$RESULTS" | tr '\n' ' ')"
fi
