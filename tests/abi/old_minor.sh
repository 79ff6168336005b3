#!/bin/sh
# A plugin built from the committed ABI 1.0 header (tests/abi/v1.0) still
# loads, negotiates minor 0, and runs every collective through the core.
info=$1 bench=$2 module=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/backends.d"
printf '[mailbox10]\nlibrary = %s\npriority = 1\n' "$module" > "$dir/backends.d/90-mailbox10.ini"
export PLEXUS_CONFIG_PATH="$PLEXUS_CONFIG_PATH:$dir"
out=$("$info" --backend mailbox10) || { echo "FAIL: not usable: $out"; exit 1; }
echo "$out" | grep -Eq "ABI: *1\.0 \(plexus 1\.[1-9][0-9]*\)" || { echo "FAIL: ABI not negotiated to 1.0: $out"; exit 1; }
"$bench" --backend mailbox10 --ranks 3 --check --coll all -b 0 -e 64K -f 9 -n 2 -w 1 -d i32 -o sum | tail -1
exec "$bench" --backend mailbox10 --ranks 3 --check --coll all -b 0 -e 64K -f 9 -n 2 -w 1 -d f32 -o avg >/dev/null
