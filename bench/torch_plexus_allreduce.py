#!/usr/bin/python3
"""torch_plexus_allreduce.py [--np 2] [--min 8] [--max 64M] [--reps 3] [--plexus-bench PATH]

torch.distributed all_reduce (float32 SUM, blocking) on backend "plexus"
against backend "gloo", in the same processes and interleaved: for every
size from --min to --max (x4 steps, and --max itself), each repetition times gloo then plexus
(warm-up, barrier, N back-to-back calls, the slowest rank's mean), and the
row reports the median of the repetitions and plexus's speed-up over gloo.
The default group is gloo; the plexus group is dist.new_group(backend=
"plexus"), so both see the same ranks, tensors and machine load.

With --plexus-bench, plexus-bench runs the same loop on the same transport
(PLEXUS_BACKEND, tcp by default) for 8 B, giving the binding's own overhead
(torch on plexus / plexus-bench). Needs PYTHONPATH to reach plexus.torch
(meson devenv -C build does it). GLOO_SOCKET_IFNAME=lo is set for loopback.
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


def iters_for(nbytes):
    """About 0.2 GB moved per timing, 5 to 500 calls."""
    return max(5, min(500, int(2e8 // max(nbytes, 1))))


def timed(t, group, n):
    for _ in range(3):
        dist.all_reduce(t, group=group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(t, group=group)
    us = torch.tensor([(time.perf_counter() - t0) / n * 1e6], dtype=torch.float64)
    dist.all_reduce(us, op=dist.ReduceOp.MAX, group=group)
    return us.item()


def run(rank, args, port, out):
    import plexus.torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.np)
    px = dist.new_group(backend="plexus")
    sizes, size = [], args.min
    while size < args.max:
        sizes.append(size)
        size *= 4
    sizes.append(args.max)
    rows = []
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32)
        n = iters_for(size)
        g, p = [], []
        for _ in range(args.reps):
            g.append(timed(t, None, n))
            p.append(timed(t, px, n))
        rows.append((size, n, statistics.median(g), statistics.median(p)))
        if rank == 0:
            s, n, gm, pm = rows[-1]
            print("%10d %6d %12.2f %12.2f %8.2fx" % (s, n, gm, pm, gm / pm), flush=True)
    if rank == 0:
        with open(out, "w") as f:
            for r in rows:
                f.write("%d %d %f %f\n" % r)
    dist.destroy_process_group()


def bench_8b(path, np_):
    """plexus-bench's 8 B allreduce on the same transport, median of 3 runs."""
    runner = os.path.join(os.path.dirname(path), "plexus-run")
    vals = []
    for _ in range(3):
        o = subprocess.run([runner, "-n", str(np_), path, "-b", "8", "-e", "8", "-n", "2000", "-w", "50",
                            "--inplace"], stdout=subprocess.PIPE, text=True, check=True).stdout
        lines = [re.sub(r"^\[rank \d+\]", "", line) for line in o.splitlines()]
        row = [line for line in lines if re.match(r"\s+8\s", line)][0].split()
        vals.append(float(row[5]))
    return statistics.median(vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--min", default="8")
    ap.add_argument("--max", default="64M")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--plexus-bench", default="")
    args = ap.parse_args()
    def size(v):
        v = v.upper()
        return int(float(v.rstrip("KMG")) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1], 1))
    args.min, args.max = size(args.min), size(args.max)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    out = "/tmp/torch_plexus_allreduce.%d" % os.getpid()
    print("# torch %s, %d processes, float32 SUM all_reduce, median of %d interleaved reps; load average %s"
          % (torch.__version__, args.np, args.reps, os.getloadavg()))
    print("# plexus transport: %s, PLEXUS_TCP_BUSY_POLL_US=%s" % (os.environ.get("PLEXUS_BACKEND", "configured"),
                                                                 os.environ.get("PLEXUS_TCP_BUSY_POLL_US", "unset")))
    print("# %8s %6s %12s %12s %9s" % ("bytes", "iters", "gloo (us)", "plexus (us)", "speed-up"))
    mp.spawn(run, args=(args, port, out), nprocs=args.np, join=True)
    if args.plexus_bench:
        with open(out) as f:
            first = f.readline().split()
        torch_us, bench_us = float(first[3]), bench_8b(args.plexus_bench, args.np)
        if int(first[0]) != 8:
            torch_us = float("nan")  # the rows did not start at 8 B
        print("# 8 B: torch on plexus %.2f us, plexus-bench %.2f us (same transport): binding overhead %.2fx"
              % (torch_us, bench_us, torch_us / bench_us))
    print("# load average after: %s" % (os.getloadavg(),))
    os.unlink(out)


if __name__ == "__main__":
    main()
