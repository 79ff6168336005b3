#!/bin/sh
# run_ucc.sh NP PLEXUS_RUN BENCH ARGS...: the collective matrix through UCC,
# when a UCC is installed (PLEXUS_UCC_LIBRARY_PATH or the system's), else skip.
np=$1 run=$2
shift 2
if ! ldconfig -p 2>/dev/null | grep -q 'libucc\.so\.1 ' && [ ! -e "${PLEXUS_UCC_LIBRARY_PATH:-/nonexistent}/libucc.so.1" ]; then
    echo "skip: no libucc.so.1 (set PLEXUS_UCC_LIBRARY_PATH to a UCC installation's lib folder)"
    exit 77
fi
exec "$run" -n "$np" --timeout 150 "$@"
