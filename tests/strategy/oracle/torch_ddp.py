"""torch_ddp.py DIR RANK P INITFILE - one rank of the torch side of the
oracle: the MLP of oracle_rank.c under torch's DistributedDataParallel over
gloo (rendezvous through a file), from the initial weights and data that
oracle.py wrote to DIR. Two runs: 'ddp' (one batch per step) and 'accum'
(per step: a micro-batch under no_sync(), then a synchronised one). Writes
DIR/torch-RUN-loss-rR.bin (steps x 2) and DIR/torch-RUN-NAME-rR.bin."""
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import shapes as S


def load(d, name, shape):
    return torch.from_numpy(np.fromfile("%s/%s.bin" % (d, name), dtype="<f4").reshape(shape).copy())


def mlp(d):
    m = nn.Sequential(nn.Linear(S.D, S.H), nn.Tanh(), nn.Linear(S.H, 1))
    with torch.no_grad():
        m[0].weight.copy_(load(d, "W1", (S.H, S.D)))
        m[0].bias.copy_(load(d, "b1", (S.H,)))
        m[2].weight.copy_(load(d, "W2", (1, S.H)))
        m[2].bias.copy_(load(d, "b2", (1,)))
    return m


def save(d, run, rank, name, t):
    t.detach().numpy().astype("<f4").tofile("%s/torch-%s-%s-r%d.bin" % (d, run, name, rank))


def main():
    d, rank, P, init = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=P)
    X = load(d, "X", (S.NB * P, S.D))[rank * S.NB:(rank + 1) * S.NB]
    Y = load(d, "Y", (S.NB * P,))[rank * S.NB:(rank + 1) * S.NB]
    for run in ("ddp", "accum"):
        model = DistributedDataParallel(mlp(d))
        opt = torch.optim.SGD(model.parameters(), lr=S.LR)
        losses = np.zeros((S.STEPS, 2), dtype="<f4")
        for s in range(S.STEPS):
            opt.zero_grad()
            if run == "accum":
                half = S.NB // 2
                with model.no_sync():
                    l0 = ((model(X[:half]).squeeze(1) - Y[:half]) ** 2).mean()
                    l0.backward()
                l1 = ((model(X[half:]).squeeze(1) - Y[half:]) ** 2).mean()
                l1.backward()
                losses[s] = [l0.item(), l1.item()]
            else:
                loss = ((model(X).squeeze(1) - Y) ** 2).mean()
                loss.backward()
                losses[s, 0] = loss.item()
            opt.step()
        losses.tofile("%s/torch-%s-loss-r%d.bin" % (d, run, rank))
        m = model.module
        for name, t in (("W1", m[0].weight), ("b1", m[0].bias), ("W2", m[2].weight), ("b2", m[2].bias)):
            save(d, run, rank, name, t)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
