#!/bin/sh
# Fresh Debian machine -> built tree in ./build: dependencies, configure, compile.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
[ -d build ] || meson setup build ${PLEXUS_MESON_ARGS:-}
ninja -C build
