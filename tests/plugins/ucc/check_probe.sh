#!/bin/sh
# The ucc probe's reasons: library missing, and a library that is not UCC 1.x.
info=$1 stub=$2
unset LD_LIBRARY_PATH PLEXUS_UCC_LIBRARY_PATH # meson adds the stub's folder; the "missing" case must not see it
fail=0
if ldconfig -p 2>/dev/null | grep -q 'libucc\.so\.1 '; then
    echo "skip: a system-wide libucc.so.1 is installed"
    exit 77
fi
out=$("$info" --backend ucc) && { echo "FAIL: ucc usable without libucc"; fail=1; }
echo "$out" | grep -qF "unavailable: libucc.so.1 not found (searched the system's library path)" ||
    { echo "FAIL: missing-library reason: $out"; fail=1; }
out=$(PLEXUS_UCC_LIBRARY_PATH=$stub "$info" --backend ucc) && { echo "FAIL: ucc usable with a stub"; fail=1; }
echo "$out" | grep -qF "broken: libucc.so.1 lacks ucc_lib_config_read (not UCC 1.x?)" ||
    { echo "FAIL: stub reason: $out"; fail=1; }
[ $fail = 0 ] && echo "ucc probe reasons as documented"
exit $fail
