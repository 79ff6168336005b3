#!/bin/sh
# bench/calibrate.py --quick on real tcp processes: it writes calib-tcp.ini,
# a [sim] drop-in whose model keys hold whole numbers (a latency or a
# bandwidth fitted; a bandwidth of 0 is the key's "infinite"), which
# plexus-whatif --model then loads: its modelled 2-rank allreduce of 8 B is
# at least the fitted latency (one exchange, at least one message's
# alpha). The fitted figures themselves depend on
# the machine's load and are not checked here (bench/calibrate.py prints
# them against the measurements).
#   sh calibrate_dropin.sh  (PLEXUS_BUILD_ROOT, PLEXUS_SOURCE_ROOT set)
set -u
build=$PLEXUS_BUILD_ROOT src=$PLEXUS_SOURCE_ROOT
[ -e "$build/plugins/tcp/plexus-tcp.so" ] || { echo "SKIP: no tcp plugin built"; exit 77; }
[ -x "$build/tools/plexus-run" ] || { echo "SKIP: no plexus-run built"; exit 77; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
/usr/bin/python3 "$src/bench/calibrate.py" --quick --build "$build" --transports tcp --out "$d" >"$d/log" 2>&1 ||
    { cat "$d/log"; echo "FAIL: calibrate.py exit"; exit 1; }
cat "$d/log"
f=$d/calib-tcp.ini
[ -s "$f" ] || { echo "FAIL: no $f"; exit 1; }
grep -qx '\[sim\]' "$f" || { echo "FAIL: no [sim] section"; cat "$f"; exit 1; }
grep -qx 'model = true' "$f" || { echo "FAIL: model not on"; cat "$f"; exit 1; }
cores=$(sed -n 's/^model_cores_per_host = \([0-9][0-9]*\)$/\1/p' "$f")
want=$(/usr/bin/python3 -c 'import os; print(os.cpu_count())')
[ "$cores" = "$want" ] || { echo "FAIL: model_cores_per_host '$cores', this machine has $want"; cat "$f"; exit 1; }
alpha=$(sed -n 's/^model_intra_latency = \([0-9][0-9]*\)ns$/\1/p' "$f")
bw=$(sed -n 's/^model_intra_bandwidth = \([0-9][0-9]*\)$/\1/p' "$f")
red=$(sed -n 's/^model_reduce_bandwidth = \([0-9][0-9]*\)$/\1/p' "$f")
[ -n "$alpha" ] && [ -n "$bw" ] && [ -n "$red" ] && [ "$alpha" -gt 0 -o "$bw" -gt 0 ] ||
    { echo "FAIL: model keys missing, or neither latency nor bandwidth fitted"; cat "$f"; exit 1; }
"$build/tools/plexus-whatif" --model "$f" --ranks 2 --algos auto -b 8 -e 8 --csv "$d/w.csv" >"$d/wlog" 2>&1 ||
    { cat "$d/wlog"; echo "FAIL: plexus-whatif --model $f"; exit 1; }
awk -F, -v a="$alpha" 'NR == 2 { got = $5 * 1000; printf "modelled 8 B allreduce %.0f ns, alpha %d ns\n", got, a
                                 exit !(got >= a) }
                       END { if (NR != 2) { print "expected one row"; exit 1 } }' "$d/w.csv" ||
    { echo "FAIL: the model file's latency is not in the modelled time"; exit 1; }
t=$d/tuning-tcp.txt
grep -q '^allreduce 2 0 [a-z]*$' "$t" || { echo "FAIL: no [core] tuner table for 2 ranks from 0 B"; cat "$t"; exit 1; }
echo "ok"
