#!/usr/bin/python3
"""torch_step_allreduce.py [--np 2] [--sizes 1M,16M] [--reps 5] [--ops 15]

A training step's pattern, not a loop: every rank waits at a barrier, then
times one dist.all_reduce (float32 SUM, blocking), as a step's collectives
come one at a time after compute. Per operation the slowest rank's time
counts; a repetition's figure is the median over --ops operations. gloo and
"plexus" (dist.new_group(backend="plexus"); PLEXUS_BACKEND picks its
transport, e.g. tcp) alternate in the same processes, the order rotating
per repetition, so both see the same load. Prints one CSV row per
(size, backend, repetition): np,bytes,backend,rep,time_us,busbw_gbs.
Run it from `meson devenv -C build` (PYTHONPATH), quiet or beside
bench/spinners.sh's busy processes."""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def size_of(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)


def step_us(t, group, ops):
    per_op = []
    for _ in range(ops):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        dist.all_reduce(t, group=group)
        per_op.append((time.perf_counter() - t0) * 1e6)
    v = torch.tensor(per_op, dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX, group=group)
    return statistics.median(v.tolist())


def run(rank, args, port):
    import plexus.torch  # noqa: F401 - registers the backend
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=args.np)
    groups = {"gloo": dist.group.WORLD, "plexus": dist.new_group(backend="plexus")}
    names = list(groups)
    for rep in range(args.reps):
        k = (rep + args.first_rep - 1) % 2  # who goes first rotates
        order = names[k:] + names[:k]
        for b in args.sizes:
            t = torch.ones(b // 4, dtype=torch.float32)
            for name in order:
                for _ in range(3):  # warm: connections, buffers
                    dist.all_reduce(t, group=groups[name])
                us = step_us(t, groups[name], args.ops)
                if rank == 0:
                    bus = b / us / 1e3 * 2 * (args.np - 1) / args.np
                    print("%d,%d,%s,%d,%.2f,%.4f" % (args.np, b, name, rep + args.first_rep, us, bus), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--sizes", default="1M,16M")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--ops", type=int, default=15)
    p.add_argument("--first-rep", type=int, default=1, help="the first repetition's number in the rows")
    args = p.parse_args()
    args.sizes = [size_of(s) for s in args.sizes.split(",")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.start_processes(run, args=(args, port), nprocs=args.np, start_method="spawn")


if __name__ == "__main__":
    main()
