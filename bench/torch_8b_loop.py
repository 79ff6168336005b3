#!/usr/bin/python3
"""torch_8b_loop.py [--np 2] [--seconds 4 | --iters N] [--backend plexus] [--ready-file PATH]

A long loop of 8 B float32 SUM dist.all_reduce on one backend, for a
profiler to sample (bench/torch_8b_profile.sh). The timed loop lasts about
--seconds: its length in calls comes from the warm-up's pace (rank 0's,
which every rank then uses), so it outlasts the sampling on a busy machine
too and no more; --iters fixes it instead. Rank 0 prints the mean time per
call of the timed loop and their number ("us/call X calls N"); with
--ready-file it creates that file as the timed loop starts. Needs PYTHONPATH
to reach plexus.torch (meson devenv -C build does it).
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
    warm = 1000
    t0 = time.perf_counter()
    for _ in range(warm):
        dist.all_reduce(t)
    iters = torch.tensor([args.iters or max(warm, int(args.seconds * warm / (time.perf_counter() - t0)))])
    dist.broadcast(iters, 0)
    iters = int(iters.item())
    dist.barrier()
    if rank == 0 and args.ready_file:
        open(args.ready_file, "w").close()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    us = (time.perf_counter() - t0) / iters * 1e6
    if rank == 0:
        print("us/call %.3f calls %d" % (us, iters), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--backend", default="plexus")
    ap.add_argument("--ready-file", default="")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args, port), nprocs=args.np)


if __name__ == "__main__":
    main()
