#!/bin/sh
# Fresh Debian machine -> built tree in ./build: dependencies, configure, compile.
# Run again after installing more packages (scripts/deps.sh --test-peers), it
# builds what they enable (plexus.torch): meson keeps its checks' answers
# ("header not found") across reconfigures, --clearcache included, so a build
# whose installed packages changed since it was configured is configured anew
# (meson setup --wipe, which keeps its options).
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
stamp=build/.plexus-packages
packages=$(dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' 2>/dev/null | md5sum | cut -d' ' -f1) ||
    packages=none
# shellcheck disable=SC2086 # PLEXUS_MESON_ARGS: one option a word
if [ ! -f build/meson-private/coredata.dat ]; then
    meson setup build ${PLEXUS_MESON_ARGS:-}
elif [ "$(cat "$stamp" 2>/dev/null)" != "$packages" ]; then
    # The test that runs this command runs inside that build: it must not vanish under it.
    if [ "${PLEXUS_SETUP_NO_WIPE:-0}" = 1 ]; then
        echo "setup: build/ may predate the installed packages; run this again outside the tests" >&2
        exec ninja -C build
    fi
    echo "setup: the installed packages changed since build/ was configured (or it has no record of them):" \
        "configuring it anew"
    meson setup --wipe build ${PLEXUS_MESON_ARGS:-}
fi
echo "$packages" >"$stamp"
ninja -C build
