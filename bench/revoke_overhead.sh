#!/bin/sh
# revoke_overhead.sh - what revoke costs the fast path: allreduce f32 sum of
# 8 B and 1 MiB (out of place), tcp and shm, NP ranks under plexus-run, a
# build without it and a build with it in the same run, interleaved (the
# order alternates per rep). Each row: the median of REPS runs, the spread
# (least to most), and the single runs in brackets; times are plexus-bench's
# microseconds per operation. Each rep's two runs are a pair: the median
# of the pairs' ratios (with/without) and its quartiles follow, since the
# load of other work drifts between reps more than within a pair.
#
# "Without" is the commit before plx_comm_revoke came in, "with" the commit
# that added it: the two differ in the revoke code alone (the core's checks
# of the revoked mark, shm's look at its peers' marks while it spins in a
# barrier, tcp's revoke notice). Failure detection itself (tcp's lost
# connection and notices, shm's watch of its peers' pids) is older than
# both and is in both builds. Both are built here the same way, with only
# the targets the run needs, under WORK.
#
# Run from the source root:
#   sh bench/revoke_overhead.sh [WITHOUT_REV [WITH_REV]]
# Defaults: f728bc8~1 and f728bc8. Environment: REPS=7, NP=2,
# SIZES="8 1048576", BACKENDS="tcp shm", WORK=/tmp/plexus-revoke-overhead,
# BUILD_ONLY=1 (build both, measure nothing).
set -u
without=${1:-f728bc8~1}
with=${2:-f728bc8}
reps=${REPS:-7}
np=${NP:-2}
work=${WORK:-/tmp/plexus-revoke-overhead}
src=$(git rev-parse --show-toplevel) || exit 2

build_rev() { # rev dir: the source of rev in dir/src, its build in dir/build
    if [ -x "$2/build/tools/plexus-bench" ] && [ "$(cat "$2/rev" 2>/dev/null)" = "$(git -C "$src" rev-parse "$1")" ]; then
        return 0
    fi
    rm -rf "$2" && mkdir -p "$2/src" || return 1
    git -C "$src" archive "$1" | tar -x -C "$2/src" || return 1
    (cd "$2/src" && meson setup "$2/build" >"$2/setup.log" 2>&1) || { echo "setup of $1 failed: $2/setup.log"; return 1; }
    ninja -C "$2/build" tools/plexus-bench tools/plexus-run plugins/tcp/plexus-tcp.so plugins/shm/plexus-shm.so \
        >"$2/build.log" 2>&1 || { echo "build of $1 failed: $2/build.log"; return 1; }
    git -C "$src" rev-parse "$1" >"$2/rev"
}

echo "# building $without (without) and $with (with) under $work" >&2
build_rev "$without" "$work/without" || exit 1
build_rev "$with" "$work/with" || exit 1
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

one() { # build-dir backend bytes iters -> us per op
    PLEXUS_CONFIG_PATH=$1/devconfig "$1/tools/plexus-run" -n "$np" --timeout 300 "$1/tools/plexus-bench" \
        --backend "$2" -b "$3" -e "$3" -n "$4" -w 20 2>/dev/null |
        awk '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print $8; exit }'
}
med() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
least() { echo "$@" | tr ' ' '\n' | grep . | sort -g | head -1; }
most() { echo "$@" | tr ' ' '\n' | grep . | sort -g | tail -1; }

echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $np ranks, $reps reps"
echo "# without: $without ($(git -C "$src" log -1 --format=%h "$without")), with: $with ($(git -C "$src" log -1 --format=%h "$with"))"
for be in ${BACKENDS:-tcp shm}; do
    for size in ${SIZES:-8 1048576}; do
        case $size in 8) iters=20000 ;; 1048576) iters=500 ;; *) iters=1000 ;; esac
        a="" b=""
        for rep in $(seq "$reps"); do
            if [ $((rep % 2)) = 1 ]; then
                a="$a $(one "$work/without/build" "$be" "$size" "$iters")"
                b="$b $(one "$work/with/build" "$be" "$size" "$iters")"
            else
                b="$b $(one "$work/with/build" "$be" "$size" "$iters")"
                a="$a $(one "$work/without/build" "$be" "$size" "$iters")"
            fi
        done
        echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"
        # the ratio with/without of each rep's pair (run next to each other), as quartiles
        ratios=$(awk -v as="$a" -v bs="$b" 'BEGIN { n = split(as, x, " "); split(bs, y, " ")
            for (i = 1; i <= n; i++) if (x[i] > 0 && y[i] > 0) print y[i] / x[i] }' | sort -g |
            awk '{ v[NR] = $1 } END { if (NR) printf "%.3f %.3f %.3f", v[int((NR + 3) / 4)], v[int((NR + 1) / 2)], v[int((3 * NR + 3) / 4)] }')
        awk -v be="$be" -v s="$size" -v a="$(med $a)" -v b="$(med $b)" -v al="$(least $a)" -v ah="$(most $a)" \
            -v bl="$(least $b)" -v bh="$(most $b)" -v as="$a" -v bs="$b" -v r="$ratios" 'BEGIN {
            if (a == "" || b == "") { printf "%-3s %8d B  no result (a run failed)\n", be, s; exit }
            split(r, q, " ")
            printf "%-3s %8d B  without %9.2f us [%.2f-%.2f]  with %9.2f us [%.2f-%.2f]  %+8.2f us (%+5.1f%%)\n",
                   be, s, a, al, ah, b, bl, bh, b - a, (b - a) / a * 100
            printf "               paired with/without: median %.3f, quartiles %.3f-%.3f\n", q[2], q[1], q[3]
            printf "               without:%s\n               with:   %s\n", as, bs }'
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
