#!/usr/bin/python3
"""torch_plexus_allreduce.py [--np 2] [--min 8] [--max 64M | --sizes 8,64K,1M] [--reps 5]
                           [--plexus-bench PATH] [--overhead-iters 2000] [--overhead-warmup 50] [--no-sizes]

torch.distributed all_reduce (float32 SUM, blocking) on backend "plexus"
against backend "gloo", in the same processes and interleaved: for every
size from --min to --max (x4 steps, and --max itself) or of --sizes, each repetition times
gloo then plexus (warm-up, barrier, N back-to-back calls, the slowest rank's
mean). A row gives both medians and the per-repetition speed-up gloo/plexus
as median [min-max]: the ratio is taken inside one repetition, where both
saw the same machine load, so a loaded moment does not skew it.
The default group is gloo; the plexus group is dist.new_group(backend=
"plexus"), so both see the same ranks, tensors and machine load.

With --plexus-bench, the binding's own overhead at 8 B: in each repetition
plexus-bench (under plexus-run, --np ranks, in-place, PLEXUS_BACKEND as set,
tcp by default) and the torch processes run the same loop, one after the
other while the other side waits idle (order alternating), with the same
iteration and warm-up counts; the ratio torch-on-plexus / plexus-bench is
per repetition, reported as median [min-max]. It also reports the floor
under every torch backend: a 1-rank group of each backend (no traffic) timed
through dist.all_reduce and through the ProcessGroup's own allreduce().wait()
(no torch.distributed Python), against plexus-bench with 1 rank. That floor is
measured warm; inside the 2-rank loop torch's code runs after the kernel's
TCP path has had the caches, so each repetition also times the loop with one
more dist.all_reduce on the rank's own 1-rank plexus group per iteration: the
difference is what one call through torch costs there (torch's Python and
dispatcher, the binding, a 1-rank plexus call that moves nothing), and
plexus-bench plus that cost is the least any binding reaching plexus through
torch.distributed could take.

Needs PYTHONPATH to reach plexus.torch (meson devenv -C build does it).
GLOO_SOCKET_IFNAME=lo is set for loopback.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


# The parent and the ranks meet at barriers and a queue; a rank that died
# must not leave the other side waiting for ever.
WAIT_S = 900


def iters_for(nbytes):
    """About 0.2 GB moved per timing, 5 to 500 calls."""
    return max(5, min(500, int(2e8 // max(nbytes, 1))))


def timed(t, group, n, warmup=3, call=None):
    """Warm-up, barrier, n calls; the slowest rank's mean in us (over group)."""
    call = call or (lambda: dist.all_reduce(t, group=group))
    for _ in range(warmup):
        call()
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    us = torch.tensor([(time.perf_counter() - t0) / n * 1e6], dtype=torch.float64)
    dist.all_reduce(us, op=dist.ReduceOp.MAX, group=group)
    return us.item()


def local_us(call, n, warmup):
    for _ in range(warmup):
        call()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t0) / n * 1e6


def spread(v):
    return "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v))


def sizes_of(args):
    if args.sizes:
        return args.sizes
    sizes, size = [], args.min
    while size < args.max:
        sizes.append(size)
        size *= 4
    sizes.append(args.max)
    return sizes


def run(rank, args, port, out, sync, results):
    import plexus.torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.np)
    px = dist.new_group(backend="plexus")
    rows = []
    for size in [] if args.no_sizes else sizes_of(args):
        t = torch.ones(size // 4, dtype=torch.float32)
        n = iters_for(size)
        g, p = [], []
        for _ in range(args.reps):
            g.append(timed(t, None, n))
            p.append(timed(t, px, n))
        ratios = [a / b for a, b in zip(g, p)]
        rows.append((size, n, statistics.median(g), statistics.median(p), statistics.median(ratios),
                     min(ratios), max(ratios)))
        if rank == 0:
            print("%10d %6d %12.2f %12.2f %8.2fx [%.2f-%.2f]" % rows[-1], flush=True)
    if rank == 0:
        with open(out, "w") as f:
            for r in rows:
                f.write("%d %d %f %f %f %f %f\n" % r)
    if args.plexus_bench:
        overhead(rank, args, px, sync, results)
    dist.destroy_process_group()


def overhead(rank, args, px, sync, results):
    """The torch side of the 8 B overhead runs (see bench_8b) and the floor."""
    t, u = torch.ones(2, dtype=torch.float32), torch.ones(2, dtype=torch.float32)
    n, w = args.overhead_iters, args.overhead_warmup
    # 1-rank groups (every rank must create every group in torch 1.13).
    own = {}
    for backend in ("plexus", "gloo"):
        for r in range(args.np):
            g = dist.new_group(ranks=[r], backend=backend)
            if r == rank:
                own[backend] = g
    one = own["plexus"]

    def with_one():
        dist.all_reduce(t, group=px)
        dist.all_reduce(u, group=one)
    for rep in range(args.reps):
        sync.wait(WAIT_S)  # the parent may run plexus-bench now (if it goes first)
        sync.wait(WAIT_S)
        if rep % 2 == 0:
            us = timed(t, px, n, w)
            us_one = timed(t, px, n, w, call=with_one)
        else:
            us_one = timed(t, px, n, w, call=with_one)
            us = timed(t, px, n, w)
        if rank == 0:
            results.put((us, us_one - us))
        sync.wait(WAIT_S)  # plexus-bench may run now (if it goes second)
    opts = dist.AllreduceOptions()
    floor = {}
    for backend, g in own.items():
        floor[backend + " dist.all_reduce"] = [local_us(lambda: dist.all_reduce(t, group=g), n, w)
                                               for _ in range(args.reps)]
        floor[backend + " pg.allreduce().wait()"] = [local_us(lambda: g.allreduce([t], opts).wait(), n, w)
                                                     for _ in range(args.reps)]
    if rank == 0:
        results.put(floor)


def bench_once(path, np_, n, w):
    runner = os.path.join(os.path.dirname(path), "plexus-run")
    o = subprocess.run([runner, "-n", str(np_), path, "-b", "8", "-e", "8", "-n", str(n), "-w", str(w),
                        "--inplace"], stdout=subprocess.PIPE, text=True, check=True).stdout
    lines = [re.sub(r"^\[rank \d+\]", "", line) for line in o.splitlines()]
    row = [line for line in lines if re.match(r"\s+8\s", line)][0].split()
    return float(row[5])


def bench_8b(args, sync, results):
    """Per repetition: plexus-bench and the torch loop at 8 B, same counts,
    one after the other (order alternating); returns the per-rep pairs."""
    pairs = []
    for rep in range(args.reps):
        bench_first = rep % 2 == 0
        sync.wait(WAIT_S)
        if bench_first:
            b = bench_once(args.plexus_bench, args.np, args.overhead_iters, args.overhead_warmup)
        sync.wait(WAIT_S)
        tu, call = results.get(timeout=WAIT_S)
        sync.wait(WAIT_S)
        if not bench_first:
            b = bench_once(args.plexus_bench, args.np, args.overhead_iters, args.overhead_warmup)
        pairs.append((tu, b, call))
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--min", default="8")
    ap.add_argument("--max", default="64M")
    # REPS and SIZES (bytes, space- or comma-separated) set the defaults, as in bench/*.sh
    ap.add_argument("--reps", type=int, default=int(os.environ.get("REPS", "5")))
    ap.add_argument("--plexus-bench", default="")
    ap.add_argument("--overhead-iters", type=int, default=2000)
    ap.add_argument("--overhead-warmup", type=int, default=50)
    ap.add_argument("--sizes", default=",".join(os.environ.get("SIZES", "").split()), help="comma list of sizes (e.g. 8,64K,1M,16M,64M) instead of --min/--max")
    ap.add_argument("--no-sizes", action="store_true", help="only the 8 B overhead and floor (with --plexus-bench)")
    args = ap.parse_args()

    def size(v):
        v = v.upper()
        return int(float(v.rstrip("KMG")) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1], 1))
    args.min, args.max = size(args.min), size(args.max)
    args.sizes = [size(v) for v in args.sizes.split(",")] if args.sizes else []
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    out = "/tmp/torch_plexus_allreduce.%d" % os.getpid()
    print("# torch %s, %d processes, float32 SUM all_reduce, %d interleaved reps; load average %s"
          % (torch.__version__, args.np, args.reps, os.getloadavg()))
    print("# plexus transport: %s, PLEXUS_TCP_BUSY_POLL_US=%s" % (os.environ.get("PLEXUS_BACKEND", "configured"),
                                                                 os.environ.get("PLEXUS_TCP_BUSY_POLL_US", "unset")))
    if not args.no_sizes:
        print("# %8s %6s %12s %12s %9s %s" % ("bytes", "iters", "gloo (us)", "plexus (us)", "speed-up",
                                             "[min-max per rep]"))
    ctx = mp.get_context("spawn")
    sync, results = ctx.Barrier(args.np + 1), ctx.Queue()
    procs = mp.spawn(run, args=(args, port, out, sync, results), nprocs=args.np, join=False)
    if args.plexus_bench:
        pairs = bench_8b(args, sync, results)
        floor = results.get(timeout=WAIT_S)
    while not procs.join():
        pass
    if args.plexus_bench:
        tu, bu, calls = [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]
        ratios = [a / b for a, b, _ in pairs]
        least = [(b + c) / b for _, b, c in pairs]
        print("# 8 B, %d iterations + %d warm-up each, %d reps: torch on plexus %s us, plexus-bench %s us "
              "(same transport)" % (args.overhead_iters, args.overhead_warmup, args.reps, spread(tu), spread(bu)))
        print("# 8 B binding overhead torch/plexus-bench per rep: %s   (%s)"
              % (spread(ratios), " ".join("%.2f" % r for r in ratios)))
        print("# one more call through torch inside that loop (1-rank plexus group): %s us; so the least a binding "
              "could reach, (plexus-bench + that) / plexus-bench, per rep: %s" % (spread(calls), spread(least)))
        bench1 = [bench_once(args.plexus_bench, 1, args.overhead_iters, args.overhead_warmup)
                  for _ in range(args.reps)]
        print("# floor, 1-rank groups (no traffic), rank 0, us per call: plexus-bench %s" % spread(bench1))
        for k, v in floor.items():
            print("#   torch %-28s %s" % (k, spread(v)))
    print("# load average after: %s" % (os.getloadavg(),))
    if os.path.exists(out):
        os.unlink(out)


if __name__ == "__main__":
    main()
