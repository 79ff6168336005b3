#!/bin/sh
# CI stages "torch2" (Debian 13, trixie) and "sid" (Debian unstable): plexus
# built inside a chroot of that stack (scripts/chroot.sh) and the tests below
# run there against its torch, MPI, UCC and gloo (the host is Debian 12).
#   .ci/stage-chroot.sh SUITE start  begin making (or reusing) the chroot in
#                                    the background and return: it is mostly
#                                    network and disk, so it overlaps the
#                                    stages after it
#   .ci/stage-chroot.sh SUITE        wait for that (or make it now), build
#                                    plexus in it, run the tests there
# Meson's test log lands in build-SUITE/meson-logs/testlog.json for CI's
# count. When no chroot can be made here (no root, no debootstrap, no
# network, sid's archive broken today) the stage says why, writes
# build-SUITE/skipped and exits 0. PLEXUS_CI_CHROOTS (default "trixie sid")
# lists the stages that run; one not listed skips the same way.
# CI_DEADLINE_S (seconds since the epoch) is when the stage must be over, for
# CI's time limit: the wait for the chroot, the build and the tests stop
# there, and only the tests that finished count (the stage says so).
set -u
cd "$(dirname "$0")/.."
suite=${1:-}
case $suite in
trixie | sid) shift ;;
*)
    echo "usage: $0 trixie|sid [start]" >&2
    exit 2
    ;;
esac
out=$PWD/build-$suite
# Read once and taken out of the environment: every plexus process the tests
# start would warn that it is not a plexus setting.
ci_chroots=${PLEXUS_CI_CHROOTS-trixie sid}
unset PLEXUS_CI_CHROOTS
enabled() { case " $ci_chroots " in *" $suite "*) return 0 ;; esac; return 1; }
skipped() {
    echo "$suite stage: not run: $*"
    mkdir -p "$out"
    echo "$*" >"$out/skipped"
    exit 0
}

# What CI runs on Debian 13: the mpi plugin's revoke and shrink on Open MPI
# 5's ULFM (Debian 12 has none), every torch test of the project, and PyTorch's
# own suite once: world size 3 with forked ranks (torch 2.6 skips its larger-world
# tests below 8 ranks, so world size 2 runs the same tests; the host's main suite
# runs both, and two tests with spawned interpreters). PLEXUS_CHROOT_TESTS="--suite torch" runs all three.
case $suite in
trixie)
    tests=${PLEXUS_CHROOT_TESTS:-"mpi_openmpi_ulfm mpi_openmpi_ulfm_shrink_3 mpi_openmpi_ulfm_shrink_4 torchrun_agent_store torch2_store_wire torch_matrix torch_extras torch_extras_tcp
torch_recreate_2 torch_recreate_4 torch_revoke torch_symmetric torch_teardown torch_exit_inflight torch_dist_suite_3 torch_ddp
gloo2023_wire gloo_wire_interop gloo_file_store_interop torch_ranks_on_our_store our_client_on_torch_store torch_semantic"}
    ;;
# What CI runs on sid: UCC's suite (no earlier Debian has UCC); torch 2.14's
# (torch_sid); the interop suite against gloo 2025 and torch 2.14 (compat);
# the launchers under Open MPI 6, MPICH 5's Hydra and Slurm 26; plexus-mpi-abi
# on MPICH 5 and Open MPI 6. Suites only: meson runs the tests that match both
# a name and a suite.
sid)
    tests=${PLEXUS_CHROOT_TESTS:-"--suite ucc --suite torch_sid --suite compat --suite launch --suite mpi_abi"}
    ;;
esac

if [ "${1:-}" = start ]; then
    rm -rf "$out"
    mkdir -p "$out"
    enabled || exit 0
    (
        # scripts/deps.sh --test-peers installs it; the two stages start at
        # once, so one may wait for the other's apt lock.
        if ! command -v debootstrap >/dev/null; then
            apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends debootstrap >/dev/null 2>&1 ||
                echo "cannot install debootstrap"
        fi
        t0=$(date +%s)
        # mostly network and disk: a lower share of the CPU than the tests, not the least
        sh scripts/lowprio.sh 10 sh scripts/chroot.sh "$suite" create
        rc=$?
        echo "making the chroot: exit $rc after $(($(date +%s) - t0)) s"
        echo $rc >"$out/create.rc"
        [ $rc = 0 ] || exit 0
        # CI_BUILD_AFTER (a file, relative to the tree): the build waits
        # until it exists or CI_DEADLINE_S passes; none once CI (CI_PID) is gone.
        ci_alive() { [ -z "${CI_PID:-}" ] || kill -0 "$CI_PID" 2>/dev/null; }
        if [ -n "${CI_BUILD_AFTER:-}" ]; then
            t0=$(date +%s)
            while [ ! -e "$CI_BUILD_AFTER" ] && [ "$(date +%s)" -lt "${CI_DEADLINE_S:-0}" ] && ci_alive; do
                sleep 10
            done
            echo "waited $(($(date +%s) - t0)) s for $CI_BUILD_AFTER"
        fi
        ci_alive || exit 0
        # Then plexus is built in it, at idle priority (scripts/lowprio.sh:
        # only the CPU the other stages leave), so that the stage mostly runs
        # tests. A failure here is the stage's to report: it builds again.
        idle="sh scripts/lowprio.sh 19"
        t0=$(date +%s)
        PLEXUS_CHROOT_TESTS=$(echo $tests) $idle sh scripts/chroot.sh "$suite" build
        rc=$?
        echo "building plexus in the chroot: exit $rc after $(($(date +%s) - t0)) s"
        echo $rc >"$out/build.rc"
    ) </dev/null >"$out/create.log" 2>&1 &
    echo "$suite stage: making the $suite chroot in the background (log: $out/create.log)"
    exit 0
fi

enabled || skipped "PLEXUS_CI_CHROOTS does not list $suite"
start=$(date +%s)
mkdir -p "$out"
if [ ! -f "$out/create.log" ]; then
    # Not started in the background: make it now.
    sh .ci/stage-chroot.sh "$suite" start
fi
# Seconds left before CI_DEADLINE_S (an hour when none is set).
left() {
    if [ "${CI_DEADLINE_S:-0}" -gt 0 ]; then echo $((CI_DEADLINE_S - $(date +%s))); else echo 3600; fi
}
# Building plexus with its torch extension and running the list takes
# minutes even on a quiet machine: below this, the stage does not start.
need=600
# A fresh chroot takes about half an hour on a busy 2-core machine.
waited=0
while [ ! -f "$out/create.rc" ] && [ "$(left)" -gt $need ]; do
    sleep 10
    waited=$((waited + 10))
done
if [ ! -f "$out/create.rc" ]; then
    tail -5 "$out/create.log"
    skipped "the chroot was not ready after $waited s, with $(left) s left of CI's time"
fi
# Once the chroot is made, the build needs less: the tests run for what is left,
# down to this; part of the list, counted (the stage says what did not run), is
# worth more than none.
need=240
[ "$(left)" -gt $need ] || skipped "only $(left) s left of CI's time"

rc=$(cat "$out/create.rc")
cat "$out/create.log"
case $rc in
0) ;;
77) skipped "$(grep '^SKIP:' "$out/create.log" | tail -1)" ;;
*) skipped "making the chroot failed (exit $rc; network? log above)" ;;
esac
# The build started after the chroot was made: the stage builds with the
# tests, so one must not be under way in the same tree.
while [ ! -f "$out/build.rc" ] && [ "$(left)" -gt $need ]; do
    sleep 5
    waited=$((waited + 5))
done
[ -f "$out/build.rc" ] || skipped "the build in the chroot was not done after $waited s, with $(left) s left of CI's time"
echo "$suite stage: waited $waited s for the chroot and its build"
mkdir -p "$out/meson-logs"
# Twice meson's timeouts: the suite's multi-process tests run longer on
# torch 2.6 (Python 3.13) than the host's timeouts were set for.
PLEXUS_CHROOT_SECONDS=$(left) PLEXUS_CHROOT_TIMEOUT_MULT=${PLEXUS_CHROOT_TIMEOUT_MULT:-2} PLEXUS_CHROOT_TESTS=$(echo $tests) \
    PLEXUS_CHROOT_TESTLOG=$out/meson-logs/testlog.json sh scripts/chroot.sh "$suite" test
rc=$?
echo "$suite stage: $(($(date +%s) - start)) s, exit $rc"
# Stopped by CI's time budget before any test finished: nothing to count.
[ $rc = 0 ] && [ ! -f "$out/meson-logs/testlog.json" ] && skipped "CI's time ran out before a test finished"
exit $rc
