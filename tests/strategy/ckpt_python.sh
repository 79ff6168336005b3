#!/bin/sh
# The files follow the published layout: a reader with numpy and no plexus
# code (ckpt_reader.py) rebuilds every tensor of a 3-rank checkpoint,
# verifies its checksums and finds the saved values.
#   ckpt_python.sh CKPT_ROUNDTRIP READER.py
set -eu
prog=$1 reader=$2
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: $py with numpy (Debian's python3-numpy) is not available"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-ckpt-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$prog" save "$dir/ck" --ranks 3
"$py" "$reader" "$dir/ck"
