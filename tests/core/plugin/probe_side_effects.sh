#!/bin/sh
# probe_side_effects.sh PLEXUS_RUN PROGRAM - a 2-rank tcp job maps no MPI,
# UCX, UCC, NCCL or CUDA library at any point, and a segfault in the user's
# code after plx_comm_init ends the process with SIGSEGV (plexus-run: 139).
set -u
run=$1
prog=$2
"$run" -n 2 --backend tcp "$prog" || { echo "FAILED: a foreign library was mapped (above)"; exit 1; }
# A sanitizer build must leave SIGSEGV to the kernel, as a plain program does.
ASAN_OPTIONS="${ASAN_OPTIONS:-}:handle_segv=0" TSAN_OPTIONS="${TSAN_OPTIONS:-}:handle_segv=0" "$run" -n 1 --backend tcp "$prog" segv >/tmp/plx-segv.$$ 2>&1
st=$?
cat /tmp/plx-segv.$$
rm -f /tmp/plx-segv.$$
[ $st = 139 ] || { echo "FAILED: a segfault after plx_comm_init gave status $st, not 139 (SIGSEGV)"; exit 1; }
echo "ok: segfault -> 139"
