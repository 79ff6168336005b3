"""torch_revoke.py - plexus.torch.revoke under torch.distributed on "plexus",
3 processes, under auto (shm) and tcp: rank 0 revokes the default group
while ranks 1 and 2 are blocked in an all_reduce it never joins;
  - their all_reduce raises a RuntimeError naming PLX_ERR_REVOKED, within 20 s
    of the revoke (the group's timeout is 120 s: not a timeout);
  - every later all_reduce raises the same on every rank, rank 0's too;
  - destroy_process_group() then returns, and a new group of the same
    processes works (re-creation after a revoke);
  - revoke on a gloo group is refused (ValueError).
Exit 0 if every check passes on every rank, 1 if not, 77 without torch or
plexus.torch.
"""
import datetime
import os
import subprocess
import sys
import time

from torch_needs import free_port, require_plexus_torch

TIMEOUT = 240
PROMPT_S = 20.0


def revoked(e):
    return isinstance(e, RuntimeError) and "PLX_ERR_REVOKED" in str(e)


def rank_main(rank, P):
    import torch
    import torch.distributed as dist
    import plexus.torch
    failures = []
    dist.init_process_group("plexus", init_method="env://", rank=rank, world_size=P,
                            timeout=datetime.timedelta(seconds=120))
    t = torch.ones(4)
    dist.all_reduce(t)
    if not bool((t == P).all()):
        failures.append("all_reduce before the revoke gave %s" % t.tolist())
    gloo = dist.new_group(backend="gloo")
    try:
        plexus.torch.revoke(gloo)
        failures.append("revoke on a gloo group was accepted")
    except ValueError:
        pass
    dist.barrier()  # everyone is past the gloo group before rank 0 revokes
    if rank == 0:
        time.sleep(1.0)  # the others are blocked in all_reduce by now
        plexus.torch.revoke()
        print("rank 0: revoked at %.3f" % time.time(), flush=True)
    else:
        t0 = time.time()
        try:
            dist.all_reduce(torch.ones(1 << 10))
            failures.append("an all_reduce that rank 0 never joined returned after the revoke")
        except Exception as e:  # noqa: BLE001 - what it raised is the check
            waited = time.time() - t0
            print("rank %d: blocked all_reduce raised after %.2f s: %s" % (rank, waited, str(e).splitlines()[0]),
                  flush=True)
            if not revoked(e):
                failures.append("the blocked all_reduce raised %r, not PLX_ERR_REVOKED" % e)
            elif waited > 1.0 + PROMPT_S:
                failures.append("the blocked all_reduce raised only after %.1f s" % waited)
    try:
        dist.all_reduce(torch.ones(4))
        failures.append("an all_reduce after the revoke succeeded")
    except Exception as e:  # noqa: BLE001
        if not revoked(e):
            failures.append("an all_reduce after the revoke raised %r, not PLX_ERR_REVOKED" % e)
    dist.destroy_process_group()
    # re-creation: the same processes, a new group (a fresh store port from the parent)
    os.environ["MASTER_PORT"] = os.environ["PLEXUS_TEST_PORT2"]
    dist.init_process_group("plexus", init_method="env://", rank=rank, world_size=P,
                            timeout=datetime.timedelta(seconds=120))
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    if not bool((t == P * (P + 1) / 2).all()):
        failures.append("all_reduce on the new group gave %s" % t.tolist())
    dist.destroy_process_group()
    for f in failures:
        print("rank %d: FAIL: %s" % (rank, f), flush=True)
    return 1 if failures else 0


def main():
    require_plexus_torch()
    P = 3
    failed = 0
    for backend in ("auto", "tcp"):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
                   PYTHONWARNINGS="ignore", PLEXUS_BACKEND=backend, PLEXUS_TEST_PORT2=str(free_port()))
        procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", str(r), str(P)], env=env)
                 for r in range(P)]
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=TIMEOUT))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                codes.append("timeout")
        print("%s, %d processes: exit codes %s" % (backend, P, codes), flush=True)
        failed += any(c != 0 for c in codes)
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit(main())
