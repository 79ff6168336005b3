#!/bin/sh
# What the in-band fingerprint check ([core] fingerprint) costs the generic
# allreduce on tcp, 2 ranks on loopback: runs with the check on and off,
# interleaved (on/off order alternating), each row the median of REPS runs
# with the single runs in brackets. The time column is plexus-bench's
# out-of-place time per operation (us).
# Run from the source root: sh bench/fingerprint_overhead.sh [build]
# Environment: REPS=7, SIZES="8 1048576".
b=${1:-build}
export PLEXUS_CONFIG_PATH=$PWD/$b/devconfig
reps=${REPS:-7}
med() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
least() { echo "$@" | tr ' ' '\n' | grep . | sort -g | head -1; }
one() { # one(check, size, iters)
    PLEXUS_CORE_FINGERPRINT=$1 $b/tools/plexus-run -n 2 $b/tools/plexus-bench --backend tcp -b $2 -e $2 -n $3 -w 50 \
        2>/dev/null | awk '$1 == "[rank" && $3 ~ /^[0-9]+$/ {print $8}' | head -1
}
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for size in ${SIZES:-8 1048576}; do
    case $size in 8) iters=2000 ;; 1048576) iters=50 ;; *) iters=300 ;; esac
    on="" off=""
    for rep in $(seq $reps); do
        if [ $((rep % 2)) = 1 ]; then
            on="$on $(one true $size $iters)"; off="$off $(one false $size $iters)"
        else
            off="$off $(one false $size $iters)"; on="$on $(one true $size $iters)"
        fi
    done
    awk -v s=$size -v a="$(med $on)" -v o="$(med $off)" -v am="$(least $on)" -v om="$(least $off)" \
        -v on="$on" -v off="$off" 'BEGIN {
        printf "%9d B  median: on %9.2f us  off %9.2f us  %+8.2f us (%+5.1f%%)   best: on %9.2f  off %9.2f  %+8.2f us (%+5.1f%%)\n",
               s, a, o, a - o, (a - o) / o * 100, am, om, am - om, (am - om) / om * 100
        printf "           [on%s]\n           [off%s]\n", on, off }'
done
