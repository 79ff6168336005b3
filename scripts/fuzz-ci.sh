#!/bin/sh
# Short libFuzzer runs of every fuzz target (tests/fuzz/), for CI.
#
#   sh scripts/fuzz-ci.sh                 each target for FUZZ_SECONDS (default 60)
#   FUZZ_SECONDS=600 sh scripts/fuzz-ci.sh config tcp_wire
#   FUZZ_ARGS='-rss_limit_mb=4096 -seed=1' ...   more libFuzzer flags
#   sh scripts/fuzz-ci.sh --build         only configure and build the targets
#   FUZZ_JOBS=2 sh scripts/fuzz-ci.sh     that many targets at once (one core each)
#
# Needs clang with libFuzzer (Debian's clang); without it, says so and exits
# 0: the committed corpus still runs in every build (meson test --suite
# fuzz-replay). Builds into FUZZ_BUILD_DIR (default build-fuzzer) with
# -Dfuzz=true, the whole project instrumented for coverage
# (-fsanitize=fuzzer-no-link) and ASan+UBSan. Each target starts from its
# committed corpus (read only) plus a scratch corpus under the build dir.
# Prints per target the executions and executions per second from
# libFuzzer's final stats, and any crash with its saved input; exits 1 if
# any target crashed, leaked, timed out or ran out of memory.
set -u
cd "$(dirname "$0")/.."

build_only=0
[ "${1:-}" = --build ] && { build_only=1; shift; }
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD_DIR:-build-fuzzer}
clang=${FUZZ_CC:-clang}

if ! command -v "$clang" >/dev/null 2>&1; then
    echo "fuzz-ci: $clang not found: no libFuzzer runs (the corpus replays in suite fuzz-replay)"
    exit 0
fi

# clang 14 rejects __builtin_cpu_supports("f16c") (core/reduce.c); the fuzz
# build takes the kernels' portable path instead, which it does not fuzz.
clang14_workaround='-D__builtin_cpu_supports(x)=0'
if [ ! -f "$build/build.ninja" ]; then
    CC=$clang meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
        "-Dc_args=-fsanitize=fuzzer-no-link $clang14_workaround" >"$build.setup.log" 2>&1 ||
        { cat "$build.setup.log"; echo "fuzz-ci: meson setup failed"; exit 1; }
    rm -f "$build.setup.log"
fi

if [ $# -gt 0 ]; then
    targets="$*"
else
    targets=$(cd tests/fuzz/corpus && ls -d */ | tr -d /)
fi
ninja_targets="tests/fuzz/fuzz_fake_backend.so"
for t in $targets; do
    ninja_targets="$ninja_targets tests/fuzz/fuzz_$t"
done
# A target whose code is not built here (e.g. -Dtcp=disabled) is skipped below.
ninja -C "$build" $ninja_targets >"$build/fuzz-build.log" 2>&1 ||
    ninja -C "$build" -k 0 $ninja_targets >>"$build/fuzz-build.log" 2>&1

[ $build_only = 0 ] || exit 0

# UBSan findings are fatal, as ASan's are; libFuzzer reports both as crashes.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1
# fuzz_one TARGET: run it; its line (and any crash excerpt) goes to
# fuzz-out/TARGET/summary, and fuzz-out/TARGET/failed marks a crash.
fuzz_one() {
    t=$1
    out="$build/fuzz-out/$t"
    rm -rf "$out"
    mkdir -p "$out/corpus"
    bin="$build/tests/fuzz/fuzz_$t"
    if [ ! -x "$bin" ]; then
        echo "fuzz $t: not built here (see $build/fuzz-build.log): skipped" >"$out/summary"
        return
    fi
    log="$out/log.txt"
    case $t in
    # Every input of these "leaks" by design (the config keeps each string
    # it handed out, a few KB per input, so runs much longer than 10 min
    # need a larger -rss_limit_mb; the loader forgets the array of old
    # backends), so a leak scan after each input would take most of the
    # time. Leaks are still checked once, when the run ends.
    config | loader) per_input_leaks=0 ;;
    *) per_input_leaks=1 ;;
    esac
    "$bin" -max_total_time="$seconds" -timeout=10 -max_len=8192 -print_final_stats=1 \
        -detect_leaks=$per_input_leaks ${FUZZ_ARGS:-} \
        -artifact_prefix="$out/" "$out/corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1, ft \2/p')
    artifacts=$(ls "$out" | grep -E '^(crash|leak|timeout|oom)-' | sed "s|^|$out/|" | tr '\n' ' ')
    if [ $rc -eq 0 ] && [ -z "$artifacts" ]; then
        status=ok
    else
        status="CRASH (exit $rc): ${artifacts:-no input saved} - see $log"
        touch "$out/failed"
        grep -E 'ERROR: |runtime error:|fuzz check failed|SUMMARY:' "$log" | head -n 5 | sed 's/^/    /' >"$out/excerpt"
    fi
    echo "fuzz $t: ${execs:-?} execs, ${rate:-?} execs/s, ${cov:-cov ?}, peak RSS ${rss:-?} MB, ${seconds} s: $status" \
        >"$out/summary"
    [ ! -f "$out/excerpt" ] || cat "$out/excerpt" >>"$out/summary"
}

# FUZZ_JOBS lanes, each running its share of the targets one after another
# (each target is one process on one core, for FUZZ_SECONDS of wall time).
jobs=${FUZZ_JOBS:-1}
for t in $targets; do # no result left from an earlier run may stand for this one's
    rm -rf "$build/fuzz-out/$t"
done
lane=0
while [ $lane -lt "$jobs" ]; do
    (
        i=0
        for t in $targets; do
            [ $((i % jobs)) = $lane ] && fuzz_one "$t"
            i=$((i + 1))
        done
    ) &
    lane=$((lane + 1))
done
wait
failed=0
for t in $targets; do
    if [ ! -f "$build/fuzz-out/$t/summary" ]; then # its lane stopped before it: nothing ran
        echo "fuzz $t: no result (its lane ended early)"
        failed=1
        continue
    fi
    cat "$build/fuzz-out/$t/summary"
    [ ! -f "$build/fuzz-out/$t/failed" ] || failed=1
done
exit $failed
