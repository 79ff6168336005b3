#!/bin/sh
# A Debian chroot of a newer stack than the host's, for building plexus and
# running its tests there: Debian 13 (trixie: torch 2.6, Open MPI 5 with
# ULFM) and Debian unstable (sid: torch 2.14, gloo 2025, MPICH 5 and Open MPI 6
# with the MPI-5 ABI, UCC 1.9, PMIx 7, Slurm 26). The host is Debian 12.
# bookworm is a fresh Debian 12 machine as a newcomer has it: minbase and git,
# nothing of plexus's (scripts/test-fresh.sh runs the README's commands in it).
#   sh scripts/chroot.sh SUITE [test]   make or reuse the chroot, build this
#                                       tree inside it, run its tests
#   sh scripts/chroot.sh SUITE create   only make (or reuse) the chroot
#   sh scripts/chroot.sh SUITE build    make or reuse it, build in it what the
#                                       tests `test` runs need (CI does this
#                                       early, at idle priority)
#   sh scripts/chroot.sh SUITE shell    a shell in it (source at /src, or
#                                       $PLEXUS_CHROOT_SRC)
#   sh scripts/chroot.sh SUITE run CMD  CMD run by sh in /src (as `test` left it,
#                                       its build/ brought up to date first)
#   sh scripts/chroot.sh SUITE destroy  delete the cached chroot
# SUITE is trixie, sid or bookworm. The chroot is cached in $PLEXUS_CHROOT_CACHE
# (default /var/cache/plexus-SUITE), outside the source tree, and made again
# when its package list below changes. Needs root and debootstrap; the mirror
# is Debian's ($PLEXUS_CHROOT_MIRROR).
# Exit 77 (with the reason) where a chroot cannot be made here.
# PLEXUS_CHROOT_TESTLOG=FILE: where `test` copies meson's test log (CI counts it).
# PLEXUS_CHROOT_TESTS="NAME...": the tests `test` runs (default: --suite torch);
# PLEXUS_CHROOT_TIMEOUT_MULT=N: meson's timeout multiplier for them (a loaded machine).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
suite=${1:-}
case $suite in
trixie | sid | bookworm) shift ;;
*)
    echo "usage: $0 trixie|sid|bookworm [test|create|build|shell|run CMD|destroy]" >&2
    exit 2
    ;;
esac
cache=${PLEXUS_CHROOT_CACHE:-/var/cache/plexus-$suite}
mirror=${PLEXUS_CHROOT_MIRROR:-http://deb.debian.org/debian}
root=$cache/root
# Where this tree lands in the chroot: two checkouts (worktrees) that share a
# chroot each set their own.
csrc=${PLEXUS_CHROOT_SRC:-/src}
action=${1:-test}

# What building plexus and its tests need, installed without what they only
# recommend (python3-expecttest: torch's test utilities import it; bookworm
# has none). Most of the gigabytes are torch's own dependencies.
common="gcc g++ libc6-dev meson ninja-build pkg-config python3 python3-dev pybind11-dev
libinih-dev libsodium-dev libjansson-dev python3-numpy iproute2 procps
python3-torch libtorch-dev python3-expecttest"
case $suite in
# Open MPI 5, whose ULFM (mpirun --with-ft ulfm) the mpi plugin's native
# shrink runs on (Debian 12's Open MPI has none); gloo 2023-12, the tcp
# plugin's wire peer in its newer layout.
trixie) packages="$common libopenmpi-dev openmpi-bin libgloo-dev" ;;
# The present HPC stack: gloo 2025 (the tcp plugin's wire peer), MPICH 5 and
# Open MPI 6, both with the MPI-5 standard ABI (libmpi_abi.so.1, mpi_abi.h),
# UCC over UCX, PMIx 7 and Slurm with its PMIx plugin, safetensors.
sid) packages="$common libgloo-dev mpich libmpich-dev openmpi-bin libopenmpi-dev libucc-dev
libpmix-dev slurmctld slurmd slurm-client munge python3-safetensors" ;;
# Only what a new machine has before the README's first command, which
# installs the rest itself (scripts/deps.sh); git brought the source.
bookworm) packages="git" ;;
esac
stamp=$(printf '%s %s\n' "$mirror" "$packages" | md5sum | cut -d' ' -f1)

skip() { echo "SKIP: $*"; exit 77; }

mounted=""
unmount_all() {
    for m in $mounted; do umount -l "$root$m" 2>/dev/null || true; done
    mounted=""
}
mount_all() {
    # PLEXUS_CHROOT_KEEP_MOUNTS=1 leaves them for the next run: runs from
    # several checkouts at once must not unmount under each other.
    if [ "${PLEXUS_CHROOT_KEEP_MOUNTS:-0}" != 1 ]; then
        trap unmount_all EXIT
        trap 'unmount_all; exit 130' INT TERM
    fi
    # Another run of this script in the same chroot (`run` beside `test`)
    # shares its mounts: a second /dev/shm would hide the first one's rings.
    if grep -q " $root/proc " /proc/mounts; then
        return 0
    fi
    # This host's names (a store hosted by rank 0 is reached by the host's name).
    cp /etc/hosts "$root/etc/hosts"
    mount -t proc proc "$root/proc"; mounted="/proc $mounted"
    mount --bind /dev "$root/dev"; mounted="/dev $mounted"
    # shm's rings live in /dev/shm: a tmpfs of the chroot's own (not the host's).
    mount -t tmpfs -o size=1g,mode=1777 shm "$root/dev/shm"; mounted="/dev/shm $mounted"
    mount -t tmpfs tmpfs "$root/tmp"; mounted="/tmp $mounted"
}

# apt-get inside the chroot (mounted): the package list, nothing it only recommends.
install_packages() {
    # No fsync per file: a chroot that breaks halfway is made again anyway.
    echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/plexus-unsafe-io"
    # shellcheck disable=SC2086 # one package a word
    # sid's Release file can be past its Valid-Until date on the mirror.
    echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99plexus-valid-until"
    if ! chroot "$root" sh -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
            apt-get install -y -qq --no-install-recommends $(echo $packages)" >"$cache/packages.log" 2>&1; then
        tail -20 "$cache/packages.log"
        echo "FAIL: installing the packages in the chroot (log: $cache/packages.log)"
        exit 1
    fi
    chroot "$root" apt-get clean
}

create() {
    if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp" ]; then
        echo "$suite chroot: reusing $root"
        return 0
    fi
    [ "$(id -u)" = 0 ] || skip "making a chroot needs root"
    # A finished chroot whose package list changed: apt brings it to the new
    # list in place (minutes, not the half hour of a new one); `destroy` then
    # `create` starts over.
    if [ -f "$cache/stamp" ] && [ -x "$root/usr/bin/apt-get" ] && ! grep -q " $root/" /proc/mounts; then
        echo "$suite chroot: package list changed, updating $root in place"
        t0=$(date +%s)
        cp /etc/resolv.conf "$root/etc/resolv.conf"
        mount_all
        install_packages
        unmount_all
        echo "$stamp" >"$cache/stamp"
        echo "$suite chroot: packages $(($(date +%s) - t0)) s"
        return 0
    fi
    command -v debootstrap >/dev/null || skip "debootstrap not installed (apt-get install debootstrap)"
    [ -f "/usr/share/debootstrap/scripts/$suite" ] || skip "this debootstrap does not know $suite"
    # Never delete through a mount left by an interrupted run (/dev is bound in).
    if grep -q " $root/" /proc/mounts; then
        echo "FAIL: something is still mounted under $root (umount it first)"
        exit 1
    fi
    rm -rf "$cache"
    mkdir -p "$cache"
    t0=$(date +%s)
    echo "$suite chroot: debootstrap into $root from $mirror"
    if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -20 "$cache/debootstrap.log"
        echo "FAIL: debootstrap (log: $cache/debootstrap.log)"
        exit 1
    fi
    t1=$(date +%s)
    # A stamp that matches no package list: if the packages below fail, the
    # next run installs them in place instead of debootstrapping again.
    echo debootstrapped >"$cache/stamp"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    mount_all
    install_packages
    unmount_all
    echo "$stamp" >"$cache/stamp"
    echo "$suite chroot: debootstrap $((t1 - t0)) s, packages $(($(date +%s) - t1)) s"
}

# The tree as git sees it (tracked and untracked-not-ignored files) into
# $csrc (/src). Its build folder stays (PLEXUS_CHROOT_FRESH=1 removes it) and the files keep
# their times, so ninja there rebuilds only what changed.
copy_source() {
    mkdir -p "$root$csrc"
    if [ "${PLEXUS_CHROOT_FRESH:-0}" = 1 ]; then
        rm -rf "$root$csrc/build"
    fi
    find "$root$csrc" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 cp -p --parents -t "$root$csrc" 2>/dev/null) || true
}

# $csrc/build configured (set up, or its options set again) in the mounted chroot.
configure() {
    # -Dtorch=enabled: a plexus.torch that fails to build against torch 2.x is a failure, not a skip;
    # so is an mpi plugin that fails against Open MPI 5.
    # A kept build is configured again each time: meson test alone misses tests
    # added in a changed meson.build.
    # The same on sid for ucc (UCC 1.9 is there) and the MPI plugins.
    case $suite in
    trixie) opts="-Dwerror=true -Dtorch=enabled -Dmpi=enabled -Dmpi_impls=openmpi -Dnccl=disabled -Ducc=disabled" ;;
    sid) opts="-Dwerror=true -Dtorch=enabled -Dmpi=enabled -Dmpi_impls=openmpi,mpich,abi -Dnccl=disabled -Ducc=enabled" ;;
    bookworm) opts="-Dwerror=true" ;;
    esac
    opts="$opts ${PLEXUS_CHROOT_MESON_ARGS:-}"
    if ! chroot "$root" sh -c "cd $csrc && { if [ -f build/build.ninja ]; then meson setup --reconfigure build $opts; \
            else meson setup build $opts; fi >/tmp/setup.log 2>&1 ||
            { tail -30 /tmp/setup.log; exit 1; }; }"; then
        echo "FAIL: configuring plexus in the $suite chroot"
        exit 1
    fi
}

case $action in
create)
    create
    ;;
build)
    create
    copy_source
    mount_all
    t0=$(date +%s)
    configure
    # What `meson test` would build for these tests (their dependencies, as
    # meson's rebuild_deps picks them), so `test` finds them up to date and
    # nothing else is compiled (on a fresh machine the rest is most of the
    # tree): test names, and `--suite NAME` for every test of that suite.
    tests=${PLEXUS_CHROOT_TESTS:---suite torch}
    # shellcheck disable=SC2086 # one test name or option per word
    targets=$(chroot "$root" python3 - "$csrc" $tests <<'PY'
import json, os, sys
src = sys.argv[1]
args = sys.argv[2:]
suites = {args[i + 1] for i, a in enumerate(args[:-1]) if a == "--suite"}
names = {a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "--suite")}
info = src + "/build/meson-info/"
files = {t["id"]: t["filename"] for t in json.load(open(info + "intro-targets.json"))}
out = set()
matched = 0
for t in json.load(open(info + "intro-tests.json")):
    # meson names a suite "project:suite" here
    if t["name"] in names or suites & {s.split(":", 1)[-1] for s in t["suite"]}:
        matched += 1
        for d in t["depends"]:
            out.update(os.path.relpath(f, src + "/build") for f in files[d])
if not matched:
    sys.exit("no test matches " + " ".join(args))
print(" ".join(sorted(out)))
PY
) || exit 1
    # No target at all (tests of scripts only): nothing to build; ninja
    # without one would build everything.
    [ -n "$targets" ] || targets=build.ninja
    if ! chroot "$root" sh -c "cd $csrc && ninja -C build $targets >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }"; then
        echo "FAIL: building plexus in the $suite chroot"
        exit 1
    fi
    echo "$suite chroot: build $(($(date +%s) - t0)) s"
    ;;
test)
    create
    copy_source
    mount_all
    t0=$(date +%s)
    # What the tests need is built (meson test builds its tests' dependencies), not the rest.
    configure
    rc=0
    # PLEXUS_CHROOT_SECONDS bounds the build and the tests (CI's time budget):
    # timeout stops the whole process group, and meson's log keeps the tests
    # that finished.
    rm -f "$root$csrc/build/meson-logs/testlog.json" # no earlier run's results
    budget=${PLEXUS_CHROOT_SECONDS:-0}
    bound=""
    [ "$budget" -gt 0 ] && bound="timeout -k 30 $budget"
    $bound chroot "$root" sh -c 'cd '"$csrc"' && python3 -c "import torch; print(\"torch\", torch.__version__)" &&
        nice -n 5 meson test -C build --print-errorlogs -t '"${PLEXUS_CHROOT_TIMEOUT_MULT:-1} ${PLEXUS_CHROOT_TESTS:---suite torch}" || rc=$?
    if [ -n "$bound" ] && { [ $rc = 124 ] || [ $rc = 137 ]; }; then
        echo "$suite chroot: stopped at the time budget ($budget s); the tests that finished are in the log," \
             "the rest did not run"
        rc=0
    fi

    # Where the results land for CI's count (outside the chroot).
    [ -z "${PLEXUS_CHROOT_TESTLOG:-}" ] || [ ! -f "$root$csrc/build/meson-logs/testlog.json" ] ||
        cp "$root$csrc/build/meson-logs/testlog.json" "$PLEXUS_CHROOT_TESTLOG"
    echo "$suite chroot: build and tests $(($(date +%s) - t0)) s"
    exit $rc
    ;;
shell)
    create
    [ -d "$root$csrc" ] || copy_source
    mount_all
    chroot "$root" sh -c "cd $csrc && exec bash -i" || true
    ;;
run)
    shift
    create
    mount_all
    # `test` builds only what its tests load: the rest of build/ (a plugin no
    # test ran, a benchmark) may predate the tree, so it is brought up to
    # date first (PLEXUS_CHROOT_NO_BUILD=1: as it is).
    if [ "${PLEXUS_CHROOT_NO_BUILD:-0}" != 1 ] && [ -f "$root$csrc/build/build.ninja" ]; then
        if ! out=$(chroot "$root" sh -c "cd $csrc && ninja -C build" 2>&1); then
            printf '%s\n' "$out" | tail -20 >&2
            echo "$suite chroot: building $csrc/build failed (above); PLEXUS_CHROOT_NO_BUILD=1 runs CMD as it is" >&2
            exit 1
        fi
    fi
    chroot "$root" sh -c "cd $csrc && $*"
    ;;
destroy)
    if grep -q " $root/" /proc/mounts; then
        echo "FAIL: something is still mounted under $root"
        exit 1
    fi
    rm -rf "$cache"
    echo "$suite chroot: removed $cache"
    ;;
*)
    echo "usage: $0 trixie|sid|bookworm [test|create|build|shell|run CMD|destroy]" >&2
    exit 2
    ;;
esac
