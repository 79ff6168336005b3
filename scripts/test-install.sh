#!/bin/sh
# Install plexus into a temporary prefix, build the out-of-tree example
# backend against the installed pkg-config files only, install its .so and
# drop-in where plexus-backend.pc says, and run plexus-bench --check on it.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/plexus-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
log="$work/log"
step() { echo "== $*"; }
fail() { tail -30 "$log"; echo "FAIL: $*"; exit 1; }
step "configure, build and install plexus into $prefix"
# The C library, plugins and tools, what a plugin and a C program build
# against: the Python package and the torch shim (minutes of C++ on a small
# machine) have tests of their own. Without optimisation (buildtype plain):
# the install layout is checked here, the optimised code by the main build;
# it compiles in less than half the CPU time.
meson setup "$work/build" "$src" --prefix="$prefix" --buildtype=plain -Dtests=false -Dpython=disabled -Dtorch=disabled >"$log" 2>&1 ||
    fail "meson setup"
ninja -C "$work/build" install >>"$log" 2>&1 || fail "install"
libdir=$(ls -d "$prefix"/lib/*-linux-gnu 2>/dev/null || echo "$prefix/lib")
export PKG_CONFIG_PATH="$libdir/pkgconfig"
plugindir=$(pkg-config --variable=plugindir plexus-backend)
dropindir=$(pkg-config --variable=dropindir plexus-backend)
step "plexus-backend.pc: plugindir=$plugindir dropindir=$dropindir"
case "$plugindir$dropindir" in "$prefix"*"$prefix"*) ;; *) fail "pkg-config variables outside the prefix" ;; esac
step "build the example out of tree (include path from pkg-config only: $(pkg-config --cflags plexus-backend))"
cp -r "$src/examples/out-of-tree-plugin" "$work/example"
meson setup "$work/example-build" "$work/example" >>"$log" 2>&1 || fail "example setup"
ninja -C "$work/example-build" install >>"$log" 2>&1 || fail "example build/install"
grep -rq "$src" "$work/example-build/build.ninja" && fail "the example build refers to the source tree"
[ -f "$dropindir/70-mailbox.ini" ] || fail "the example's drop-in was not installed"
export LD_LIBRARY_PATH="$libdir"
export PLEXUS_CONFIG_PATH="$prefix/etc/plexus"
"$prefix/bin/plexus-info" --backend mailbox || fail "mailbox not usable"
"$prefix/bin/plexus-bench" --backend mailbox --ranks 3 --check --coll all -b 0 -e 256K -f 9 -n 2 -w 1 >"$work/bench" 2>&1 ||
    { cat "$work/bench"; fail "plexus-bench --check through the out-of-tree backend"; }
tail -1 "$work/bench"
step "a DDP program against plexus-strategy.pc only: $(pkg-config --cflags --libs plexus-strategy)"
printf '#include <plexus/strategy.h>\nint main(void) { struct plx_ddp_options o; plx_ddp_options_init(&o); return 0; }\n' \
    >"$work/ddp.c"
cc -o "$work/ddp" "$work/ddp.c" $(pkg-config --cflags --libs plexus-strategy) >>"$log" 2>&1 ||
    fail "build against plexus-strategy.pc"
"$work/ddp" || fail "a program linked with libplexus-strategy did not run"
echo "out-of-tree backend: built against the installed prefix only, every collective checked"
