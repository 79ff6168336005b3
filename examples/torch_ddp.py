#!/usr/bin/python3
"""torch_ddp.py - a small model trained with torch's DistributedDataParallel
on the torch.distributed backend "plexus".

    plexus-run -n 2 /usr/bin/python3 examples/torch_ddp.py
    plexus-run -n 2 /usr/bin/python3 examples/torch_ddp.py --backend gloo   # the same with gloo

plexus-run (like torchrun) sets RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT, so init_process_group uses init_method env://; plexus then
rendezvous through torch's store and carries the traffic on the backend it
is configured for (tcp between processes unless PLEXUS_BACKEND says else).
Every rank trains on its own batches of a fixed synthetic regression task;
DDP averages the gradients. --out FILE saves rank 0's per-step losses and
final parameters (torch.save) for comparisons.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="plexus")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.backend == "plexus":
        import plexus.torch  # noqa: F401 - registers the backend "plexus"
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))
    # Small buckets, so several allreduces overlap the backward pass.
    ddp = DDP(model, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + rank)
    w_true = torch.linspace(-1, 1, 64).view(16, 4)

    losses = []
    for step in range(args.steps):
        x = torch.randn(32, 16, generator=data)
        y = torch.tanh(x @ w_true)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print("step %3d  loss %.6f" % (step, losses[-1]), flush=True)
    if rank == 0 and args.out:
        torch.save({"losses": losses, "params": [p.detach().clone() for p in model.parameters()],
                    "backend": args.backend, "world": world}, args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
