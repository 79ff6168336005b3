#!/bin/sh
# old_minor.sh INFO BENCH MODULE [NAME MINOR]: a plugin built from a
# header of an older minor (made by abi_minor.py) still loads, negotiates its
# minor (default: mailbox10, minor 0), and runs every collective through the
# core.
info=$1 bench=$2 module=$3 name=${4:-mailbox10} minor=${5:-0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/backends.d"
printf '[%s]\nlibrary = %s\npriority = 1\n' "$name" "$module" > "$dir/backends.d/90-$name.ini"
export PLEXUS_CONFIG_PATH="$PLEXUS_CONFIG_PATH:$dir"
out=$("$info" --backend "$name") || { echo "FAIL: not usable: $out"; exit 1; }
echo "$out" | grep -Eq "ABI: *1\.$minor \(plexus 1\.[1-9][0-9]*\)" || { echo "FAIL: ABI not negotiated to 1.$minor: $out"; exit 1; }
"$bench" --backend "$name" --ranks 3 --check --coll all -b 0 -e 64K -f 9 -n 2 -w 1 -d i32 -o sum | tail -1
# The v-collectives: generic for a plugin below 1.4 (whatever its mask says).
v=$("$bench" --backend "$name" --ranks 3 --check --coll alltoallv,allgatherv -b 0 -e 64K -f 9 -n 2 -w 1 -d i32 2>&1) ||
    { echo "$v"; echo "FAIL: alltoallv/allgatherv on $name (ABI 1.$minor)"; exit 1; }
echo "$v" | tail -1
# The bitwise ops (ABI 1.13): generic for a plugin below 1.13 (whatever its mask says).
b=$("$bench" --backend "$name" --ranks 3 --check --coll allreduce,reduce,reduce_scatter -b 0 -e 4K -f 9 -n 1 -w 1 \
    -d i32 -o bxor 2>&1) || { echo "$b"; echo "FAIL: bxor on $name (ABI 1.$minor)"; exit 1; }
echo "$b" | tail -1
exec "$bench" --backend "$name" --ranks 3 --check --coll all -b 0 -e 64K -f 9 -n 2 -w 1 -d f32 -o avg >/dev/null
