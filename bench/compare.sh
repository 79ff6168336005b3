#!/bin/sh
# compare.sh [BUILD_DIR] - allreduce f32 sum on loopback: plexus (tcp backend,
# plexus-bench under plexus-run) against torch's gloo and Open MPI over TCP
# (ob1 + tcp btl). Runs are interleaved (plexus, gloo, ompi for each size) and
# the whole sweep is done REPS times (default 3); an absent peer is skipped.
# Prints microseconds per op (rep1 / rep2 / ...) and plexus's ratio to each
# peer: the median over the reps of plexus's time / the peer's (< 1 means
# plexus is faster). Sizes: 8 B, 64 KiB, 1 MiB, 16 MiB, 64 MiB; ranks: 2 and
# 4 (NP="2 4" and SIZES="..." override). RESULTS=DIR also writes one
# plexus-bench CSV per peer and rank count there (the median time of the
# reps), for tools/plexus-plot.py.
# Note: Open MPI's 64 MiB figure pays for fresh mmap memory per call on this
# kind of VM (see perf-baseline.md); plexus and gloo reuse their buffers.
set -u
build=${1:-build}
[ -d "$build" ] || { echo "no build directory '$build'"; exit 2; }
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
export PLEXUS_CONFIG_PATH=${PLEXUS_CONFIG_PATH:-$build/devconfig}
sizes=${SIZES:-"8 65536 1048576 16777216 67108864"}
nps=${NP:-"2 4"}
reps=${REPS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Iterations per run: enough that plexus and Open MPI run for 30-250 ms
# (this 2-core VM stalls for milliseconds now and then: with 200 x 8 B, a
# 1.6 ms run, one stall doubled a figure), gloo up to a few seconds.
iters_for() {
    if [ "$1" -le 64 ]; then echo 4000; elif [ "$1" -le 65536 ]; then echo 1000
    elif [ "$1" -le 1048576 ]; then echo 200; elif [ "$1" -le 16777216 ]; then echo 20; else echo 6; fi
}

have_gloo=0; have_ompi=0
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null && have_gloo=1
command -v mpirun.openmpi >/dev/null 2>&1 && [ -x "$build/bench/mpi_allreduce_loop_openmpi" ] && have_ompi=1
[ $have_gloo = 1 ] || echo "# skipping torch gloo: /usr/bin/python3 has no torch.distributed"
[ $have_ompi = 1 ] || echo "# skipping Open MPI: no mpirun.openmpi or $build/bench/mpi_allreduce_loop_openmpi"

run_plexus() { # np bytes iters -> us
    "$build/tools/plexus-run" -n "$1" --timeout 300 "$build/tools/plexus-bench" --backend tcp --inplace \
        -b "$2" -e "$2" -n "$3" -w 5 2>/dev/null | awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }'
}
run_gloo() {
    GLOO_SOCKET_IFNAME=lo timeout 300 /usr/bin/python3 "$src/bench/torch_gloo_allreduce.py" --np "$1" --bytes "$2" \
        --iters "$3" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1
}
run_ompi() {
    timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np "$1" \
        "$build/bench/mpi_allreduce_loop_openmpi" "$2" "$3" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1
}

rep=1
while [ $rep -le "$reps" ]; do
    for np in $nps; do
        for s in $sizes; do
            it=$(iters_for "$s")
            echo "$(run_plexus "$np" "$s" "$it")" >"$out/plexus.$np.$s.$rep"
            [ $have_gloo = 1 ] && echo "$(run_gloo "$np" "$s" "$it")" >"$out/gloo.$np.$s.$rep"
            [ $have_ompi = 1 ] && echo "$(run_ompi "$np" "$s" "$it")" >"$out/ompi.$np.$s.$rep"
            printf '.' >&2
        done
    done
    rep=$((rep + 1))
done
echo >&2

cell() { # peer np size -> "a / b"
    v=""
    r=1
    while [ $r -le "$reps" ]; do
        x=$(cat "$out/$1.$2.$3.$r" 2>/dev/null)
        v="$v${v:+ / }${x:--}"
        r=$((r + 1))
    done
    echo "$v"
}
# plexus time / peer time, per rep (the runs of a rep are interleaved, so
# they share the VM's mood), then the median over the reps: one stalled run
# moves it less than it moves a mean.
ratio() { # peer np size -> median ratio, or -
    r=1
    while [ $r -le "$reps" ]; do
        printf '%s %s\n' "$(cat "$out/plexus.$2.$3.$r" 2>/dev/null)" "$(cat "$out/$1.$2.$3.$r" 2>/dev/null)"
        r=$((r + 1))
    done | awk 'NF == 2 && $2 > 0 { print $1 / $2 }' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) print "-"; else printf "%.2f", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

printf '%-3s %10s  %-26s %-26s %-26s %9s %9s\n' np bytes "plexus-tcp us" "torch-gloo us" "ompi-tcp us" "plx/ompi" "plx/gloo"
for np in $nps; do
    for s in $sizes; do
        printf '%-3s %10s  %-26s %-26s %-26s %9s %9s\n' "$np" "$s" "$(cell plexus "$np" "$s")" \
            "$(cell gloo "$np" "$s")" "$(cell ompi "$np" "$s")" "$(ratio ompi "$np" "$s")" "$(ratio gloo "$np" "$s")"
    done
done

# The same figures as plexus-bench --output csv files, one per peer and np.
if [ -n "${RESULTS:-}" ]; then
    mkdir -p "$RESULTS" || exit 1
    . "$src/bench/results_csv.sh"
    results_peer plexus plexus-bench tcp
    results_peer gloo torch gloo
    results_peer ompi openmpi ob1-tcp
    echo "# result files: $(ls "$RESULTS" | tr '\n' ' ')"
fi
