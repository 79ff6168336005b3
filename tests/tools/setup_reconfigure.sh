#!/bin/sh
# setup_reconfigure.sh SOURCE_ROOT - scripts/setup.sh (the README's command 1)
# configures ./build anew when the installed packages changed since it was
# configured (meson caches "header not found" across reconfigures), and only
# then: run in a scratch tree with stand-ins for deps.sh, dpkg-query, meson and
# ninja that log their calls; the installed packages are a file the test edits.
set -u
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/tree/scripts" "$t/bin"
cp "$src/scripts/setup.sh" "$t/tree/scripts/"
echo 'exit 0' >"$t/tree/scripts/deps.sh"
cat >"$t/bin/dpkg-query" <<STUB
#!/bin/sh
cat "$t/installed"
STUB
cat >"$t/bin/meson" <<STUB
#!/bin/sh
echo "meson \$*" >>"$t/log"
[ "\$1" = setup ] && mkdir -p build/meson-private && : >build/meson-private/coredata.dat
exit 0
STUB
cat >"$t/bin/ninja" <<STUB
#!/bin/sh
echo "ninja \$*" >>"$t/log"
STUB
chmod +x "$t/bin/"*
fail=0
step() { # NAME EXPECTED-MESON-CALL-OR-none [ENV...]: run setup.sh, compare its meson call
    name=$1 want=$2
    shift 2
    : >"$t/log"
    (cd "$t/tree" && env PATH="$t/bin:$PATH" "$@" sh scripts/setup.sh >"$t/out" 2>&1) ||
        { echo "FAIL: $name: setup.sh failed:"; cat "$t/out"; fail=1; return; }
    got=$(grep '^meson' "$t/log" || echo none)
    if [ "$got" != "$want" ]; then
        echo "FAIL: $name: wanted '$want', setup.sh ran '$got'"; cat "$t/out"; fail=1
    elif ! grep -q '^ninja -C build' "$t/log"; then
        echo "FAIL: $name: setup.sh did not build"; fail=1
    else
        echo "ok $name: $got"
    fi
}
echo "gcc 12 ii" >"$t/installed"
step "a fresh machine" "meson setup build"
step "again, nothing installed since" none
echo "libtorch-dev 1.13 ii" >>"$t/installed"
step "under the test run, after the peers came" none PLEXUS_SETUP_NO_WIPE=1
step "after the peers came" "meson setup --wipe build"
step "again" none
exit $fail
