#!/bin/sh
# What the MPI plugin adds over the same MPI's own MPI_Allreduce loop: same
# launcher, same flags, out-of-place f32 sum, runs interleaved; each row is
# the median of REPS runs (the single runs follow in brackets).
# Run from the source root: sh bench/mpi_overhead.sh [build]
# Environment: IMPLS="openmpi mpich", NP="2 4" (or NPS), REPS=5,
# SIZES="8 65536 1048576 16777216", ITERS (each run's iterations; default
# by size). IMPLS may name abi-mpich and abi-openmpi:
# plexus-mpi-abi against MPI_Allreduce through libmpi_abi.so.1, pointed at
# that implementation's ABI library for both.
# THREADS=multiple: the MPI loop asks for MPI_THREAD_MULTIPLE, as the plugin
# does (the difference to a plain MPI_Init is MPI's, not plexus's).
# Columns: MPI's loop, plexus's plain call (plx_allreduce), and the same
# collective prepared once (plexus-bench --prepared: plx_coll_prepare, then
# plx_prepared_run), interleaved in each rep.
# Then, since separate jobs on a small VM differ by more than the plugin
# costs (where the ranks land), the same three within one job
# (mpi_overhead_blocks: rotating blocks, each round's ratio to MPI's), with
# the flight recorder on (the default) and off; BLOCK_SIZES="8 65536",
# ROUNDS=30 (blocks of each). NP=1 gives what each call adds in ns: MPI's
# allreduce on one rank is a copy of tens of ns, where two ranks' figures
# move by more than plexus costs. Some jobs run slower throughout, MPI's
# own call too: compare within a job, and take several.
b=${1:-build}
export PLEXUS_CONFIG_PATH=$PWD/$b/devconfig
reps=${REPS:-5}
med() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# abi-*: libmpi_abi.so.1 in abi_dir, first on the library path, points at that implementation.
abi_dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-mpi-abi.XXXXXX")
trap 'rm -rf "$abi_dir"' EXIT
export LD_LIBRARY_PATH=$abi_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for impl in ${IMPLS:-openmpi mpich}; do
    flavour=${impl#abi-} loop=$b/bench/mpi_allreduce_loop_$impl backend=mpi-$impl
    if [ $flavour != $impl ]; then
        lib=$(ls /usr/lib/*/libmpi_abi_"$flavour".so.1* 2>/dev/null | head -n 1)
        [ -n "$lib" ] && [ -x $b/bench/mpi_allreduce_loop_abi ] ||
            { echo "# $impl: no libmpi_abi_$flavour or no mpi_allreduce_loop_abi, skipped"; continue; }
        ln -sf "$lib" "$abi_dir/libmpi_abi.so.1"
        loop=$b/bench/mpi_allreduce_loop_abi backend=mpi-abi
    fi
    if [ $flavour = openmpi ]; then
        run="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -x PLEXUS_CONFIG_PATH -x LD_LIBRARY_PATH -x MPI_LOOP_THREADS"
    else
        run="mpirun.mpich"
    fi
    command -v ${run%% *} >/dev/null || { echo "# $impl: launcher not installed, skipped"; continue; }
    for np in ${NPS:-${NP:-2 4}}; do
        for size in ${SIZES:-8 65536 1048576 16777216}; do
            case $size in 8) iters=20000 ;; 65536) iters=2000 ;; 1048576) iters=200 ;; *) iters=20 ;; esac
            [ $np -gt 2 ] && iters=$((iters / 4))
            iters=${ITERS:-$iters}
            ms="" ps="" qs=""
            for rep in $(seq $reps); do
                ms="$ms $(MPI_LOOP_THREADS=${THREADS:-} $run -np $np $loop $size $iters 2>/dev/null | awk 'NF == 2 && $1 ~ /^[0-9]+$/ {print $2}')"
                ps="$ps $($run -np $np $b/tools/plexus-bench --backend $backend -b $size -e $size -n $iters -w 5 2>/dev/null |
                          awk '$1 ~ /^[0-9]+$/ {print $6}')"
                qs="$qs $($run -np $np $b/tools/plexus-bench --backend $backend --prepared -b $size -e $size -n $iters -w 5 2>/dev/null |
                          awk '$1 ~ /^[0-9]+$/ {print $6}')"
            done
            awk -v i=$impl -v n=$np -v s=$size -v m="$(med $ms)" -v p="$(med $ps)" -v q="$(med $qs)" -v ms="$ms" -v ps="$ps" -v qs="$qs" 'BEGIN {
                printf "%-8s np=%d %9d B  MPI %9.2f us  plexus %9.2f us (%+5.1f%%)  prepared %9.2f us (%+5.1f%%)  [MPI%s] [plexus%s] [prepared%s]\n",
                       i, n, s, m, p, (p - m) / m * 100, q, (q - m) / m * 100, ms, ps, qs }'
        done
        blocks=$b/bench/mpi_overhead_blocks_${loop##*_}
        [ -x $blocks ] || continue
        for size in ${BLOCK_SIZES:-8 65536}; do
            for recorder in on off; do
                # the defaults (64 entries, fingerprints), or neither; Open MPI forwards them by name
                entries=64 fp=true
                [ $recorder = off ] && entries=0 fp=false
                fwd=""
                [ $flavour = openmpi ] && fwd="-x PLEXUS_CORE_LEDGER_ENTRIES -x PLEXUS_CORE_FINGERPRINT"
                PLEXUS_CORE_LEDGER_ENTRIES=$entries PLEXUS_CORE_FINGERPRINT=$fp \
                    $run $fwd -np $np $blocks $backend $size "${ITERS:-$((size > 8 ? 200 : 2000))}" "${ROUNDS:-30}" 2>/dev/null |
                    sed "s/^/$impl np=$np one job, flight recorder $recorder: /"
            done
        done
    done
done
