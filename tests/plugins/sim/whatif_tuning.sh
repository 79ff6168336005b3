#!/bin/sh
# The tuner end to end: plexus-whatif --emit-tuning writes the fastest
# allreduce by size of a modelled 16-rank, 2-host cluster as a [core] tuner
# table; plexus-info names the table and where it was set; and the core's
# automatic choice with that table (plexus-whatif --algos auto) is, at each
# swept size, as fast as the fastest algorithm in the model.
#   sh whatif_tuning.sh PLEXUS-WHATIF PLEXUS-INFO
set -eu
whatif="$1" info="$2"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
sweep="--ranks 16 --hosts 2 -b 8 -e 4M -f 8"
# shellcheck disable=SC2086
"$whatif" $sweep --emit-tuning "$d/tuning.txt" >"$d/emit.log"
cat "$d/tuning.txt"
rows=$(grep -c '^allreduce 16 [0-9]* [a-z]*$' "$d/tuning.txt" || true)
[ "$rows" -ge 2 ] || { echo "FAIL: expected a crossover (2 or more rows), got $rows"; exit 1; }
PLEXUS_CORE_TUNER="$d/tuning.txt" "$info" >"$d/info.log"
grep "allreduce tuner: $d/tuning.txt (core.tuner, env PLEXUS_CORE_TUNER): from 16 ranks:" "$d/info.log" ||
    { cat "$d/info.log"; echo "FAIL: plexus-info does not show the tuner in use"; exit 1; }
# shellcheck disable=SC2086
PLEXUS_CORE_TUNER="$d/tuning.txt" "$whatif" $sweep --algos auto,ring,recdbl,tree,rabenseifner --csv "$d/all.csv" >"$d/all.log"
awk -F, 'NR > 1 { t = $5 + 0
                  if ($4 == "auto") auto[$3] = t
                  else if (!($3 in best) || t < best[$3]) { best[$3] = t; name[$3] = $4 } }
         END { n = 0
               for (b in best) { n++; err = (auto[b] - best[b]) / best[b]
                                 printf "%9d B: auto %10.2f us, fastest %-12s %10.2f us\n", b, auto[b], name[b], best[b]
                                 if (!(b in auto) || err > 1e-4 || err < -1e-4) bad++ }
               if (n < 7) { print "expected 7 sizes, got " n; exit 1 }
               exit bad ? 1 : 0 }' "$d/all.csv" || { echo "FAIL: the tuned choice is not the fastest"; exit 1; }
echo ok
