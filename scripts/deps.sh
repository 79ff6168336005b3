#!/bin/sh
# Install everything plexus needs to build and run its tests on Debian
# bookworm (run as root, or with sudo). Idempotent.
#   sh scripts/deps.sh               what building and the tests need
#   sh scripts/deps.sh --test-peers  also the peers some tests compare with
#       (python3-torch for the interop suite, clang for the libFuzzer runs);
#       without them those tests skip and say why. CI installs them.
set -eu
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential g++ meson ninja-build pkg-config python3 \
    libinih-dev \
    libsodium-dev \
    libjansson-dev \
    python3-numpy \
    openmpi-bin libopenmpi-dev mpich libmpich-dev \
    libgloo-dev \
    iproute2 procps \
    slurmctld slurmd slurm-client munge libpmix-dev libpmix2 \
    python3-matplotlib \
    dpkg-dev debhelper dh-python lintian fakeroot \
    >/dev/null
if [ "${1:-}" = --test-peers ]; then
    # python3-torch for the interop and torch suites; libtorch-dev, pybind11-dev and
    # python3-dev build plexus.torch (the torch.distributed backend) against it.
    $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-numpy libtorch-dev pybind11-dev \
        python3-dev clang libclang-rt-14-dev >/dev/null
fi
