#!/bin/sh
# step_table.sh [BUILD_DIR] - a training step's pattern (a barrier, then one
# allreduce timed; the slowest rank per operation; the median over the
# operations) with every core busy (bench/spinners.sh: one foreign busy
# process per core): torch's gloo against plexus (PLEXUS_BACKEND, tcp by
# default) through torch (bench/torch_step_allreduce.py, interleaved in the
# same processes), and Open MPI over TCP (mpi_allreduce_loop with
# MPI_LOOP_EACH) in turn, REPS (5) rounds. NP="2 4" and SIZES="1M 16M"
# override; QUIET=1 runs without the busy processes. Prints CSV rows
# np,bytes,peer,rep,time_us,busbw_gbs, then medians [min-max] per cell.
set -u
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
nps=${NP:-"2 4"} sizes=${SIZES:-"1M 16M"} reps=${REPS:-5} ops=${OPS:-15}
export PLEXUS_BACKEND=${PLEXUS_BACKEND:-tcp} PLEXUS_CONFIG_PATH=${PLEXUS_CONFIG_PATH:-$build/devconfig}
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || { echo "skip: no torch.distributed for /usr/bin/python3"; exit 77; }
ompi=1
command -v mpirun.openmpi >/dev/null 2>&1 && [ -x "$build/bench/mpi_allreduce_loop_openmpi" ] ||
    { ompi=0; echo "# skipping Open MPI: no mpirun.openmpi or no $build/bench/mpi_allreduce_loop_openmpi"; }
out=$(mktemp) log=$(mktemp)
. "$src/bench/spinners.sh"
trap 'stop_spinners; rm -f "$out" "$log" "$log.rows"' EXIT
trap 'exit 130' INT TERM
bytes_of() { case $1 in *M) echo $((${1%M} << 20)) ;; *K) echo $((${1%K} << 10)) ;; *) echo "$1" ;; esac; }
[ "${QUIET:-0}" = 1 ] || start_spinners
echo "# load: $(cut -d' ' -f1-3 /proc/loadavg) (busy processes: ${spinners:-none})"
echo "np,bytes,peer,rep,time_us,busbw_gbs"
rep=1
while [ "$rep" -le "$reps" ]; do
    for np in $nps; do
        if timeout 900 /usr/bin/python3 "$src/bench/torch_step_allreduce.py" --np "$np" --reps 1 --ops "$ops" \
            --first-rep "$rep" --sizes "$(echo $sizes | tr ' ' ,)" >"$log.rows" 2>"$log"; then
            tee -a "$out" <"$log.rows"
        else
            echo "# torch_step_allreduce.py failed at $np ranks, round $rep:"
            tail -5 "$log" | sed 's/^/# /'
        fi
        [ "$ompi" = 1 ] || continue
        for s in $sizes; do
            b=$(bytes_of "$s")
            us=$(MPI_LOOP_EACH=1 timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none \
                --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
                -np "$np" "$build/bench/mpi_allreduce_loop_openmpi" "$b" "$ops" 2>"$log" | awk 'NF == 2 { print $2 }')
            [ -n "$us" ] || { echo "# Open MPI failed at $np ranks, $b B, round $rep: $(tail -1 "$log")"; continue; }
            echo "$np,$b,ompitcp,$rep,$us,$(awk -v b="$b" -v t="$us" -v n="$np" \
                'BEGIN { printf "%.4f", b / t / 1e3 * 2 * (n - 1) / n }')" | tee -a "$out"
        done
    done
    rep=$((rep + 1))
done
stop_spinners
/usr/bin/python3 - "$out" <<'PY'
import csv, statistics, sys
cells = {}
for r in csv.reader(open(sys.argv[1])):
    cells.setdefault((int(r[0]), int(r[1]), r[2]), []).append(float(r[5]))
print("# busbw GB/s: median [min-max] over the rounds")
for (np_, b, p), v in sorted(cells.items()):
    print("# np %d %9d B %-8s %.3f [%.3f-%.3f] (%d)" % (np_, b, p, statistics.median(v), min(v), max(v), len(v)))
PY
