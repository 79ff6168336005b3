#!/bin/sh
# torch_8b_profile.sh [BUILD_DIR] - where the time of one 8 B all_reduce goes:
# torch on "plexus" (bench/torch_8b_loop.py) against plexus-bench, 2
# processes on the same transport (PLEXUS_BACKEND, tcp by default). Each
# loop runs alone while `perf record -a -e cpu-clock` samples both cores for
# a few seconds of it; the samples of the rank processes are split by the
# library they fall in, and each share of the call's time is printed in us
# per call (share x the loop's mean time per call: the ranks spin while they
# wait, so they keep their cores busy). Needs perf (linux-perf) and torch.
#   Groups: torch (Python, libtorch*, libc10, pybind), binding (plexus.torch),
#   plexus (libplexus, the plugin, plexus-bench, the vdso clock its waits
#   read), libc/libstdc++, kernel (system calls, the loopback TCP path, and
#   the polls of a wait).
# Environment: SECONDS_SAMPLED (3), FREQ (2000 samples/s per core), KEEP=1
# keeps the perf data (printed path) for perf report.
set -u
build=${1:-build}
[ -d "$build" ] || { echo "no build directory '$build'"; exit 2; }
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)"; exit 2; }
export PLEXUS_CONFIG_PATH=${PLEXUS_CONFIG_PATH:-$build/devconfig}
export PLEXUS_BACKEND=${PLEXUS_BACKEND:-tcp}
secs=${SECONDS_SAMPLED:-3}
# Loops long enough to outlast their sampling (with the warning below where
# they did not), and no longer, however fast the calls are here: each is sized
# in calls from its own pace (the torch loop from its warm-up, plexus-bench
# from a short run first), so a busy machine does not stretch them.
loop_s=$((2 * secs + 3)) # twice the sampling and more: the pace of a busy machine varies
freq=${FREQ:-2000} # samples per second per core: more perturbs the loop it samples
out=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "# perf data kept in $out" || trap 'rm -rf "$out"' EXIT

# share per group (percent of the ranks' samples) from one perf.data; $1 the ranks' process name
groups() {
    perf report -i "$2" --sort comm,dso -v --stdio -t ';' 2>/dev/null | awk -F';' -v comm="$1" '
        /^#/ || NF < 3 { next }
        { c = $2; gsub(/ /, "", c); if (c != comm) next
          p = $1; gsub(/[ %]/, "", p); d = $3
          if (d ~ /kernel/) g = "kernel"
          else if (d ~ /python\/plexus\/torch/) g = "binding"
          else if (d ~ /libplexus|plexus-[a-z]+\.so|plexus-bench|vdso/) g = "plexus"
          else if (d ~ /libc\.so|libstdc\+\+|libm\.so|ld-linux|libgcc/) g = "libc"
          else g = "torch"
          s[g] += p; t += p }
        END { for (g in s) printf "%s %.4f\n", g, s[g] / t }'
}

# torch on plexus: wait for the timed loop, sample the middle of it
env PYTHONUNBUFFERED=1 meson devenv -C "$build" /usr/bin/python3 "$src/bench/torch_8b_loop.py" --np 2 \
    --seconds "$loop_s" --ready-file "$out/ready" >"$out/torch.txt" 2>&1 &
pid=$!
i=0
while [ ! -e "$out/ready" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
[ -e "$out/ready" ] || { wait $pid; echo "the torch loop did not start its timed part:"; cat "$out/torch.txt"; exit 1; }
sleep 0.5
perf record -q -a -e cpu-clock -F "$freq" -o "$out/torch.data" -- sleep "$secs" >/dev/null 2>&1
wait $pid
t_torch=$(awk '/us\/call/ { print $2 }' "$out/torch.txt")
iters_torch=$(awk '/us\/call/ { print $4 }' "$out/torch.txt")

# plexus-bench, same transport, the same kind of loop
bench_us() { awk '$1 == "[rank" && $2 == "0]" && $3 == "8" { print $8 }' "$1"; }
"$build/tools/plexus-run" -n 2 "$build/tools/plexus-bench" --inplace -b 8 -e 8 -n 2000 -w 100 >"$out/pace.txt" 2>&1 ||
    { cat "$out/pace.txt"; exit 1; }
pace=$(bench_us "$out/pace.txt")
[ -n "$pace" ] || { cat "$out/pace.txt"; exit 1; }
iters_bench=$(awk -v us="$pace" -v s="$loop_s" 'BEGIN { n = s * 1e6 / us; print (n < 2000 ? 2000 : int(n)) }')
"$build/tools/plexus-run" -n 2 "$build/tools/plexus-bench" --inplace -b 8 -e 8 -n "$iters_bench" -w 1000 \
    >"$out/bench.txt" 2>&1 &
pid=$!
sleep 1
perf record -q -a -e cpu-clock -F "$freq" -o "$out/bench.data" -- sleep "$secs" >/dev/null 2>&1
wait $pid
t_bench=$(bench_us "$out/bench.txt")
[ -n "$t_torch" ] && [ -n "$t_bench" ] || { cat "$out/torch.txt" "$out/bench.txt"; exit 1; }
# A loop that ended inside its sampling window leaves its teardown in the shares.
awk -v a="$t_torch" -v b="$t_bench" -v s="$secs" -v it="$iters_torch" -v ib="$iters_bench" 'BEGIN {
    if (it * a / 1e6 < s + 0.5) print "# warning: the torch loop ended before its sampling did"
    if (ib * b / 1e6 < s + 1) print "# warning: the plexus-bench loop ended before its sampling did" }'

groups python3 "$out/torch.data" >"$out/torch.g"
groups plexus-bench "$out/bench.data" >"$out/bench.g"
echo "# 8 B all_reduce, 2 processes, transport $PLEXUS_BACKEND; us per call by where the rank's CPU was"
printf '%-10s %12s %14s\n' group torch-plexus plexus-bench
for g in torch binding plexus libc kernel; do
    a=$(awk -v g=$g -v t="$t_torch" '$1 == g { printf "%.2f", $2 * t }' "$out/torch.g")
    b=$(awk -v g=$g -v t="$t_bench" '$1 == g { printf "%.2f", $2 * t }' "$out/bench.g")
    printf '%-10s %12s %14s\n' $g "${a:-0.00}" "${b:-0.00}"
done
printf '%-10s %12s %14s\n' total "$t_torch" "$t_bench"
awk -v a="$t_torch" -v b="$t_bench" 'BEGIN { printf "# ratio torch-plexus / plexus-bench %.2f\n", a / b }'
