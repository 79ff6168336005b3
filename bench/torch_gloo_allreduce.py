#!/usr/bin/python3
"""torch_gloo_allreduce.py --np N --bytes B [--iters I]: the same loop as
plexus-bench and mpi_allreduce_loop (warm-up, barrier, I back-to-back float32
SUM allreduces, the slowest rank's average) on torch's gloo backend.
Prints "BYTES MICROSECONDS". Set GLOO_SOCKET_IFNAME=lo for loopback."""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.np)
    t = torch.zeros(max(args.bytes // 4, 1) if args.bytes else 0, dtype=torch.float32)
    for _ in range(5):
        dist.all_reduce(t)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(t)
    us = torch.tensor([(time.perf_counter() - t0) / args.iters * 1e6], dtype=torch.float64)
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"{args.bytes} {us.item():.2f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--bytes", type=int, default=8)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(run, args=(args, port), nprocs=args.np, join=True)


if __name__ == "__main__":
    main()
