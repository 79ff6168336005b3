#!/bin/sh
# small_copies.sh BUILD [BYTES] - user-space copies of the payload and mutex
# locks per operation per rank (the first rank to report) of a 2-rank allreduce of BYTES (default 8)
# bytes, through the count_calls.so shim (LD_PRELOAD). Two runs of N and 2N
# operations (out-of-place and in-place columns both): the difference over N
# ops leaves setup and teardown out. The tcp spin is off, so a wait takes its
# lock once per sleep, not once per look (which would count the machine's load).
# BACKEND: tcp (default) or shm.
set -u
build=$(cd "$1" && pwd) || exit 2
bytes=${2:-8}
n=${N:-200}
backend=${BACKEND:-tcp}
shim=${SHIM:-$build/bench/count_calls.so} # SHIM: another build's, for a tree without it
[ -f "$shim" ] || { echo "no $shim (build bench/)"; exit 2; }
run() { # ops -> "copies_of_bytes copies locks" of one rank (plexus-run may relay only one's last line)
    COUNT_BYTES=$bytes PLEXUS_TCP_BUSY_POLL_US=0 LD_PRELOAD=$shim PLEXUS_CONFIG_PATH="$build/devconfig" \
        "$build/tools/plexus-run" -n 2 --timeout 300 "$build/tools/plexus-bench" --backend "$backend" -b "$bytes" -e "$bytes" \
        -n "$1" -w 0 2>&1 | awk '$1 == "[rank" && $3 == "count_calls:" { print $7, $9, $11; exit }'
}
a=$(run "$n")
b=$(run $((2 * n)))
[ -n "$a" ] && [ -n "$b" ] || { echo "a run printed no counts: '$a' '$b'"; exit 1; }
echo "$a $b" | awk -v n="$n" -v backend="$backend" -v bytes="$bytes" '{ ops = 2 * n;
    printf "%s: per op per rank (avg of out-of-place and in-place): %.2f copies of %s bytes, %.2f memcpy/memmove, %.2f mutex locks\n", backend,
           ($4 - $1) / ops, bytes, ($5 - $2) / ops, ($6 - $3) / ops }'
