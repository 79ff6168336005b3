#!/bin/sh
# CI stage "torch2": plexus built inside a Debian 13 (trixie) chroot and its
# torch suite run there against torch 2.6 (the host, Debian 12, has 1.13).
# The chroot is cached (scripts/chroot-trixie.sh); meson's test log lands in
# build-trixie/meson-logs/testlog.json for CI's count. PLEXUS_CI_TRIXIE=0
# skips the stage (exit 0, saying so).
set -u
cd "$(dirname "$0")/.."
if [ "${PLEXUS_CI_TRIXIE:-1}" = 0 ]; then
    echo "torch2 stage: skipped (PLEXUS_CI_TRIXIE=0)"
    exit 0
fi
start=$(date +%s)
rm -rf build-trixie
mkdir -p build-trixie/meson-logs
if ! command -v debootstrap >/dev/null; then
    apt-get install -y -qq --no-install-recommends debootstrap >/dev/null || echo "torch2 stage: cannot install debootstrap"
fi
PLEXUS_TRIXIE_TESTLOG=$PWD/build-trixie/meson-logs/testlog.json sh scripts/chroot-trixie.sh test
rc=$?
echo "torch2 stage: $(($(date +%s) - start)) s, exit $rc"
exit $rc
