#!/bin/sh
# check_probe.sh PLEXUS_INFO STUBDIR PLEXUS_BENCH - the nccl probe's reason
# for each failing step, faked with stub libraries found through [nccl]
# library_path (PLEXUS_NCCL_LIBRARY_PATH) and a fake list of the kernel
# driver's GPUs ([nccl] driver_gpus). The probe, which every process of every
# job runs, never calls cuInit (the stub logs each call); a communicator does,
# and names the CUDA step that failed.
info=$1 stubs=$2 bench=$3
# meson points LD_LIBRARY_PATH at the stub folders (they are dependencies):
# the system path must not contain them, or the "no driver" case would see one.
unset LD_LIBRARY_PATH
if [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] || [ -e /usr/lib64/libcuda.so.1 ]; then
    echo "skip: a real CUDA driver is installed, so the stubs cannot stand in for the missing one"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/one"
: >"$tmp/one/0000:3b:00.0" # the driver's entry for one GPU
export STUB_CUINIT_LOG="$tmp/cuinit.log"
fail=0
check() { # check STUBDIR GPUS TEXT: plexus-info --backend nccl says TEXT, and is not usable
    out=$(PLEXUS_NCCL_LIBRARY_PATH=$1 PLEXUS_NCCL_DRIVER_GPUS=$2 "$info" --backend nccl)
    rc=$?
    [ $rc != 0 ] || { echo "FAIL: nccl reported usable with '${1:-no stub}'"; fail=1; }
    echo "$out" | grep -qF "$3" || { echo "FAIL: wanted '$3' in: $out"; fail=1; }
}
check "" "$tmp/one" "unavailable: no CUDA driver: libcuda.so.1 not found (searched the system's library path"
check "$stubs/stub34" "$tmp/none" "unavailable: no CUDA device: the NVIDIA kernel driver lists no GPU ($tmp/none)"
# The system's search path comes before library_path and CUDA's prefix after
# it (as documented): a libnccl.so.2 in either shadows the NCCL stubs.
if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 ' || [ -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
    echo "note: an installed libnccl.so.2 is found before or beside the NCCL stubs: no 'not found' and" \
        "old-NCCL cases here; the CUDA steps run beside the installed NCCL"
    nccl="NCCL 2\.[0-9]*\.[0-9]*"
else
    check "$stubs/stub34" "$tmp/one" "unavailable: 1 GPU(s), but libnccl.so.2 not found"
    check "$stubs/oldnccl" "$tmp/one" "unavailable: NCCL 2.15.0 is older than the minimum 2.18.0 this plugin supports"
    nccl="NCCL 2\.28\.9"
fi
[ ! -e "$STUB_CUINIT_LOG" ] || { echo "FAIL: the probe called cuInit"; fail=1; }

# A driver whose CUDA fails each way, beside an NCCL that passes the probe:
# usable to the probe (no cuInit), refused by a communicator with the reason.
for c in "stub34:the CUDA driver is a stub library (cuInit: CUDA_ERROR_STUB_LIBRARY)" \
         "nodevice:no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)" \
         "zerocount:no CUDA device (cuDeviceGetCount: 0)"; do
    v=${c%%:*} want=${c#*:}
    mkdir "$tmp/$v"
    cp "$stubs/$v/libcuda.so.1" "$stubs/fullnccl/libnccl.so.2" "$tmp/$v/"
    rm -f "$STUB_CUINIT_LOG"
    out=$(PLEXUS_NCCL_LIBRARY_PATH=$tmp/$v PLEXUS_NCCL_DRIVER_GPUS=$tmp/one "$info" --backend nccl)
    echo "$out" | grep -q "state: *usable: $nccl, 1 GPU(s)" ||
        { echo "FAIL: $v: the probe should find $nccl and 1 GPU: $out"; fail=1; }
    [ ! -e "$STUB_CUINIT_LOG" ] || { echo "FAIL: $v: the probe called cuInit"; fail=1; }
    out=$(PLEXUS_NCCL_LIBRARY_PATH=$tmp/$v PLEXUS_NCCL_DRIVER_GPUS=$tmp/one PLEXUS_CORE_TIMEOUT_MS=10s \
        "$bench" --backend nccl -b 8 -e 8 -n 1 -w 0 2>&1)
    echo "$out" | grep -qF "$want" || { echo "FAIL: $v: a communicator should say '$want': $out"; fail=1; }
    [ -e "$STUB_CUINIT_LOG" ] || { echo "FAIL: $v: no cuInit when a communicator was made"; fail=1; }
done
[ $fail = 0 ] && echo "nccl probe reasons as documented; cuInit only when a communicator is made"
exit $fail
