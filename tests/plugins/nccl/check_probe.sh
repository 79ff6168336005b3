#!/bin/sh
# The nccl probe's reason for each failing step, faked with stub libraries
# found through [nccl] library_path (PLEXUS_NCCL_LIBRARY_PATH).
info=$1 stubs=$2
# meson points LD_LIBRARY_PATH at the stub folders (they are dependencies):
# the system path must not contain them, or the "no driver" case would see one.
unset LD_LIBRARY_PATH
fail=0
check() { # check STUBDIR TEXT
    if [ -n "$1" ]; then out=$(PLEXUS_NCCL_LIBRARY_PATH=$1 "$info" --backend nccl); else out=$("$info" --backend nccl); fi
    rc=$?
    [ $rc != 0 ] || { echo "FAIL: nccl reported usable with '${1:-no stub}'"; fail=1; }
    echo "$out" | grep -qF "$2" || { echo "FAIL: wanted '$2' in: $out"; fail=1; }
}
if [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] || [ -e /usr/lib64/libcuda.so.1 ]; then
    echo "skip: a real CUDA driver is installed, so the stubs cannot stand in for the missing one"
    exit 77
fi
check "" "unavailable: no CUDA driver: libcuda.so.1 not found (searched the system's library path"
check "$stubs/stub34" "unavailable: the CUDA driver is a stub library (cuInit: CUDA_ERROR_STUB_LIBRARY)"
check "$stubs/nodevice" "unavailable: no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)"
check "$stubs/zerocount" "unavailable: no CUDA device (cuDeviceGetCount: 0)"
# The system's search path comes before library_path (as documented), so a
# system-wide libnccl.so.2 would shadow the old-version stub.
if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
    echo "note: a system-wide libnccl.so.2 shadows the old-NCCL stub; that case is not checked here"
else
    check "$stubs/oldnccl" "unavailable: NCCL 2.15.0 is older than the minimum 2.18.0 this plugin supports"
fi
[ $fail = 0 ] && echo "nccl probe reasons as documented"
exit $fail
