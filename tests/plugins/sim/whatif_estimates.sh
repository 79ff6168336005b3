#!/bin/sh
# plexus-whatif --emit-estimates end to end on a modelled 4-rank host:
#  1. each row of its [core] estimates table is the time whatif printed for
#     what the core runs at that size: with --emit-tuning in the same run,
#     the fastest allreduce algorithm (the tuner's choice); the one
#     algorithm of allgather, reduce_scatter, broadcast and barrier. The
#     printed tables leave the core's in-band fingerprint out, a job's run
#     has it where it is configured (the default): compared with it off;
#  2. plx_comm_estimate on a sim communicator of 4 ranks configured as the
#     table was made answers each row, and the collective run for real
#     there (threads, the data moved) ends at that modelled time
#     (test_sim_estimate e2e), with the fingerprint off, and on (default);
#  3. plexus-info shows the table in use, its backend and ranks.
#   sh whatif_estimates.sh PLEXUS-WHATIF PLEXUS-INFO TEST-SIM-ESTIMATE
set -eu
whatif="$1" info="$2" probe="$3"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat >"$d/model.ini" <<'INI'
[sim]
model = true
model_intra_latency = 2us
model_intra_bandwidth = 1G
model_reduce_bandwidth = 4G
INI
# est-off.txt: the fingerprint off; est.txt: the default configuration.
emit() {
    "$whatif" --model "$d/model.ini" --ranks 4 -b 64 -e 4M -f 4 \
        --coll allreduce,allgather,reduce_scatter,broadcast,barrier --backend sim \
        --emit-tuning "$d/tuning.txt" --emit-estimates "$1" --csv "$d/all.csv" >"$d/emit.log"
}
PLEXUS_CORE_FINGERPRINT=false emit "$d/est-off.txt"
cat "$d/tuning.txt" "$d/est-off.txt"
rows=$(grep -c '^allreduce 4 0 ' "$d/tuning.txt" || true)
[ "$rows" -eq 1 ] || { echo "FAIL: no tuner table"; exit 1; }
# 1. The table's time (s) against the fastest printed (us, 3 decimals).
awk 'FNR == NR { if (FNR > 1) { k = $8 " " $3; t = $5 + 0; if (!(k in best) || t < best[k]) best[k] = t }; next }
     /^[a-z_]+ 4 [0-9]+ / { n++; k = $1 " " $3; us = $4 * 1e6
                             if (!(k in best) || us - best[k] > 0.0005001 || best[k] - us > 0.0005001) {
                                 printf "FAIL %s B: table %.4f us, whatif printed %s us\n", k, us, best[k]; bad++ } }
     END { if (n != 4 * 9 + 1) { print "expected 37 rows, got " n; exit 1 }
           exit bad ? 1 : 0 }' FS=, "$d/all.csv" FS=' ' "$d/est-off.txt" ||
    { echo "FAIL: the estimates are not whatif's times of the core's choice"; exit 1; }
echo "ok: the table holds whatif's times of the core's choice"
# 2. The core's answer and the real run, in a job configured as the table
#    was made: the model, the tuner table, the fingerprint.
PLEXUS_CONFIG="$d/model.ini" PLEXUS_CORE_TUNER="$d/tuning.txt" PLEXUS_CORE_FINGERPRINT=false \
    "$probe" e2e "$d/est-off.txt" 4
emit "$d/est.txt"
PLEXUS_CONFIG="$d/model.ini" PLEXUS_CORE_TUNER="$d/tuning.txt" "$probe" e2e "$d/est.txt" 4
# 3. plexus-info.
PLEXUS_CORE_ESTIMATES="$d/est.txt" "$info" >"$d/info.log"
grep "estimates: $d/est.txt (core.estimates, env PLEXUS_CORE_ESTIMATES): backend sim; allreduce at 4 ranks (64..4194304 B); broadcast at 4 ranks (64..4194304 B); allgather at 4 ranks (64..4194304 B); reduce_scatter at 4 ranks (64..4194304 B); barrier at 4 ranks (0 B)$" "$d/info.log" ||
    { cat "$d/info.log"; echo "FAIL: plexus-info does not show the estimates table in use"; exit 1; }
"$info" | grep "^estimates: none (core.estimates unset" ||
    { echo "FAIL: plexus-info does not say no estimates table is set"; exit 1; }
echo "allreduce 4 8 soon" >"$d/bad.txt"
PLEXUS_CORE_ESTIMATES="$d/bad.txt" "$info" | grep "^estimates: BROKEN (core.estimates, env PLEXUS_CORE_ESTIMATES; plx_comm_estimate fails): $d/bad.txt:1: SECONDS 'soon'" ||
    { echo "FAIL: plexus-info does not show a broken table with file:line"; exit 1; }
echo ok
