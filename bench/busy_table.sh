#!/bin/sh
# busy_table.sh [BUILD_DIR] - allreduce f32 sum between ranks of this host,
# on quiet cores and on cores that each run one foreign busy process
# (`sh -c 'while :; do :; done'`, nice 0, one per core), as a training job's
# compute would: plexus shm, plexus tcp, Open MPI over shared memory (ob1 +
# vader) and over TCP, torch's gloo. Every run of one rep is interleaved
# (quiet and busy alternate per cell, peers in turn); REPS (default 5) reps.
# Prints busbw in GB/s (2 (P-1)/P bytes / time) as the median [min-max] over
# the reps, each column's busy/quiet fraction, the load average when each
# half began, and the floor (bench/floor: threads in one address space,
# one pass, in place like the rest) beside them. NP="2 4", SIZES="1048576 16777216" and
# PEERS="shm tcp vader ompitcp gloo" override; an absent peer is skipped.
# A peer shm:KEY=VALUE or tcp:KEY=VALUE is that backend with one of its
# keys set (e.g. PEERS="shm shm:wait_slice=0 vader"), in the same interleave;
# a peer shm@DIR (or tcp@DIR) is that backend from another build directory
# (an older build beside this one: PEERS="shm shm@../old/build vader").
set -u
build=${1:-build}
[ -d "$build" ] || { echo "no build directory '$build'"; exit 2; }
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
export PLEXUS_CONFIG_PATH=${PLEXUS_CONFIG_PATH:-$build/devconfig}
sizes=${SIZES:-"1048576 16777216"}
nps=${NP:-"2 4"}
reps=${REPS:-5}
peers=${PEERS:-"shm tcp vader ompitcp gloo"}
cores=$(nproc)
out=$(mktemp -d)
. "$src/bench/spinners.sh"
trap 'stop_spinners; rm -rf "$out"' EXIT
trap 'exit 130' INT TERM

iters_for() { # bytes load -> iterations (busy runs are slow: fewer)
    if [ "$1" -le 1048576 ]; then n=100; else n=12; fi
    [ "$2" = busy ] && n=$((n / 4 > 3 ? n / 4 : 3))
    echo $n
}

have() {
    case $1 in
    shm|tcp|shm:*=*|tcp:*=*) [ -x "$build/tools/plexus-bench" ] ;;
    shm@*|tcp@*) [ -x "${1#*@}/tools/plexus-bench" ] ;;
    vader|ompitcp) command -v mpirun.openmpi >/dev/null 2>&1 && [ -x "$build/bench/mpi_allreduce_loop_openmpi" ] ;;
    gloo) /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null ;;
    *) false ;;
    esac
}
avail=""
for p in $peers; do
    if have "$p"; then avail="$avail $p"; else echo "# skipping $p: not installed or not built"; fi
done

run() { # peer np bytes iters -> us per op (the slowest rank's mean)
    case $1 in
    shm@*|tcp@*)
        d=$(cd "${1#*@}" && pwd)
        PLEXUS_CONFIG_PATH=$d/devconfig "$d/tools/plexus-run" -n "$2" --timeout 300 "$d/tools/plexus-bench" --backend "${1%%@*}" \
            --inplace -b "$3" -e "$3" -n "$4" -w 3 2>/dev/null |
            awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }' ;;
    shm:*=*|tcp:*=*) # the backend with one key set, through its PLEXUS_<SECTION>_<KEY> variable
        b=${1%%:*} kv=${1#*:}
        var=$(echo "PLEXUS_${b}_${kv%%=*}" | tr '[:lower:]' '[:upper:]')
        env "$var=${kv#*=}" "$build/tools/plexus-run" -n "$2" --timeout 300 "$build/tools/plexus-bench" --backend "$b" \
            --inplace -b "$3" -e "$3" -n "$4" -w 3 2>/dev/null |
            awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }' ;;
    shm|tcp)
        "$build/tools/plexus-run" -n "$2" --timeout 300 "$build/tools/plexus-bench" --backend "$1" --inplace \
            -b "$3" -e "$3" -n "$4" -w 3 2>/dev/null |
            awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }' ;;
    vader)
        timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
            --mca btl vader,self -np "$2" "$build/bench/mpi_allreduce_loop_openmpi" "$3" "$4" 2>/dev/null |
            awk 'NF == 2 { print $2 }' | tail -1 ;;
    ompitcp)
        timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self \
            --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np "$2" \
            "$build/bench/mpi_allreduce_loop_openmpi" "$3" "$4" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1 ;;
    gloo)
        GLOO_SOCKET_IFNAME=lo timeout 300 /usr/bin/python3 "$src/bench/torch_gloo_allreduce.py" --np "$2" \
            --bytes "$3" --iters "$4" 2>/dev/null | awk 'NF == 2 { print $2 }' | tail -1 ;;
    esac
}
key() { # a peer's name as a file name (shm@DIR holds slashes)
    echo "$1" | tr '/' '%'
}
label() { # a peer's column heading: shm@DIR by its name (a "build" by its parent's)
    case $1 in
    shm@*|tcp@*)
        d=$(cd "${1#*@}" && pwd)
        [ "$(basename "$d")" = build ] && d=$(dirname "$d")
        echo "${1%%@*}@$(basename "$d")" ;;
    *) echo "$1" ;;
    esac
}
floor() { # np bytes iters -> us per op
    "$build/bench/floor" "$1" "$2" "$3" inplace 2>/dev/null | awk 'NF == 3 { print $3 }' | tail -1
}

rep=1
while [ "$rep" -le "$reps" ]; do
    for load in quiet busy; do
        [ $load = busy ] && start_spinners
        [ "$rep" = 1 ] && echo "# $load: load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $cores cores" >"$out/load.$load"
        for np in $nps; do
            for s in $sizes; do
                it=$(iters_for "$s" $load)
                for p in $avail; do
                    echo "$(run "$p" "$np" "$s" "$it")" >"$out/$(key "$p").$load.$np.$s.$rep"
                done
                [ -x "$build/bench/floor" ] && echo "$(floor "$np" "$s" "$it")" >"$out/floor.$load.$np.$s.$rep"
                printf '.' >&2
            done
        done
        stop_spinners
    done
    rep=$((rep + 1))
done
echo >&2

# median [min-max] of busbw GB/s over the reps
busbw() { # peer load np size
    r=1
    while [ $r -le "$reps" ]; do
        cat "$out/$(key "$1").$2.$3.$4.$r" 2>/dev/null
        r=$((r + 1))
    done | awk -v b="$4" -v p="$3" '$1 > 0 { print 2 * (p - 1) / p * b / ($1 * 1e3) }' | sort -g |
        awk '{ v[n++] = $1 } END { if (!n) { print "-"; exit }
             m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
             printf "%.3f [%.3f-%.3f]", m, v[0], v[n - 1] }'
}
med() { echo "$1" | awk '{ print ($1 == "-" ? "" : $1) }'; }

cat "$out/load.quiet" "$out/load.busy"
echo "# busbw GB/s, median [min-max] over $reps interleaved reps; busy = one 'while :; do :; done' per core"
hdr=$(printf '%-3s %-9s %-5s' np bytes load)
for p in $avail floor; do hdr="$hdr $(printf '%-20s' "$(label "$p")")"; done
echo "$hdr"
for np in $nps; do
    for s in $sizes; do
        for load in quiet busy; do
            line=$(printf '%-3s %-9s %-5s' "$np" "$s" "$load")
            for p in $avail floor; do line="$line $(printf '%-20s' "$(busbw "$p" $load "$np" "$s")")"; done
            echo "$line"
        done
        line=$(printf '%-3s %-9s %-5s' "$np" "$s" "b/q")
        for p in $avail floor; do
            q=$(med "$(busbw "$p" quiet "$np" "$s")"); b=$(med "$(busbw "$p" busy "$np" "$s")")
            line="$line $(printf '%-20s' "$(awk -v q="$q" -v b="$b" 'BEGIN { if (q > 0 && b != "") printf "%.2f", b / q; else print "-" }')")"
        done
        echo "$line"
    done
done
