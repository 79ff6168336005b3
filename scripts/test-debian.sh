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
# Without libtorch-dev the torch backend's package is left out (build profile).
profile=
dpkg -s libtorch-dev >/dev/null 2>&1 || profile=-Ppkg.plexus.notorch
# noopt (-O0): what is checked here is the packaging, not the code the main
# build compiles with optimisation and -Werror; the torch shim's C++ then
# compiles in about two thirds of the time. Also no debug symbol packages.
if ! DEB_BUILD_OPTIONS="noopt noddebs ${DEB_BUILD_OPTIONS:-}" dpkg-buildpackage -us -uc -b $profile >"$work/build.log" 2>&1; then
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
# The collectives library stands without jansson; the strategies' package holds it.
readelf -d "$root"/usr/lib/*/libplexus.so.0 | grep -q 'NEEDED.*libjansson' && { echo "FAIL: libplexus0 needs libjansson"; fail=1; }
dpkg -c libplexus-strategy0_*.deb | grep -q 'libplexus-strategy\.so\.0' || { echo "FAIL: libplexus-strategy0 lacks its library"; fail=1; }
dpkg -c libplexus-strategy-dev_*.deb | grep -q 'plexus-strategy\.pc' || { echo "FAIL: libplexus-strategy-dev lacks plexus-strategy.pc"; fail=1; }
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

# The Python package, from its .deb alone: it finds the packaged library and
# plexus-info (here under the scratch root, through the variables it honours).
dpkg -x python3-plexus_*.deb "$root"
lib=$(ls "$root"/usr/lib/*/libplexus.so.0)
py() {
    PYTHONPATH="$root/usr/lib/python3/dist-packages" PLEXUS_LIBRARY="$lib" PLEXUS_INFO="$root/usr/bin/plexus-info" \
        LD_LIBRARY_PATH="$(dirname "$lib")" PLEXUS_CONFIG_PATH="$root/etc/plexus" /usr/bin/python3 -c "$1"
}
if ! out=$(py 'import plexus; print(plexus.version()); print(sorted(b["name"] for b in plexus.backends()))' 2>&1) ||
   ! echo "$out" | grep -q "'sim'"; then
    echo "FAIL: python3-plexus: import plexus, backends():"; echo "$out"; fail=1
else
    echo "python3-plexus: $(echo "$out" | tr '\n' ' ')"
fi
if [ -n "$profile" ]; then
    echo "python3-plexus-torch: not built (no libtorch-dev)"
elif ! ls python3-plexus-torch_*.deb >/dev/null 2>&1; then
    echo "FAIL: python3-plexus-torch was not built"; fail=1
else
    dpkg -x python3-plexus-torch_*.deb "$root"
    dpkg -x plexus-backend-tcp_*.deb "$root"
    # Two processes on the packaged tcp backend: the packaged extension
    # loads, registers "plexus" and sums across ranks.
    for r in 0 1; do
        PLEXUS_BACKEND=tcp py "
import datetime, torch, torch.distributed as dist, plexus.torch
dist.init_process_group('plexus', init_method='file://$work/torch.rdv', rank=$r, world_size=2, timeout=datetime.timedelta(seconds=60))
t = torch.full((4,), float($r + 1)); dist.all_reduce(t); print('all_reduce', t.tolist())
dist.destroy_process_group()" >"$work/torch.$r" 2>&1 &
    done
    wait
    if grep -q "all_reduce \[3.0, 3.0, 3.0, 3.0\]" "$work/torch.0" && grep -q "all_reduce \[3.0, 3.0, 3.0, 3.0\]" "$work/torch.1"; then
        echo "python3-plexus-torch: 2 processes, $(cat "$work/torch.0")"
    else
        echo "FAIL: python3-plexus-torch:"; cat "$work/torch.0" "$work/torch.1"; fail=1
    fi
fi
exit $fail
