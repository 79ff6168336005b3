#!/bin/sh
# Build the Debian packages from a copy of this tree, run lintian, then show
# in a scratch root that a backend appears when its package is installed and
# goes when it is removed. Exit 77 when Debian's packaging tools are missing.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
for t in dpkg-buildpackage dh lintian; do
    command -v $t >/dev/null || { echo "skip: $t not installed (apt-get install dpkg-dev debhelper lintian)"; exit 77; }
done
work=$(mktemp -d /tmp/plexus-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/plexus-0.1.0"
(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/plexus-0.1.0")
cd "$work/plexus-0.1.0"
if ! dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1; then
    tail -40 "$work/build.log"
    echo "FAIL: dpkg-buildpackage"
    exit 1
fi
cd "$work"
ls *.deb
fail=0
lintian --no-tag-display-limit *.changes >"$work/lintian.log" 2>&1
if grep -q '^E:' "$work/lintian.log"; then
    grep '^E:' "$work/lintian.log"
    echo "FAIL: lintian reports errors"
    fail=1
else
    echo "lintian: no errors ($(grep -c '^W:' "$work/lintian.log") warnings)"
fi
root="$work/root"
mkdir "$root"
for p in libplexus0 plexus-tools; do dpkg -x ${p}_*.deb "$root"; done
info() {
    LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu" PLEXUS_CONFIG_PATH="$root/etc/plexus" "$root/usr/bin/plexus-info" "$@"
}
info --backend tcp >/dev/null 2>&1 && { echo "FAIL: tcp present before its package"; fail=1; }
info | grep -q "^sim$" || { echo "FAIL: sim missing from libplexus0"; fail=1; }
dpkg -x plexus-backend-tcp_*.deb "$root"
info --backend tcp | grep -q "state: *usable" || { echo "FAIL: tcp not usable after installing its package"; fail=1; }
dpkg -c plexus-backend-tcp_*.deb | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||' | while read -r f; do rm -f "$root/$f"; done
info --backend tcp >/dev/null 2>&1 && { echo "FAIL: tcp still present after removing its package"; fail=1; }
[ $fail = 0 ] && echo "packages: tcp absent, installed -> usable, removed -> gone"
exit $fail
