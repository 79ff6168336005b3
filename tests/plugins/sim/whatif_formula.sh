#!/bin/sh
# plexus-whatif end to end: its CSV rows for 64 ranks on one host (2 us,
# 2^30 B/s) against the closed forms of recursive doubling, tree and
# Rabenseifner allreduce at 4 KiB: log2 P (a + n b), 2 log2 P (a + n b),
# 2 log2 P a + 2 (P-1)/P n b, each within 2%.
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
