#!/bin/sh
# What the MPI plugin adds over the same MPI's own MPI_Allreduce, same
# launcher, same flags, interleaved, twice. Run from the build folder's
# parent: sh bench/mpi_overhead.sh [build]
b=${1:-build}
export PLEXUS_CONFIG_PATH=$PWD/$b/devconfig
for impl in openmpi mpich; do
    if [ $impl = openmpi ]; then run="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -x PLEXUS_CONFIG_PATH"; else run="mpirun.mpich"; fi
    command -v ${run%% *} >/dev/null || { echo "# $impl: launcher not installed, skipped"; continue; }
    for np in 2 4; do
        for rep in 1 2; do
            for size in 8 65536 1048576 16777216; do
                iters=$([ $size -ge 16777216 ] && echo 20 || echo 1000)
                mpi=$($run -np $np $b/bench/mpi_allreduce_loop_$impl $size $iters 2>/dev/null | awk '{print $2}')
                plx=$($run -np $np $b/tools/plexus-bench --backend mpi-$impl -b $size -e $size -n $iters -w 5 2>/dev/null |
                      awk '$1 ~ /^[0-9]+$/ {print $6}')
                awk -v i=$impl -v n=$np -v r=$rep -v s=$size -v m="$mpi" -v p="$plx" 'BEGIN {
                    printf "%-8s np=%d rep%d %9d B  MPI %9.2f us  plexus %9.2f us  +%.2f us (%+.1f%%)\n", i, n, r, s, m, p, p - m, (p - m) / m * 100 }'
            done
        done
    done
done
