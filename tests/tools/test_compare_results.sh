#!/bin/sh
# bench/compare_shm.sh with RESULTS=DIR writes plexus-bench CSV files (one per
# peer that ran) carrying the table's figures, and tools/plexus-plot.py draws
# them all on one valid PNG. A short sweep: 2 ranks, 8 B and 4 KiB, one rep.
#   sh test_compare_results.sh BUILD_ROOT SOURCE_ROOT
set -u
build=$1 src=$2
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no matplotlib (python3-matplotlib)"; exit 77; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
SIZES="8 4096" NP=2 REPS=1 RESULTS="$d/res" sh "$src/bench/compare_shm.sh" "$build" >"$d/table" 2>"$d/err" ||
    { rc=$?; cat "$d/table" "$d/err"; echo "FAIL: compare_shm.sh exit $rc"; exit 1; }
cat "$d/table"
grep -v '^\.*$' "$d/err" >&2 # why a run gave no figure, if one did
/usr/bin/python3 - "$d/table" "$d/res" <<'PY' || exit 1
import csv, os, sys
table, res = sys.argv[1], sys.argv[2]
# The table's columns: np, bytes, then one "us" cell per peer (one rep: one number or "-").
peers = ["shm", "reg", "tcp", "ucc", "ompi", "mpich"]  # reg: shm on registered buffers
want = {}
for line in open(table):
    f = line.split()
    if len(f) >= 2 + len(peers) and f[0] == "2" and f[1].isdigit():
        for p, v in zip(peers, f[2:2 + len(peers)]):
            if v != "-":
                want[(p, int(f[1]))] = float(v)
for p in ("shm", "reg", "tcp"):
    assert (p, 8) in want and (p, 4096) in want, f"the table has no plexus {p} figures"
files = sorted(os.listdir(res))
print("files:", " ".join(files))
for p in peers:
    path = os.path.join(res, f"{p}-np2.csv")
    ran = any(k[0] == p for k in want)
    assert os.path.exists(path) == ran, f"{path}: exists={os.path.exists(path)} but the table says ran={ran}"
    if not ran:
        continue
    rows = list(csv.DictReader(open(path)))
    assert rows and all(r["coll"] == "allreduce" and r["ranks"] == "2" and r["dtype"] == "f32" for r in rows), path
    for r in rows:
        s, t = int(r["size_bytes"]), float(r["time_us"])
        assert abs(t - want[(p, s)]) <= 1e-3 * want[(p, s)] + 1e-4, f"{path} {s} B: {t} us, the table says {want[(p, s)]}"
        bus = s / t / 1e3 * 2 * (2 - 1) / 2
        assert abs(float(r["busbw_gbs"]) - bus) <= 1e-6 + 1e-3 * bus, f"{path} {s} B: busbw {r['busbw_gbs']} != {bus}"
        if p == "shm":
            assert float(r["memcpy_gbs"]) > 0, f"{path}: no memcpy reference"
    assert sorted(int(r["size_bytes"]) for r in rows) == sorted(s for (q, s) in want if q == p), path
print("result files carry the table's figures")
PY
"$src/tools/plexus-plot.py" --place in -o "$d/p.png" "$d/res/"*.csv || { echo "FAIL: plexus-plot exit $?"; exit 1; }
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
echo "ok"
