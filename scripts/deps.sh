#!/bin/sh
# Install everything plexus needs to build and run its tests on Debian
# bookworm (run as root, or with sudo). Idempotent.
set -eu
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential g++ meson ninja-build pkg-config python3 \
    libinih-dev \
    libsodium-dev \
    openmpi-bin libopenmpi-dev mpich libmpich-dev \
    libgloo-dev \
    iproute2 procps \
    dpkg-dev debhelper lintian fakeroot \
    >/dev/null
