#!/usr/bin/env python3
"""cluster_predict.py - the simulator's prediction of the cluster in a box.

  cluster_predict.py BUILD TABLE_DIR MODEL.ini [--hosts 8] [--ranks-per-host 2] [--rate 1gbit]

Models the emulated cluster from its own parameters only: each host's NIC
at the tbf rate less the headers of a full-size TCP segment (1448 payload
bytes of 1514 on the wire, what tbf counts) and a token bucket of tbf's
burst (cluster.sh's burst_bytes, in the same wire bytes), the cross-host latency half the
links' measured TCP ping-pong round trip (TABLE_DIR/link.txt, from
scripts/cluster.sh check), and the one-host terms from MODEL.ini (a [sim]
drop-in by bench/calibrate.py). Nothing is fitted to the cross-host rows.
Runs plexus-whatif for every algorithm and size of TABLE_DIR/table.csv
(bench/cluster_table.sh) and prints measured against predicted, the error
of each row, their median and largest, and the tuner's choice (the model's
fastest) against the fastest measured at each size. Writes
TABLE_DIR/predict.csv, and TABLE_DIR/tuning.txt: the model's [core] tuner
table for this cluster (its fastest algorithm from 8 B up, by powers of two).
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys

WIRE, PAYLOAD = 1514, 1448
BURST = 262144  # cluster.sh's tbf burst where link.txt does not say


def rate_bytes(rate):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * f / 8
    raise SystemExit("cluster_predict: rate %r: want a number and kbit, mbit or gbit" % rate)


def fitted_at(model):
    """The most ranks MODEL.ini's one-host terms were fitted at, and the
    cores they shared (bench/calibrate.py's header, model_cores_per_host);
    None for what it does not say."""
    ranks, cores = None, None
    for line in open(model):
        m = re.search(r"fitted to .* at ([0-9/]+) ranks", line)
        if m:
            ranks = max(int(n) for n in m.group(1).split("/"))
        m = re.match(r"\s*model_cores_per_host\s*=\s*([0-9]+)", line)
        if m:
            cores = int(m.group(1))
    return ranks, cores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("table_dir")
    ap.add_argument("model")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed operations before each timed one, back to back (cluster_table's bench loop "
                         "leaves the links so: a shaped NIC's burst spent); 0: each on idle links")
    ap.add_argument("--machine-cores", type=int, default=os.cpu_count(),
                    help="the cores the emulated hosts share (default: this machine's; 0: a machine per host)")
    o = ap.parse_args()
    link = dict(w.split("=", 1) for l in open(os.path.join(o.table_dir, "link.txt")) for w in l.split() if "=" in w)
    alpha_ns = float(link["pingpong_rtt_us"]) * 1e3 / 2
    nic = rate_bytes(o.rate) * PAYLOAD / WIRE
    burst = float(link.get("burst_bytes", BURST)) * PAYLOAD / WIRE
    meas = {}
    for r in csv.DictReader(open(os.path.join(o.table_dir, "table.csv"))):
        meas[(int(r["bytes"]), r["algorithm"])] = float(r["time_us"])
    sizes = sorted({b for b, _ in meas})
    algos = sorted({a for _, a in meas})
    pred = {}
    out = os.path.join(o.table_dir, "whatif.csv")
    base = [os.path.join(o.build, "tools", "plexus-whatif"), "--model", o.model,
            "--ranks", str(o.hosts * o.ranks_per_host), "--hosts", str(o.hosts),
            "--inter-latency", "%dns" % alpha_ns, "--inter-bandwidth", "%d" % nic, "--inter-burst", "%d" % burst,
            "--warmup", str(o.warmup),
            "--machine-cores", str(o.machine_cores), "--algos", ",".join(algos)]
    for b in sizes:
        cmd = base + ["-b", str(b), "-e", str(b), "--csv", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        for r in csv.DictReader(open(out)):
            pred[(int(r["bytes"]), r["algorithm"])] = float(r["time_us"])
    print("# model: %d hosts x %d ranks on %d shared cores; NIC %.1f MB/s (%s less TCP/IP headers), a %.0f KiB "
          "burst; cross-host latency %.1f us (half the measured ping-pong); one-host terms from %s" %
          (o.hosts, o.ranks_per_host, o.machine_cores, nic / 1e6, o.rate, burst / 1024, alpha_ns / 1e3, o.model))
    ranks, cores = fitted_at(o.model)
    fitted = ranks / cores if ranks and cores else None
    if o.machine_cores > 0:
        share = o.hosts * o.ranks_per_host / o.machine_cores
    else:  # a machine a host, with the model's cores
        share = o.ranks_per_host / cores if cores else 0
    if fitted and share > fitted:
        # Waking a rank costs more the more ranks share the cores, beyond
        # what the model's wake-up term grows by: small messages, where
        # wake-ups are most of the time, are predicted short.
        print("# note: %s was fitted at up to %.1f ranks a core; this cluster runs %.1f a core, so where wake-ups "
              "dominate (small messages) the model extrapolates (bench/calibrate.py --ranks and --fit-ranks "
              "measure more)" % (o.model, fitted, share))
    print("%10s %-13s %12s %12s %8s" % ("bytes", "algorithm", "measured_us", "model_us", "error"))
    errs = []
    with open(os.path.join(o.table_dir, "predict.csv"), "w") as f:
        f.write("bytes,algorithm,measured_us,model_us,error\n")
        for (b, a), m in sorted(meas.items()):
            p = pred.get((b, a))
            if p is None:
                continue
            e = (p - m) / m
            errs.append(abs(e))
            print("%10d %-13s %12.1f %12.1f %+7.1f%%" % (b, a, m, p, 100 * e))
            f.write("%d,%s,%.3f,%.3f,%.4f\n" % (b, a, m, p, e))
    if not errs:
        sys.exit("cluster_predict: no row to compare")
    within = sum(e <= 0.15 for e in errs)
    print("# %d rows: median |error| %.1f%%, largest %.1f%%, %d within 15%%" %
          (len(errs), 100 * statistics.median(errs), 100 * max(errs), within))
    print("# tuner: the model's fastest against the fastest measured")
    ok = 0
    for b in sizes:
        mb = min((meas[(b, a)], a) for a in algos if (b, a) in meas)
        pb = min((pred[(b, a)], a) for a in algos if (b, a) in pred)
        got = meas[(b, pb[1])]
        slower = (got - mb[0]) / mb[0]
        ok += slower <= 0.10
        print("%10d model picks %-13s measured fastest %-13s pick is %+.1f%% slower" % (b, pb[1], mb[1], 100 * slower))
    print("# tuner's pick within 10%% of the fastest at %d of %d sizes" % (ok, len(sizes)))
    tuning = os.path.join(o.table_dir, "tuning.txt")
    subprocess.run(base + ["-b", "8", "-e", str(sizes[-1]), "-f", "2", "--emit-tuning", tuning],
                   check=True, stdout=subprocess.DEVNULL)
    print("# the model's tuner table for this cluster ([core] tuner = %s):" % tuning)
    sys.stdout.write("".join("#   " + l for l in open(tuning) if not l.startswith("#")))


if __name__ == "__main__":
    main()
