#!/usr/bin/python3
"""torchrun_restarts.py PLEXUS_BENCH - torchrun's restart rounds on one agent
store, without torch.

torchrun restarts every worker when one fails, and the new workers meet in
the same agent store under /worker/attempt_<TORCHELASTIC_RESTART_COUNT>.
This script hosts a store with torch 2.x's TCPStore wire (Torch2Store from
tests/torch/torch2_store_wire.py) and plays the agent:
  attempt 0: 3 ranks of plexus-bench run long allreduces on tcp; rank 2 is
             killed with SIGKILL; the others must exit with an error (not
             hang) within DETECT_S.
  attempts 1, 2, 3 on the same store: 3, 2, then 3 ranks (an elastic job may
             restart with another size) run plexus-bench --check, which must
             pass, and plexus's keys must be under that attempt's prefix.
Keys the failed attempt left behind must not disturb the later ones.
Exit 0 if every attempt behaves, 1 if not.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from torch2_store_wire import Torch2Store  # noqa: E402 - found through the path above

DETECT_S = 60  # a lost peer's error on a loaded 2-core machine: seconds, far below the 300 s operation timeout
RUN_S = 120


def start(bench, store, P, attempt, args):
    procs = []
    for r in range(P):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(P), LOCAL_WORLD_SIZE=str(P),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
                   TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT=str(attempt),
                   TORCHELASTIC_MAX_RESTARTS="3", TORCHELASTIC_RUN_ID="plexus-test", PLEXUS_BACKEND="tcp")
        env.pop("PLEXUS_INIT", None)
        procs.append(subprocess.Popen([bench] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return procs


def finish(procs, limit_s):
    """Exit codes (None: still running after limit_s, then killed) and outputs."""
    codes, outs, end = [], [], time.monotonic() + limit_s
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, end - time.monotonic()))
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            codes.append(None)
        outs.append(out.decode(errors="replace"))
    return codes, outs


def keys_under(store, attempt):
    # On the wire a torch TCPStore client puts "/" before every key.
    with store.cv:
        return [k for k in store.kv if k.startswith(b"//worker/attempt_%d/" % attempt)]


def failed_attempt(bench, store, failures):
    procs = start(bench, store, 3, 0, ["--coll", "allreduce", "-b", "1M", "-e", "1M", "-n", "1000000", "-w", "1",
                                       "-d", "f32"])
    met_by = time.monotonic() + RUN_S
    while len(keys_under(store, 0)) < 3 and time.monotonic() < met_by:
        time.sleep(0.1)
    time.sleep(2)  # the ranks have met and are in their allreduces
    if procs[2].poll() is not None:
        failures.append("attempt 0: rank 2 ended before the kill (exit %s)" % procs[2].returncode)
    procs[2].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    codes, outs = finish(procs[:2], DETECT_S)
    procs[2].wait()
    took = time.monotonic() - killed
    print("attempt 0: rank 2 killed; ranks 0-1 exit codes %s after %.1f s" % (codes, took), flush=True)
    for r, (c, out) in enumerate(zip(codes, outs)):
        if c is None or c == 0:
            failures.append("attempt 0: rank %d %s after its peer was killed" % (r, "hung" if c is None else
                                                                                "exited 0"))
            print("--- rank %d\n%s" % (r, out[-2000:]), flush=True)
        else:
            said = [line for line in out.splitlines() if "PLX_ERR" in line]
            print("rank %d: %s" % (r, said[-1][:400] if said else out[-1000:]), flush=True)
            if not said or "rank 2" not in said[-1]:
                failures.append("attempt 0: rank %d's error does not name the lost rank 2" % r)


def restart(bench, store, P, attempt, failures):
    before = len(store.kv)
    procs = start(bench, store, P, attempt, ["--coll", "allreduce,allgather", "--check", "-b", "8", "-e", "64K",
                                             "-f", "8", "-n", "2", "-w", "1", "-d", "f32"])
    codes, outs = finish(procs, RUN_S)
    mine = keys_under(store, attempt)
    print("attempt %d: %d ranks, exit codes %s, store keys %d -> %d, %d under /worker/attempt_%d/" %
          (attempt, P, codes, before, len(store.kv), len(mine), attempt), flush=True)
    if any(c != 0 for c in codes):
        failures.append("attempt %d: a rank failed" % attempt)
        for r, out in enumerate(outs):
            print("--- rank %d (exit %s)\n%s" % (r, codes[r], out[-2000:]), flush=True)
    elif not mine:
        failures.append("attempt %d: no plexus key under /worker/attempt_%d/" % (attempt, attempt))


def main(bench):
    store, failures = Torch2Store(), []
    failed_attempt(bench, store, failures)
    for attempt, P in ((1, 3), (2, 2), (3, 3)):
        restart(bench, store, P, attempt, failures)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
