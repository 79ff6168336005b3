#!/usr/bin/env python3
"""plexus-bench --output csv|json FILE: both files parse, carry one record
per collective, size and in/out of place, and the same numbers as the
table plexus-bench prints (to the table's precision)."""
import csv, json, os, subprocess, sys, tempfile

bench = sys.argv[1]
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def table_rows(text):
    rows, coll = [], None
    for line in text.splitlines():
        if line.startswith("# ") and line[2:].strip().isalpha():
            coll = line[2:].strip()
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split()
        size, count = int(f[0]), int(f[1])
        for place, (t, alg, bus, wrong) in (("out", f[5:9]), ("in", f[9:13])):
            rows.append((coll, size, count, place, float(t), float(alg), float(bus), wrong))
    return rows


def close(a, b, ulp):
    return abs(a - b) <= ulp * 1.01


with tempfile.TemporaryDirectory() as d:
    base = [bench, "--backend", "sim", "--ranks", "3", "--check", "-b", "8", "-e", "64K", "-f", "8", "-n", "2",
            "-w", "1", "--coll", "allreduce,broadcast", "--memcpy"]
    out = {}
    for fmt in ("csv", "json"):
        path = os.path.join(d, "r." + fmt)
        p = subprocess.run(base + ["--output", fmt, path], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"plexus-bench --output {fmt} exit {p.returncode}: {p.stderr}")
        out[fmt] = (p.stdout, path)

    text, path = out["csv"]
    table = table_rows(text)
    with open(path, newline="") as f:
        recs = list(csv.DictReader(f))
    check(len(table) == 2 * 5 * 2 and len(recs) == len(table), f"csv has {len(recs)} records, table {len(table)}")
    for r in recs:
        check(r["backend"] == "sim" and r["ranks"] == "3" and r["hosts"] == "1" and r["dtype"] == "f32"
              and r["op"] == "sum" and r["iterations"] == "2" and r["host"] and r["cpu"], f"csv context {r}")
        check(float(r["memcpy_gbs"]) > 0, "csv memcpy column")
    for (coll, size, count, place, t, alg, bus, wrong), r in zip(table, recs):
        check(r["coll"] == coll and int(r["size_bytes"]) == size and int(r["count"]) == count
              and r["place"] == place and r["wrong"] == wrong, f"csv record {r} is not table row {coll} {size} {place}")
        check(close(float(r["time_us"]), t, 0.01) and close(float(r["algbw_gbs"]), alg, 0.001)
              and close(float(r["busbw_gbs"]), bus, 0.001), f"csv numbers {r} differ from the table {t} {alg} {bus}")

    text, path = out["json"]
    table = table_rows(text)
    with open(path) as f:
        doc = json.load(f)
    check(doc["backend"] == "sim" and doc["ranks"] == 3 and doc["hosts"] == 1 and doc["checked"] is True,
          "json context")
    check(len(doc["results"]) == len(table) == 20, f"json has {len(doc['results'])} records, table {len(table)}")
    for (coll, size, count, place, t, alg, bus, wrong), r in zip(table, doc["results"]):
        check(r["coll"] == coll and r["size_bytes"] == size and r["place"] == place and r["wrong"] == int(wrong)
              and close(r["time_us"], t, 0.01) and close(r["busbw_gbs"], bus, 0.001), f"json record {r}")

    bad = subprocess.run([bench, "--backend", "sim", "--ranks", "2", "--output", "xml", os.path.join(d, "x")],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "csv or json" in bad.stderr, "--output xml is refused with a clear error")

if fails:
    print(f"{len(fails)} failure(s)")
    sys.exit(1)
print("csv and json match the table")
