"""torch_ft_ddp.py - examples/torch_ft_ddp.py as a test: DDP on "plexus", 4
processes, rank 3 SIGKILLed in the middle of step 5 of 10; the survivors see
REMOTE_ERROR from getError, dist.shrink_group to 3 and go on; a fifth
process, started with the others but outside the group, takes rank 3's
place through reconfigure before step 8, and the 4 finish (where torch has
dist._reconfigure; else the 3 finish alone). The final
weights must equal the one-process reference of the same membership
schedule (4 ranks for steps 0-4, 3 for 5-7, 4 after) within rtol 1e-5, atol 1e-6 (the
all_reduce's summation order differs from the reference's), and differ from
the reference in which no rank is lost (so the check can fail). Exit 77
where torch lacks shrink_group.
"""
import os
import signal
import subprocess
import sys
import tempfile

from listening import wait_listening  # beside this file
from torch_needs import free_port, skip

TIMEOUT = 180


def main():
    try:
        import torch
        import torch.distributed as dist
        import plexus.torch  # noqa: F401
    except ImportError as e:
        skip("torch or plexus.torch not importable: %s" % e)
    if not hasattr(dist, "shrink_group"):
        skip("torch %s has no torch.distributed.shrink_group" % torch.__version__)
    example = os.path.join(os.environ.get("PLEXUS_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                           "examples", "torch_ft_ddp.py")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="plexus-ft-ddp-") as tmp:
        out, ref, ref_all = (os.path.join(tmp, n) for n in ("final.pt", "ref.pt", "ref_all.pt"))
        # The replacement needs torch's reconfigure (2.14); without it the 3 finish alone.
        join = hasattr(dist, "_reconfigure")
        args = ["--steps", "10", "--kill-rank", "3", "--kill-step", "5"] + (["--join-step", "8"] if join else [])
        if not join:
            print("torch %s has no dist._reconfigure: no replacement joins" % torch.__version__)
        procs = []
        for r in range(4):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE="4", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
            procs.append(subprocess.Popen([sys.executable, "-B", example] + args + ["--out", out], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        if join:  # once rank 0's store listens; it waits there until the survivors call it
            wait_listening(port)
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                       PYTHONWARNINGS="ignore")
            procs.append(subprocess.Popen([sys.executable, "-B", example, "--join"] + args, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        codes, text = [], ""
        for p in procs:
            try:
                o, _ = p.communicate(timeout=TIMEOUT)
                codes.append(p.returncode)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                o, _ = p.communicate()
                codes.append("timeout")
            text += o
        print(text[-6000:])
        bad = []
        want = [0, 0, 0, -signal.SIGKILL] + ([0] if join else [])
        if codes != want:
            bad.append("exit codes %s, want %s (a fifth: the replacement)" % (codes, want))
        if join and text.count("4 ranks again from step 8") != 4:
            bad.append("%d processes said they were 4 ranks again from step 8, want 4" %
                       text.count("4 ranks again from step 8"))
        if text.count("REMOTE_ERROR") != 3:
            bad.append("%d survivors reported REMOTE_ERROR from get_error, want 3" % text.count("REMOTE_ERROR"))
        for what, extra, path in (("schedule", [], ref), ("no loss", ["--kill-step", "99"], ref_all)):
            subprocess.run([sys.executable, "-B", example, "--reference", "--world", "4"] + args + extra +
                           ["--out", path], check=True, timeout=TIMEOUT)
        if not bad and os.path.exists(out):
            got, want, other = (torch.load(f) for f in (out, ref, ref_all))
            diff = max(float((a - b).abs().max()) for a, b in zip(got, want))
            apart = max(float((a - b).abs().max()) for a, b in zip(got, other))
            print("max |final - reference| %.3g; max |final - no-loss reference| %.3g" % (diff, apart))
            if not all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, want)):
                bad.append("the final weights differ from the reference by up to %.3g" % diff)
            if all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, other)):
                bad.append("the final weights equal the no-loss reference too: the check cannot tell")
        elif not bad:
            bad.append("rank 0 saved no weights")
    for b in bad:
        print("FAIL: " + b)
    print("FAILED" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
