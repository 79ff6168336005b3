#!/usr/bin/python3
"""cluster_gloo_host.py RANKS_PER_HOST ITERS BYTES... - torch's gloo on one
host of the cluster in a box (run by scripts/cluster.sh exec, which sets
HOST, HOSTS and MASTER_ADDR): RANKS_PER_HOST processes, ranks HOST*R..,
then for each size the loop plexus-bench and mpi_allreduce_loop run
(5 warm-up allreduces, a barrier, ITERS back-to-back float32 SUM
allreduces, the slowest rank's average). Rank 0 prints "BYTES US" lines."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(local, rph, iters, sizes):
    host, hosts = int(os.environ["HOST"]), int(os.environ["HOSTS"])
    rank, world = host * rph + local, hosts * rph
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:29511" % os.environ["MASTER_ADDR"], rank=rank,
                            world_size=world)
    for b in sizes:
        t = torch.zeros(max(b // 4, 1), dtype=torch.float32)
        for _ in range(5):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        us = torch.tensor([(time.perf_counter() - t0) / iters * 1e6], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if rank == 0:
            print("%d %.2f" % (b, us.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    rph, iters = int(sys.argv[1]), int(sys.argv[2])
    mp.start_processes(run, args=(rph, iters, [int(b) for b in sys.argv[3:]]), nprocs=rph, start_method="fork")
