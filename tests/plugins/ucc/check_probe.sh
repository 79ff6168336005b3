#!/bin/sh
# The ucc probe's reasons and where a wrong library is caught: the probe
# looks for libucc.so.1 by its file only (it maps nothing: plugins/ucc/find.c),
# so a missing library is "unavailable" naming where it looked, and a
# library that is not UCC 1.x passes the probe and is refused when a
# communicator loads it (PLX_ERR_UNAVAILABLE, naming the missing function).
info=$1 stub=$2 bench=$3
unset LD_LIBRARY_PATH PLEXUS_UCC_LIBRARY_PATH # meson adds the stub's folder; the "missing" case must not see it
fail=0
if ldconfig -p 2>/dev/null | grep -q 'libucc\.so\.1 '; then
    echo "skip: a system-wide libucc.so.1 is installed"
    exit 77
fi
out=$("$info" --backend ucc) && { echo "FAIL: ucc usable without libucc"; fail=1; }
echo "$out" | grep -qF "unavailable: libucc.so.1 not found (searched LD_LIBRARY_PATH, /etc/ld.so.conf's folders" ||
    { echo "FAIL: missing-library reason: $out"; fail=1; }
out=$(PLEXUS_UCC_LIBRARY_PATH=$stub "$info" --backend ucc)
echo "$out" | grep -qF "usable: $stub/libucc.so.1, loaded at the first communicator" ||
    { echo "FAIL: the probe does not name the stub it found: $out"; fail=1; }
out=$(PLEXUS_UCC_LIBRARY_PATH=$stub timeout 60 "$bench" --backend ucc --ranks 2 -b 8 -e 8 -n 1 -w 0 2>&1) &&
    { echo "FAIL: a communicator on the stub succeeded"; fail=1; }
[ "$(echo "$out" | grep -c "PLX_ERR_UNAVAILABLE.*ucc: libucc.so.1 lacks ucc_lib_config_read (not UCC 1.x?)")" = 2 ] ||
    { echo "FAIL: both ranks must refuse the stub naming what it lacks: $out"; fail=1; }
[ $fail = 0 ] && echo "ucc probe reasons as documented"
exit $fail
