#!/bin/sh
# plexus-whatif end to end: its CSV rows for 64 ranks on one host (2 us,
# 2^30 B/s) against the closed forms of recursive doubling, tree and
# Rabenseifner allreduce at 4 KiB: log2 P (a + n b), 2 log2 P (a + n b),
# 2 log2 P a + 2 (P-1)/P n b, each within 2%; then shm's native allreduce
# (--intra-native shm) on 4 ranks sharing 2 cores against its schedule.
set -eu
tool="$1"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$tool" --ranks 64 --hosts 1 --intra-latency 2us --intra-bandwidth 1G -b 4096 -e 4096 --csv "$out" >/dev/null
awk -F, 'BEGIN { a = 2000; b = 1e9 / 2^30; n = 4096; L = 6; P = 64
                 want["recdbl"] = L * (a + n * b); want["tree"] = 2 * L * (a + n * b)
                 want["rabenseifner"] = 2 * L * a + 2 * (P - 1) / P * n * b }
     NR > 1 && ($4 in want) { got = $5 * 1000; err = (got - want[$4]) / want[$4]; if (err < 0) err = -err
                              printf "%-13s model %10.0f ns formula %10.0f ns (%.2f%%)\n", $4, got, want[$4], 100 * err
                              seen++; if (err > 0.02) bad++ }
     END { if (seen != 3) { print "expected 3 rows, got " seen; exit 1 } exit bad ? 1 : 0 }' "$out"
# --intra-native shm: 4 ranks on 2 cores run shm's native allreduce, by its
# schedule (plugins/sim/model.c): each barrier 2 a (alpha time-shared) and
# one wake-up (the 2 ranks off the cores, 2 at a time); up to 16 KiB one
# barrier and two copies of n, time-shared; above, per 1 MiB round two
# barriers and 2 P slices of n / P copied (2 n), time-shared.
"$tool" --ranks 4 --intra-latency 2us --intra-bandwidth 1G --cores-per-host 2 --wake-latency 5us \
    --intra-native shm --algos auto -b 4096 -e 3M -f 768 --csv "$out" >/dev/null
awk -F, 'BEGIN { a = 2000; b = 1e9 / 2^30; s = 2; bar = s * a + 5000
                 want[4096] = bar + s * 2 * 4096 * b; want[3145728] = 3 * (2 * bar + s * 2 * 2^20 * b) }
     NR > 1 && ($3 in want) { got = $5 * 1000; err = (got - want[$3]) / want[$3]; if (err < 0) err = -err
                              printf "shm-native %7d B model %10.0f ns formula %10.0f ns (%.2f%%)\n", $3, got, want[$3], 100 * err
                              seen++; if (err > 0.02) bad++ }
     END { if (seen != 2) { print "expected 2 rows, got " seen; exit 1 } exit bad ? 1 : 0 }' "$out"
