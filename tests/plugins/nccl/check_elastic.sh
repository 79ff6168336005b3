#!/bin/sh
# check_elastic.sh PLEXUS_INFO STUBDIR: the nccl plugin's report of
# ncclCommRevoke / ncclCommShrink / ncclCommGrow in the installed NCCL. A
# stub libcuda.so.1 of one device (STUBDIR, through [nccl] library_path)
# lets the probe go on to the real libnccl.so.2 (CUDA's prefix); what the
# plugin found by dlsym must match the library's dynamic symbol table
# (nm -D), and plexus-info must say it.
info=$1 stub=$2
unset LD_LIBRARY_PATH
lib=/usr/local/cuda/lib64/libnccl.so.2
[ -e "$lib" ] || { echo "skip: no NCCL at $lib"; exit 77; }
if [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] || [ -e /usr/lib64/libcuda.so.1 ]; then
    echo "skip: a real CUDA driver is installed, so the stub cannot stand in for it"
    exit 77
fi
command -v nm >/dev/null || { echo "skip: no nm to read $lib's symbols"; exit 77; }
if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
    lib=$(ldconfig -p | sed -n 's/.*libnccl\.so\.2 .*=> //p' | head -n 1) # the system's path comes first
fi
# One GPU in the kernel driver's list, which the probe counts (it does not initialise CUDA).
gpus=$(mktemp -d)
trap 'rm -rf "$gpus"' EXIT
: >"$gpus/0000:3b:00.0"
out=$(PLEXUS_NCCL_LIBRARY_PATH=$stub PLEXUS_NCCL_DRIVER_GPUS=$gpus "$info" --backend nccl)
echo "$out" | grep 'state:'
fail=0
syms=$(nm -D --defined-only "$lib")
for f in ncclCommRevoke ncclCommShrink ncclCommGrow; do
    if echo "$syms" | grep -q " [TW] $f\$"; then want=present; else want=absent; fi
    echo "$lib: $f $want"
    echo "$out" | grep 'state:' | grep -q "$f $want" || { echo "FAIL: plexus-info does not say '$f $want'"; fail=1; }
done
# ncclCommShrink, where present, serves plx_comm_shrink (with the core's agreed survivors).
if echo "$syms" | grep -q " [TW] ncclCommShrink\$"; then
    echo "$out" | grep 'state:' | grep -q 'ncclCommShrink present (plx_comm_shrink)' ||
        { echo "FAIL: plexus-info does not say that ncclCommShrink serves plx_comm_shrink"; fail=1; }
fi
echo "$out" | grep 'state:' | grep -q 'usable: NCCL 2\.[0-9]*\.[0-9]*, 1 GPU(s) .*; elastic calls: ' ||
    { echo "FAIL: the probe did not reach NCCL through the stub driver: $out"; fail=1; }
[ $fail = 0 ] && echo "nccl: the elastic calls as the library has them"
exit $fail
