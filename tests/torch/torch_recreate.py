"""torch_recreate.py - torch's init_process_group and destroy_process_group
on "plexus", again and again over env://, with the ranks leaving in every
order: P processes (argv[1], default 2) run max(3, P) rounds of
init_process_group, all_reduce, destroy_process_group; in round k rank
k mod P sleeps 1 s before its destroy, so it leaves last while the others
already wait in the next round's rendezvous (rank 0 hosts torch's store).
Each round has its own MASTER_PORT: with one port, the others' next
rendezvous could reach the late rank 0's old store, which torch closes under
them ("Connection reset by peer"), a race in torch's env:// and not plexus's.
Under PLEXUS_BACKEND tcp and shm. Exit 0 if every round passes on every
rank and no rank's stderr carries a C++ stack from torch's store ("recvValue
failed", which torch 2.x logged whenever a leaving rank asked the store of
a rank 0 that had just closed it), 1 if not, 77 without torch or
plexus.torch.
"""
import datetime
import gc
import os
import subprocess
import sys
import time

from torch_needs import free_ports, require_plexus_torch

TIMEOUT = 120
NOISE = ("recvValue failed", "Exception raised from")


def rank_main(rank, P):
    import torch
    import torch.distributed as dist
    import plexus.torch  # noqa: F401

    ports = os.environ["RECREATE_PORTS"].split(",")
    for rnd in range(max(3, P)):
        os.environ["MASTER_PORT"] = ports[rnd]
        dist.init_process_group("plexus", init_method="env://", rank=rank, world_size=P,
                                timeout=datetime.timedelta(seconds=30))
        t = torch.arange(1000, dtype=torch.float32) + (rank + 1) * (rnd + 1)
        dist.all_reduce(t)
        want = torch.arange(1000, dtype=torch.float32) * P + (rnd + 1) * P * (P + 1) / 2
        if not torch.equal(t, want):
            print("rank %d round %d: wrong sum" % (rank, rnd), flush=True)
            return 1
        if rnd % P == rank:
            time.sleep(1)
        dist.destroy_process_group()
        # The round's store ends now on rank 0, not whenever the collector finds it: a rank that
        # leaves later meets it closed every time.
        gc.collect()
    return 0


def main():
    require_plexus_torch()
    P = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    failed = 0
    for backend in ("tcp", "shm"):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1",
                   RECREATE_PORTS=",".join(map(str, free_ports(max(3, P)))),
                   PYTHONWARNINGS="ignore", PLEXUS_BACKEND=backend)
        procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", str(r), str(P)], env=env,
                                  stderr=subprocess.PIPE, text=True) for r in range(P)]
        deadline = time.monotonic() + TIMEOUT
        codes, errs = [], []
        for p in procs:
            try:
                _, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
                codes.append(p.returncode)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                _, err = p.communicate()
                codes.append("timeout")
            errs.append(err)
            sys.stderr.write(err)
        noisy = [r for r, e in enumerate(errs) if any(n in e for n in NOISE)]
        print("%s, %d processes: exit codes %s%s" % (
            backend, P, codes, ", torch's store stack on stderr of rank(s) %s" % noisy if noisy else ""), flush=True)
        failed += any(c != 0 for c in codes) or bool(noisy)
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit(main())
