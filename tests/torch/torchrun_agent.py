#!/usr/bin/python3
"""torchrun_agent.py PLEXUS_BENCH - plexus-bench launched the way torchrun
launches workers, with the elastic agent's store emulated.

torchrun's agent hosts a TCPStore on MASTER_PORT before it starts the
workers, and tells them so with TORCHELASTIC_USE_AGENT_STORE=True; torch's
own workers then join it as clients under /worker/attempt_<restart count>.
Debian's torchrun fails under Python 3.11 before it starts anything, so this
script plays the agent: it hosts a torch TCPStore (is_master=True) and starts
P ranks with the variables torchrun sets. Each rank runs plexus-bench
--check on the tcp backend. Cases: 2 ranks, then a second attempt (restart
count 1) on the same agent store, then 4 ranks on a fresh store. Also checks
that plexus wrote its keys into the agent's store under the attempt's prefix
(where a torch worker's PrefixStore finds them). Exit 0 if every case
passes, 1 if not, 77 without torch.
"""
import os
import subprocess
import sys
from datetime import timedelta

from torch_needs import free_port  # beside this file


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


try:
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001 - any import failure means no torch here
    skip("torch is not importable by %s: %s" % (sys.executable, e))
if not dist.is_available():
    skip("this torch has no torch.distributed")
# torch >= 2.4 asks for libuv by default; Debian's torch 2.6 is built without it.
no_libuv = {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}


def launch(bench, port, P, attempt):
    """Starts P ranks as torchrun's agent would; returns their exit codes."""
    procs = []
    for r in range(P):
        env = dict(os.environ)
        env.update({
            "RANK": str(r), "LOCAL_RANK": str(r), "GROUP_RANK": "0", "ROLE_RANK": str(r),
            "ROLE_NAME": "default", "WORLD_SIZE": str(P), "LOCAL_WORLD_SIZE": str(P),
            "ROLE_WORLD_SIZE": str(P), "GROUP_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": str(attempt),
            "TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_RUN_ID": "plexus-test",
            "TORCHELASTIC_ERROR_FILE": "/dev/null", "OMP_NUM_THREADS": "1",
            "PLEXUS_BACKEND": "tcp",
        })
        env.pop("PLEXUS_INIT", None)
        args = [bench, "--coll", "allreduce,allgather,alltoallv,allgatherv", "--check", "-b", "8", "-e", "256K",
                "-f", "8", "-n", "2", "-w", "1", "-d", "f32"]
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    codes = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        codes.append(p.returncode)
        text = out.decode(errors="replace")
        if p.returncode != 0 or r == 0:
            print("--- rank %d (exit %s)\n%s" % (r, p.returncode, text[-3000:]), flush=True)
    return codes


def main(bench):
    failures = []
    for P, attempts in ((2, (0, 1)), (4, (0,))):
        port = free_port()
        # The agent's store: hosted before any worker starts, no wait for workers.
        agent = dist.TCPStore("127.0.0.1", port, None, True, timedelta(seconds=60), wait_for_workers=False,
                              **no_libuv)
        for attempt in attempts:
            before = agent.num_keys()
            codes = launch(bench, port, P, attempt)
            ok = all(c == 0 for c in codes)
            # plexus's keys live under /worker/attempt_N/, as torch workers' do: a destroyed
            # communicator's own keys leave the store, its generation count stays.
            view = dist.PrefixStore("/worker/attempt_%d" % attempt, agent)
            found = False
            if ok:
                try:
                    view.wait(["plexus-generation/world/0"], timedelta(seconds=5))
                    found = True
                except RuntimeError:
                    pass
            print("P=%d attempt %d: exit codes %s, agent store keys %d -> %d, plexus-generation/world/0 under the "
                  "attempt prefix: %s" % (P, attempt, codes, before, agent.num_keys(), found), flush=True)
            if not ok:
                failures.append("P=%d attempt %d: a rank failed" % (P, attempt))
            elif not found:
                failures.append("P=%d attempt %d: no plexus key under /worker/attempt_%d" % (P, attempt, attempt))
        del agent
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
