#!/bin/sh
# bench/sim_plot.sh on a small modelled cluster (64 ranks, 8 hosts, 8 B to
# 64 KiB): plexus-whatif's CSV has a row per algorithm and size, and
# tools/plexus-plot.py draws it as a PNG (signature, IHDR, IEND).
#   sh whatif_plot.sh  (PLEXUS_BUILD_ROOT, PLEXUS_SOURCE_ROOT set)
set -u
build=$PLEXUS_BUILD_ROOT src=$PLEXUS_SOURCE_ROOT
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
RANKS=64 HOSTS=8 MAXBYTES=64K STEPFACTOR=8 CSV="$d/w.csv" sh "$src/bench/sim_plot.sh" "$build" "$d/p.png"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: sim_plot.sh exit $rc"; exit 1; }
rows=$(awk -F, 'NR > 1 && $5 > 0' "$d/w.csv" | wc -l)
[ "$rows" -eq 20 ] || { echo "FAIL: $rows CSV rows with a time, want 5 sizes x 4 algorithms"; exit 1; }
/usr/bin/python3 - "$d/p.png" <<'PY' || exit 1
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
assert b[12:16] == b"IHDR", "no IHDR chunk"
w, h = struct.unpack(">II", b[16:24])
assert 400 <= w <= 4000 and 200 <= h <= 3000, f"implausible size {w}x{h}"
assert b.rstrip(b"\0")[-8:-4] == b"IEND", "no IEND chunk"
print(f"PNG {w}x{h}, {len(b)} bytes")
PY
echo "ok"
