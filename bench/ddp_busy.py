#!/usr/bin/python3
"""ddp_busy.py [--np 2] [--threads T] [--reps 5] [--steps 10] [--width 512] [--layers 8] [--bucket-mb 4]

DistributedDataParallel training steps while torch's compute threads cover
every core: each rank runs T intra-op threads (default: cores / np, so the
ranks' threads fill the host), and DDP's bucket allreduces overlap the
backward pass on those same cores. Three ways, in the same processes and
interleaved per repetition (the order rotates): no communication at all
(the compute alone), DDP on gloo, DDP on "plexus" (dist.new_group with
backend "plexus"; PLEXUS_BACKEND picks its transport, shm on one host by
default). Every way trains its own copy of one model from the same weights.

A row per way: median step time over the repetitions [min-max] (each
repetition: the mean of --steps steps, the slowest rank's), the exposed
communication (step - compute alone) and gloo's step time over this way's,
per repetition, as median [min-max]: taken inside one repetition, where
both saw the same load. Run it from `meson devenv -C build` (PYTHONPATH).
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def model_of(args):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.Tanh()]
    return nn.Sequential(*layers)


def steps(net, opt, x, y, n, group):
    """Mean seconds per step over n steps, the slowest rank's."""
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(n):
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    t = torch.tensor([(time.perf_counter() - t0) / n], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def run(rank, args, port):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.np)
    import plexus.torch  # noqa: F401 - registers the backend "plexus"
    gloo = dist.group.WORLD
    plexus = dist.new_group(backend="plexus")
    ways = {}
    for name in ("compute", "gloo", "plexus"):
        net = model_of(args)
        if name != "compute":
            net = DDP(net, process_group=gloo if name == "gloo" else plexus, bucket_cap_mb=args.bucket_mb)
        ways[name] = (net, torch.optim.SGD(net.parameters(), lr=1e-4))
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(args.batch, args.width, generator=g)
    y = torch.randn(args.batch, args.width, generator=g)
    for name, (net, opt) in ways.items():
        steps(net, opt, x, y, 2, gloo)  # warm-up: buckets built, threads started
    times = {name: [] for name in ways}
    order = list(ways)
    for rep in range(args.reps):
        for name in order[rep % 3:] + order[:rep % 3]:
            net, opt = ways[name]
            times[name].append(steps(net, opt, x, y, args.steps, gloo))
    if rank == 0:
        report(args, times)
    dist.barrier(group=gloo)
    # Leave without tearing the groups down: one quiet run hung for minutes
    # in the shutdown after printing its rows (under investigation; not
    # what this benchmark measures).
    sys.stdout.flush()
    os._exit(0)


def spread(v):
    return "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v))


def report(args, times):
    grad_mib = args.layers * (args.width * args.width + args.width) * 4 / 2**20
    print("# ddp_busy: %d ranks x %d threads on %d cores, %d x %d MLP (%.1f MiB of gradients), bucket %g MiB, "
          "batch %d, %d steps x %d reps, load %s, PLEXUS_BACKEND=%s" %
          (args.np, args.threads, os.cpu_count(), args.layers, args.width, grad_mib, args.bucket_mb, args.batch,
           args.steps, args.reps, open("/proc/loadavg").read().split()[0], os.environ.get("PLEXUS_BACKEND", "auto")))
    print("# %-8s %24s %24s %22s" % ("way", "step ms", "exposed comm ms", "gloo / this"))
    for name, v in times.items():
        ms = [t * 1e3 for t in v]
        exposed = [(t - c) * 1e3 for t, c in zip(v, times["compute"])]
        ratio = [g / t for g, t in zip(times["gloo"], v)]
        print("  %-8s %24s %24s %22s" % (name, spread(ms), "-" if name == "compute" else spread(exposed),
                                        spread(ratio)), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (0: cores / np)")
    p.add_argument("--reps", type=int, default=int(os.environ.get("REPS", 5)))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--bucket-mb", type=float, default=4)
    args = p.parse_args()
    if args.threads <= 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.np)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(run, args=(args, port), nprocs=args.np, join=True)


if __name__ == "__main__":
    main()
