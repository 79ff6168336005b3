#!/bin/sh
# bench_head.sh PLEXUS_BENCH - `plexus-bench ... | head -n 3` prints its 3
# lines at once: the header is flushed before the first row, which here never
# comes (10^9 iterations of one size).
set -u
bench=$1
tmp=$(mktemp -d)
mkfifo "$tmp/pipe"
"$bench" --backend sim --ranks 2 -b 8 -e 8 -n 1000000000 -w 0 >"$tmp/pipe" 2>"$tmp/err" &
bpid=$!
trap 'kill -KILL $bpid 2>/dev/null; rm -rf "$tmp"' EXIT
head -n 3 <"$tmp/pipe" >"$tmp/out" &
hpid=$!
i=0
while kill -0 $hpid 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
n=$(wc -l <"$tmp/out")
if [ "$n" != 3 ]; then
    echo "FAIL: head -n 3 got $n line(s) in 10 s:"
    cat "$tmp/out" "$tmp/err"
    kill $hpid 2>/dev/null
    exit 1
fi
echo "ok: 3 lines after $((i * 100)) ms:"
cat "$tmp/out"
