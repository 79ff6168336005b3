#!/usr/bin/python3
"""torch_8b_loop.py [--np 2] [--iters 400000] [--backend plexus] [--ready-file PATH]

A long loop of 8 B float32 SUM dist.all_reduce on one backend, for a
profiler to sample (bench/torch_8b_profile.sh). Rank 0 prints the mean
time per call of the timed loop ("us/call X"); with --ready-file it
creates that file as the timed loop starts. Needs PYTHONPATH to reach
plexus.torch (meson devenv -C build does it).
"""
import argparse
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, args, port):
    if args.backend == "plexus":
        import plexus.torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.np)
    t = torch.ones(2, dtype=torch.float32)
    for _ in range(1000):
        dist.all_reduce(t)
    dist.barrier()
    if rank == 0 and args.ready_file:
        open(args.ready_file, "w").close()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(t)
    us = (time.perf_counter() - t0) / args.iters * 1e6
    if rank == 0:
        print("us/call %.3f" % us, flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--iters", type=int, default=400000)
    ap.add_argument("--backend", default="plexus")
    ap.add_argument("--ready-file", default="")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args, port), nprocs=args.np)


if __name__ == "__main__":
    main()
