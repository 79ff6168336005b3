#!/usr/bin/python3
"""torch_ft_ddp.py - DistributedDataParallel on "plexus" that survives a lost
rank through torch's own API: the step that fails is retried by the
survivors after dist.shrink_group, on a DDP over the smaller group; with
--join-step a fresh process takes the lost rank's place through
dist._reconfigure and the group is whole again.

    # 4 ranks (env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun
    # or plexus-run set them); rank 3 kills itself (SIGKILL) in step 5:
    python3 examples/torch_ft_ddp.py --kill-rank 3 --kill-step 5 --out final.pt
    # the same, and a replacement joins at step 8 (started once the job's store
    # listens, with MASTER_ADDR and MASTER_PORT only; it waits there until the
    # survivors call it. A client retrying its connect to a loopback port before
    # the server binds it can meet itself and take the port):
    python3 examples/torch_ft_ddp.py --kill-rank 3 --kill-step 5 --join-step 8 --out final.pt
    python3 examples/torch_ft_ddp.py --join --kill-rank 3 --join-step 8
    # the same membership schedule computed in one process, for comparison:
    python3 examples/torch_ft_ddp.py --reference --world 4 --kill-rank 3 --kill-step 5 --join-step 8 --out ref.pt

Each rank trains on its own batches (seeded by step and rank). When a rank
dies, the survivors' backward raises (DDP's all_reduce fails, naming the
rank); the group's getError says REMOTE_ERROR; shrink_group gives the
survivors a group of their own (plexus's plx_comm_shrink), on which a new
DDP redoes the step. The ranks to exclude are the one --kill-rank names (a
real job learns them from its launcher, or the error's text). A replacement
reaches the job's store (MASTER_ADDR, MASTER_PORT) and makes a group of its
own there; they exchange reconfigure handles on that store, everyone calls
reconfigure with the handles in slot order (the replacement in the lost
rank's slot, training on its batches), plexus meets them on that store
whatever their groups' prefixes, and rank 0 hands over the step, the
weights and the optimizer's momentum.
"""
import argparse
import inspect
import os
import signal

import torch
import torch.nn as nn


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 16, generator=g)
    return x, torch.tanh(x @ torch.linspace(-1, 1, 64).view(16, 4))


def members(step, args):
    """The ranks that take part in step (the schedule both modes follow): the
    lost rank's slot is empty from its kill step until the join step."""
    gone = args.kill_step <= step and (args.join_step < 0 or step < args.join_step)
    return [r for r in range(args.world) if not (r == args.kill_rank and gone)]


def reference(args):
    """One process: each step's gradient is the mean of the members' own."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(args.steps):
        ranks = members(step, args)
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for r in ranks:
            model.zero_grad()
            x, y = batch(step, r)
            nn.functional.mse_loss(model(x), y).backward()
            for g, p in zip(grads, model.parameters()):
                g += p.grad / len(ranks)
        for g, p in zip(grads, model.parameters()):
            p.grad = g
        opt.step()
    return model


def store_client(dist, host, port):
    """A client of the job's store; the classic protocol, which every torch's
    server speaks (some torch builds have no libuv)."""
    try:
        return dist.TCPStore(host, port, is_master=False, use_libuv=False)
    except TypeError:  # a torch without the choice
        return dist.TCPStore(host, port, is_master=False)


def join_group(store, me, args, model, opt, step):
    """Everyone (survivors and the replacement): reconfigure the default group
    into one of args.world ranks, slot order, and take rank 0's state.
    Returns the step to go on from."""
    import torch.distributed as dist
    store.set("join/handle/%d" % me, dist._get_reconfigure_handle())
    handles = [store.get("join/handle/%d" % r).decode() for r in range(args.world)]
    dist._reconfigure(uuid=1, handles=handles).wait()
    at = torch.tensor([step])
    dist.broadcast(at, src=0)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
        buf = opt.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
        dist.broadcast(buf, src=0)
    print("rank %d: %d ranks again from step %d" % (me, dist.get_world_size(), int(at)), flush=True)
    return int(at)


def train(args):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import plexus.torch  # noqa: F401 - registers the backend "plexus"

    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.join:  # the replacement: a group of one on the job's store, then called in
        store, me = store_client(dist, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), args.kill_rank
        # A group of one under a prefix of its own (the job's group lives on this store too), in
        # the reconfigure regime where torch has it: no communicator until the survivors call it in.
        regime = {"enable_reconfigure": True} if "enable_reconfigure" in inspect.signature(
            dist.init_process_group).parameters else {}
        dist.init_process_group("plexus", store=dist.PrefixStore("replacement/%d" % me, store), rank=0, world_size=1,
                                **regime)
        store.wait(["join/go"])
        step = join_group(store, me, args, model, opt, 0)
    else:
        dist.init_process_group("plexus")
        # The job's store as a replacement reaches it, where one is to join.
        store = None
        if args.join_step >= 0:
            store = store_client(dist, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        me = dist.get_rank()  # the rank in the first group; the survivors keep theirs (3 was last)
        args.world = dist.get_world_size()
        step = 0
    ddp = DDP(model)
    while step < args.steps:
        if step == args.join_step and dist.get_world_size() < args.world:
            del ddp
            if me == 0:
                store.set("join/go", "1")
            step = join_group(store, me, args, model, opt, step)
            ddp = DDP(model)
        x, y = batch(step, me)
        try:
            loss = nn.functional.mse_loss(ddp(x), y)
            if me == args.kill_rank and step == args.kill_step:
                os.kill(os.getpid(), signal.SIGKILL)  # mid-step: after the forward pass, before the all_reduce
            opt.zero_grad()
            loss.backward()
        except RuntimeError as e:
            backend = dist.group.WORLD._get_backend(torch.device("cpu"))
            print("rank %d: step %d failed (get_error: %s): %s" % (me, step, backend.get_error(),
                                                                   str(e).splitlines()[0][:200]), flush=True)
            del ddp
            dist.shrink_group([args.kill_rank])
            print("rank %d: shrunk to %d ranks, redoing step %d" % (me, dist.get_world_size(), step), flush=True)
            ddp = DDP(model)  # on the new default group
            continue
        opt.step()
        step += 1
    if me == 0 and args.out:
        torch.save([p.detach().clone() for p in model.parameters()], args.out)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--kill-rank", type=int, default=3)
    ap.add_argument("--kill-step", type=int, default=5)
    ap.add_argument("--reference", action="store_true", help="compute the schedule in this one process")
    ap.add_argument("--world", type=int, default=4, help="with --reference or --join: the first group's size")
    ap.add_argument("--join-step", type=int, default=-1, help="a replacement joins before this step")
    ap.add_argument("--join", action="store_true", help="be the replacement (MASTER_ADDR/MASTER_PORT: the job's store)")
    ap.add_argument("--out", default="", help="rank 0's final parameters (torch.save)")
    args = ap.parse_args()
    if args.reference:
        model = reference(args)
        if args.out:
            torch.save([p.detach().clone() for p in model.parameters()], args.out)
    else:
        train(args)


if __name__ == "__main__":
    main()
