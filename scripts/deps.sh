#!/bin/sh
# Install everything plexus needs to build and run its tests on Debian
# bookworm (run as root, or with sudo). Idempotent: when every package is
# already installed it touches neither apt nor the network, so the README's
# setup command can be run again (its test does).
#   sh scripts/deps.sh               what building and the tests need
#   sh scripts/deps.sh --test-peers  also the peers some tests compare with
#       (python3-torch for the interop suite, clang for the libFuzzer runs)
#       and debootstrap (the chroots of CI's Debian 13 and sid stages);
#       without them those tests and stages skip and say why. CI installs them.
set -eu
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

packages="build-essential g++ meson ninja-build pkg-config python3
    libinih-dev
    libsodium-dev
    libjansson-dev
    python3-numpy
    openmpi-bin libopenmpi-dev mpich libmpich-dev
    libgloo-dev
    iproute2 procps
    slurmctld slurmd slurm-client munge libpmix-dev libpmix2
    python3-matplotlib
    dpkg-dev debhelper dh-python lintian fakeroot"
# python3-torch for the interop and torch suites; libtorch-dev, pybind11-dev and
# python3-dev build plexus.torch (the torch.distributed backend) against it.
[ "${1:-}" = --test-peers ] &&
    packages="$packages python3-torch libtorch-dev pybind11-dev python3-dev clang libclang-rt-14-dev debootstrap"

# shellcheck disable=SC2086 # one word per package
missing=$(dpkg-query -W -f='${Package} ${Status}\n' $packages 2>&1 |
    awk '/^dpkg-query: no packages found matching / { print $NF; next }
         $NF != "installed" { print $1 }')
[ -n "$missing" ] || exit 0
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # one word per package
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
