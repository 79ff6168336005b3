#!/bin/sh
# plexus-info names ucc usable, the libucc.so.1 it found (the probe loads
# nothing: plugins/ucc/find.c), and the transport layers UCC can load, each
# one a component file in UCC's folder (skips without a UCC).
info=$1
if ! ldconfig -p 2>/dev/null | grep -q 'libucc\.so\.1 ' && [ ! -e "${PLEXUS_UCC_LIBRARY_PATH:-/nonexistent}/libucc.so.1" ]; then
    echo "skip: no libucc.so.1"
    exit 77
fi
out=$("$info" --backend ucc 2>&1)
line=$(echo "$out" | grep -m1 'usable: /.*/libucc\.so\.1, loaded at the first communicator; TLs:')
echo "$line"
[ -n "$line" ] || { echo "FAIL: plexus-info does not name ucc usable with its TLs:"; echo "$out"; exit 1; }
dir=$(echo "$line" | sed -n 's/.*TLs:.* (\(.*\))$/\1/p')
tls=$(echo "$line" | sed -n 's/.*TLs: \(.*\) (.*)$/\1/p' | tr -d ',')
[ -n "$tls" ] && [ "$tls" != "none found" ] || { echo "FAIL: no TL named"; exit 1; }
for t in $tls; do
    [ -e "$dir/libucc_tl_$t.so" ] || { echo "FAIL: TL $t has no $dir/libucc_tl_$t.so"; exit 1; }
done
echo "$tls" | grep -qw ucp || { echo "FAIL: UCC's CPU transport (ucp) is not among: $tls"; exit 1; }
echo "ucc usable with TLs: $tls"
