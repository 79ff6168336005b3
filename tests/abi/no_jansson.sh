#!/bin/sh
# A program that uses only collectives must not pull in jansson (the
# checkpoint format's JSON parser lives in libplexus-strategy): neither
# libplexus nor the program's whole load closure (ldd) may name it. The
# strategy library must still name it, or this check could not see it.
lib=$1 prog=$2 strategy=$3
fail=0
if readelf -d "$lib" | grep -q 'NEEDED.*libjansson'; then
    echo "FAIL: $lib needs libjansson:"; readelf -d "$lib" | grep NEEDED; fail=1
fi
if ldd "$prog" | grep -q libjansson; then
    echo "FAIL: $prog loads libjansson:"; ldd "$prog"; fail=1
fi
if ! readelf -d "$strategy" | grep -q 'NEEDED.*libjansson'; then
    echo "FAIL: the check is blind: $strategy does not name libjansson either"; fail=1
fi
[ $fail = 0 ] && echo "$(basename "$prog") and $(basename "$lib") load no libjansson; $(basename "$strategy") does"
exit $fail
