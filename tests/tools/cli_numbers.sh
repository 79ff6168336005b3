#!/bin/sh
# cli_numbers.sh PLEXUS_RUN PLEXUS_BENCH PLEXUS_WHATIF PLEXUS_TOP - the tools' numeric
# options are read whole or refused: "3x", "abc", a value out of range, a
# missing value or a stray argument stops the tool with status 2 and a line
# that names the option, before anything runs (atoi made "3x" 3, "abc" 0:
# plexus-bench --ranks abc ran one process rank instead of refusing). And
# the values that are right still run.
set -u
run=$1
bench=$2
whatif=$3
top=$4
fail=0
bench_args="--backend sim --ranks 2 -b 8 -e 64 -n 1 -w 0"
whatif_args="--ranks 4 -b 8 -e 64 --algos ring"

# refused WORDS WANT TOOL ARGS...: exit 2, and WORDS on stderr.
refused() {
    words=$1 want=$2
    shift 2
    out=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc != "$want" ] || ! printf '%s\n' "$out" | grep -qF -- "$words"; then
        echo "FAILED: $* -> status $rc (want $want), stderr:"
        printf '%s\n' "$out" | head -3
        fail=1
    fi
}

for bad in "-n 3x" "-n 0" "-w -5" "-w 1.5" "-r abc" "-b 1Q" "-b -8" "-b 1.5" "-e 4X" "-f 2x" "-f 1"; do
    opt=${bad%% *}
    refused "$opt" 2 "$bench" $bench_args $bad
done
for bad in "0" "-2" "abc" "300" "2x"; do
    refused "--ranks wants a whole number from 1 to 256, not '$bad'" 2 "$bench" --backend sim -b 8 -e 64 --ranks "$bad"
done
refused "unexpected argument '7'" 2 "$bench" $bench_args --check 7
refused "--check wants a whole number from 0 to 1" 2 "$bench" $bench_args --check=3

for bad in "-n 0" "-n abc" "-n 2x" "-n 257" "--timeout 5s" "--grace -1" "--port 70000" "--port x"; do
    opt=${bad%% *}
    refused "$opt wants a whole number" 2 "$run" $bad true
done
refused "-n N (the number of ranks" 2 "$run" true
refused "no PROGRAM to start" 2 "$run" -n 2
refused "--timeout needs a value" 2 "$run" -n 2 --timeout
refused "unknown option '--bogus'" 2 "$run" -n 2 --bogus true

for bad in "-b 1Q" "-e 2x" "-f 0.5" "-f abc"; do
    opt=${bad%% *}
    refused "$opt" 2 "$whatif" $whatif_args $bad
done

for bad in "abc" "0" "-5" "10x"; do
    refused "--interval wants a whole number from 1 to 3600000, not '$bad'" 2 "$top" --once --interval "$bad"
done

# What is right still runs: suffixes, a fraction with one, --check 0 and 1.
out=$("$bench" --backend sim --ranks 2 -b 1.5K -e 2K -f 1.5 -n 1 -w 0 --check 1 2>&1) ||
    { echo "FAILED: plexus-bench -b 1.5K -e 2K -f 1.5 --check 1:"; echo "$out" | tail -3; fail=1; }
echo "$out" | grep -q "^ *1536 " || { echo "FAILED: no 1536-byte row for -b 1.5K"; fail=1; }
"$bench" $bench_args --check 0 >/dev/null 2>&1 || { echo "FAILED: plexus-bench --check 0"; fail=1; }
"$run" -n 2 --timeout 60 --grace 1 true || { echo "FAILED: plexus-run -n 2 --timeout 60 --grace 1 true"; fail=1; }
"$whatif" $whatif_args -f 4 >/dev/null 2>&1 || { echo "FAILED: plexus-whatif $whatif_args -f 4"; fail=1; }
empty=$(mktemp -d "${TMPDIR:-/tmp}/plexus-cli-numbers.XXXXXX")
"$top" --once --interval 500 --dir "$empty" >/dev/null 2>&1
[ $? = 1 ] || { echo "FAILED: plexus-top --once --interval 500 on an empty folder: want status 1 (no ledgers)"; fail=1; }
rmdir "$empty"
[ $fail = 0 ] && echo ok
exit $fail
