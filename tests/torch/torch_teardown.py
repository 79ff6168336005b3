"""torch_teardown.py - a job whose default group is gloo and which makes a
"plexus" subgroup (dist.new_group(backend="plexus")), as bench/ddp_busy.py
does, must leave: 2 processes init gloo over tcp:// (rank 0 hosts torch's
store), make the plexus subgroup, train a few DDP steps on it and all_reduce
on both groups, then end in one of three ways:
  destroy   dist.destroy_process_group(), then the interpreter exits;
  late0     the same, rank 0 a second after rank 1 (as ddp_busy's rank 0,
            which prints its table first);
  exit      no destroy: the interpreter's exit tears the groups down.
Each way runs RUNS times (argv[1], default 5); a run that has not ended in
RUN_TIMEOUT s (minutes under a loaded 2-core machine's worst; the hang
this guards against lasted the group's 30-minute timeout) is killed and
counts as a hang. Every rank must exit 0, and nothing
on stderr may carry a C++ stack from torch's store ("recvValue failed",
"Exception raised from"), which a non-host rank's teardown printed on torch
2.x. Exit 0 if all runs pass, 1 if not, 77 without torch or plexus.torch.
"""
import os
import subprocess
import sys
import time

from torch_needs import free_port, require_plexus_torch

RUN_TIMEOUT = 180
WAYS = ("destroy", "late0", "exit")
NOISE = ("recvValue failed", "Exception raised from")
# Tensors handed to collectives, held until the process ends. torch 2.x's
# gloo worker thread may drop its reference to a finished work's tensors
# after the interpreter began finalizing; freeing a tensor's Python object
# then kills that thread (pthread_exit through a noexcept frame: "terminate
# called without an active exception", SIGABRT), in gloo's group, not ours.
# Holding them here leaves the last reference with the main thread.
HELD = []


def rank_main(rank, way, port):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import plexus.torch  # noqa: F401

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    gloo = dist.group.WORLD
    plexus = dist.new_group(backend="plexus")
    torch.manual_seed(0)
    net = DDP(nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64)), process_group=plexus)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(rank))
    for _ in range(3):
        loss = net(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for group in (gloo, plexus):
        t = torch.full((16,), float(rank + 1))
        HELD.append(t)
        dist.all_reduce(t, group=group)
        if not torch.equal(t, torch.full((16,), 3.0)):
            print("rank %d: wrong sum %s" % (rank, t[:2].tolist()), flush=True)
            return 1
    dist.barrier(group=gloo)
    if way == "late0" and rank == 0:
        time.sleep(1)
    if way in ("destroy", "late0"):
        dist.destroy_process_group()
    print("rank %d: left its work (%s)" % (rank, way), flush=True)
    return 0


def one_run(way):
    for _ in range(3):
        ok, codes, noisy, errs = one_try(way)
        # The free port was taken before rank 0 bound it (other jobs on the host): again, on another.
        if ok or "Address already in use" not in errs[0]:
            break
    if not ok:
        for r, e in enumerate(errs):
            if e.strip():
                print("--- rank %d stderr (last 1500 chars):\n%s" % (r, e[-1500:]))
    return ok, codes, noisy


def one_try(way):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", str(r), way, str(port)],
                              env=env, stderr=subprocess.PIPE, text=True) for r in range(2)]
    deadline = time.monotonic() + RUN_TIMEOUT
    codes, errs = [], []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            _, err = p.communicate()
            codes.append("hung")
        errs.append(err)
    noisy = [r for r, e in enumerate(errs) if any(n in e for n in NOISE)]
    ok = all(c == 0 for c in codes) and not noisy
    return ok, codes, noisy, errs


def main():
    require_plexus_torch()
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    failed = 0
    for way in WAYS:
        for i in range(runs):
            t0 = time.monotonic()
            ok, codes, noisy = one_run(way)
            print("%s run %d: exit codes %s%s, %.1f s" % (
                way, i, codes, ", torch's store stack on stderr of rank(s) %s" % noisy if noisy else "",
                time.monotonic() - t0), flush=True)
            failed += not ok
    print("FAILED: %d run(s)" % failed if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
    sys.exit(main())
