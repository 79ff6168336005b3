#!/bin/sh
# The README's two commands, as written, on a fresh Debian 12 machine: a
# scratch copy of the minbase chroot (scripts/chroot.sh bookworm: nothing of
# plexus's installed), this tree cloned into it with git, command 1 then
# command 2 run there with a bare environment. --peers then installs the test
# peers (scripts/deps.sh --test-peers) and runs command 1 again, which must
# build what they enable (plexus.torch).
#   sh scripts/test-fresh.sh [--peers]
# Prints each step's time; the logs stay in $PLEXUS_FRESH_DIR (default
# /var/cache/plexus-bookworm-fresh) until the next run. Exit 77 (with the
# reason) where no chroot can be made here. Needs root, debootstrap and the
# Debian mirror; downloads and builds for tens of minutes.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
peers=0
[ "${1:-}" = --peers ] && peers=1
base=${PLEXUS_CHROOT_CACHE:-/var/cache/plexus-bookworm}
work=${PLEXUS_FRESH_DIR:-/var/cache/plexus-bookworm-fresh}
root=$work/root

# The fresh machine's image (debootstrapped once, then reused).
rc=0
PLEXUS_CHROOT_CACHE=$base sh "$src/scripts/chroot.sh" bookworm create || rc=$?
[ $rc = 0 ] || exit $rc

unmount_own() { # ours (/sys, / itself) and what the tests left (ip netns's /run/netns), deepest first
    for m in $(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
}
if grep -q " $root[/ ]" /proc/mounts; then
    echo "FAIL: something is still mounted under $root (umount it first)"
    exit 1
fi
rm -rf "$work"
mkdir -p "$work"
t0=$(date +%s)
cp -a "$base/root" "$root"
cp "$base/stamp" "$work/stamp"
# The source as a newcomer gets it (git clone), then this tree's uncommitted files over it.
git clone -q "$src" "$root/src"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 cp -p --parents -t "$root/src" 2>/dev/null) || true
# A machine's / is a mount point (ip netns exec remounts it, for the two-host
# tests) and it has /sys; chroot.sh mounts /proc, /dev, /dev/shm and /tmp.
mount --bind "$root" "$root"
mount -t sysfs sysfs "$root/sys"
trap unmount_own EXIT
echo "fresh: scratch root ready in $(($(date +%s) - t0)) s"

# The README's first two commands (its first ```sh block: 1. set up and run, 2. the tests).
cmds=$(cd "$src" && python3 -c '
import sys; sys.path.insert(0, "tests/tools")
import readme_commands as r
for _, c in list(r.readme_blocks(open("README.md").read()))[:2]: print(c)')
cmd1=$(echo "$cmds" | sed -n 1p)
cmd2=$(echo "$cmds" | sed -n 2p)

# One command in the chroot, from /src, with what a login shell would have and nothing of ours.
in_chroot() {
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        TERM=dumb PLEXUS_CHROOT_CACHE="$work" sh "$src/scripts/chroot.sh" bookworm run "$1"
}
step() { # NAME COMMAND: run it, log it, say its time and status
    t=$(date +%s)
    echo "fresh: $1: $2"
    r=0
    in_chroot "$2" >"$work/$1.log" 2>&1 || r=$?
    tail -5 "$work/$1.log"
    echo "fresh: $1: exit $r after $(($(date +%s) - t)) s (log: $work/$1.log)"
    return $r
}
fail=0
step command1 "$cmd1" || fail=1
step command2 "$cmd2" || fail=1
grep -E '^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "$work/command2.log" || true
grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)' "$work/command2.log" || true
if [ $peers = 1 ]; then
    step peers "sh scripts/deps.sh --test-peers" || fail=1
    step command1-again "$cmd1" || fail=1
    if step torch-import "meson devenv -C build /usr/bin/python3 -c 'import plexus.torch, plexus.torch._C; print(\"plexus.torch\", plexus.torch.__file__)'"; then
        echo "fresh: plexus.torch is built after the peers came"
    else
        echo "FAIL: plexus.torch is not built after installing the peers and running command 1 again"
        fail=1
    fi
fi
echo "fresh: total $(($(date +%s) - t0)) s"
[ $fail = 0 ] && echo "fresh: PASS" || echo "fresh: FAIL"
exit $fail
