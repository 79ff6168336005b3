#!/bin/sh
# tools/plexus-plot.py draws plexus-bench's CSV and JSON result files on one
# PNG: the file exists, is a PNG (signature, IHDR) of plausible dimensions
# and size; a file that is not a result file is refused by name.
#   sh test_plot.sh PLEXUS_BENCH SOURCE_ROOT
set -u
bench=$1 plot="$2/tools/plexus-plot.py"
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no matplotlib (python3-matplotlib)"; exit 77; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
"$bench" --backend sim --ranks 2 -b 8 -e 1M -f 8 -n 2 -w 1 --memcpy --output csv "$d/a.csv" >/dev/null || exit 1
"$bench" --backend sim --ranks 3 -b 8 -e 1M -f 8 -n 2 -w 1 --output json "$d/b.json" >/dev/null || exit 1
"$plot" -o "$d/p.png" "$d/a.csv" "$d/b.json" || { echo "FAIL: plexus-plot exit $?"; exit 1; }
/usr/bin/python3 - "$d/p.png" <<'PY' || exit 1
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
assert b[12:16] == b"IHDR", "no IHDR chunk"
w, h = struct.unpack(">II", b[16:24])
assert 400 <= w <= 4000 and 200 <= h <= 3000, f"implausible size {w}x{h}"
assert 10000 <= len(b) <= 2000000, f"implausible file size {len(b)}"
assert b.rstrip(b"\0")[-8:-4] == b"IEND", "no IEND chunk"
print(f"PNG {w}x{h}, {len(b)} bytes")
PY
echo "not,a,result" >"$d/bad.csv"
if "$plot" -o "$d/q.png" "$d/bad.csv" 2>"$d/err"; then echo "FAIL: a non-result file made a plot"; exit 1; fi
[ ! -e "$d/q.png" ] || { echo "FAIL: a PNG from a non-result file"; exit 1; }
echo "ok"
