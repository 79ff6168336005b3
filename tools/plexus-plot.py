#!/usr/bin/python3
"""plexus-plot - draw plexus-bench result files (--output csv|json) on one
PNG: bus bandwidth and time against message size, log axes, one line per
file's backend (or peer), and the memcpy reference where a file has it.
A plexus-whatif CSV (--csv) draws one line per modelled algorithm.

    plexus-plot [--coll allreduce] [--place out|in] [--title T] -o out.png FILE...
"""
import argparse, csv, json, sys


def load(path):
    """Records of one result file as dicts with the CSV's column names."""
    with open(path, newline="") as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        doc = json.loads(text)
        ctx = {k: v for k, v in doc.items() if k != "results"}
        return [dict(ctx, **r) for r in doc["results"]]
    recs = list(csv.DictReader(text.splitlines()))
    for r in recs:
        if "algorithm" in r:  # plexus-whatif: modelled, in place, one line per algorithm
            r.update(tool="plexus-whatif", backend=f"sim {r['algorithm']}", size_bytes=r["bytes"],
                     place="in", coll=r.get("coll") or "allreduce", host="modelled", cpu=f"{r['hosts']} hosts")
    return recs


def lines(recs, path):
    """The records of one file by line: plexus-bench's file is one, plexus-whatif's one per algorithm."""
    by = {}
    for r in recs:
        by.setdefault(r.get("backend", path) if r.get("tool") == "plexus-whatif" else path, []).append(r)
    return by.values()


def num(v):
    return None if v in (None, "") else float(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", required=True, help="the PNG to write")
    ap.add_argument("--coll", default="allreduce")
    ap.add_argument("--place", default="out", choices=["out", "in"])
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plexus-plot: needs matplotlib (Debian: python3-matplotlib)")

    fig, (bw, tm) = plt.subplots(1, 2, figsize=(11, 4.2))
    drawn, memcpy, context = 0, {}, set()
    for path in a.files:
        try:
            recs = load(path)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"plexus-plot: {path}: not a plexus-bench result file ({e})")
        place = "in" if recs and recs[0].get("tool") == "plexus-whatif" else a.place
        recs = [r for r in recs if r.get("coll") == a.coll and r.get("place", "out") == place]
        if not recs:
            print(f"plexus-plot: {path}: no {a.coll} ({a.place} of place) records, left out", file=sys.stderr)
            continue
        for recs in lines(recs, path):
            r0 = recs[0]
            label = f"{r0.get('backend', path)} ({r0.get('ranks', '?')} ranks)"
            if r0.get("tool") and r0["tool"] != "plexus-bench":
                label = f"{r0['tool']}: {label}"
            context.add(f"{r0.get('host', '?')}, {r0.get('cpu', '?')}")
            recs.sort(key=lambda r: int(r["size_bytes"]))
            sizes = [int(r["size_bytes"]) for r in recs]
            bw.plot(sizes, [num(r["busbw_gbs"]) for r in recs], marker=".", label=label)
            tm.plot(sizes, [num(r["time_us"]) for r in recs], marker=".", label=label)
            for r in recs:
                m = num(r.get("memcpy_gbs"))
                if m is not None:
                    memcpy[int(r["size_bytes"])] = max(m, memcpy.get(int(r["size_bytes"]), 0))
            drawn += 1
    if not drawn:
        sys.exit(f"plexus-plot: no file has {a.coll} records")
    if memcpy:
        s = sorted(memcpy)
        bw.plot(s, [memcpy[x] for x in s], "k--", linewidth=1, label="memcpy (one thread)")
    for ax, what in ((bw, "bus bandwidth (GB/s)"), (tm, "time per call (us)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    bw.legend(fontsize=8)
    fig.suptitle(a.title or f"{a.coll}, {'in' if a.place == 'in' else 'out of'} place - " + "; ".join(sorted(context)),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(a.output, dpi=80)


if __name__ == "__main__":
    main()
