#!/usr/bin/python3
"""torch_ddp.py PLEXUS_RUN - examples/torch_ddp.py (DistributedDataParallel)
on backend "plexus" and on "gloo", 2 processes each under plexus-run, same
seed and data: the per-step losses and the final parameters must agree
(float32, within 1e-6 relative; with 2 ranks a sum has one rounding, so
they are expected to be bitwise equal). Exit 77 without torch/plexus.torch.
"""
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.distributed  # noqa: F401
except ImportError as e:
    print("SKIP: torch not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)
try:
    import plexus.torch  # noqa: F401
except ImportError as e:
    print("SKIP: plexus.torch is not built or not on PYTHONPATH: %s" % e)
    sys.exit(77)

EXAMPLE = os.path.join(os.environ.get("PLEXUS_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                       "examples", "torch_ddp.py")


# How torch 2.x's gloo teardown fails (tests/interop/torch_semantic/torch_rank.py): an abort after
# finalization began, or a hang where the main thread joins gloo's worker while holding the GIL it needs.
TORCH_GLOO_EXIT = ("terminate called without an active exception", "ran past --timeout")


def train(plexus_run, backend, out):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    p = subprocess.run([plexus_run, "-n", "2", "--timeout", "100", sys.executable, "-B", EXAMPLE, "--backend", backend,
                        "--steps", "20", "--out", out], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=150)
    print("--- %s (exit %d)\n%s" % (backend, p.returncode, p.stdout[-3000:]), flush=True)
    if p.returncode and backend == "gloo" and os.path.exists(out) and any(m in p.stdout for m in TORCH_GLOO_EXIT):
        # torch 2.x's gloo worker thread can free a finished all_reduce's tensor after the rank's work is done:
        # at exit (tests/torch/torch_teardown.py) or while destroy_process_group joins it. The reference run's
        # results are written by then; plexus's run must still exit 0.
        print("(the gloo reference failed in torch's own gloo teardown; its results are complete)")
        return True
    return p.returncode == 0


def close(a, b, rel=1e-6):
    return bool(((a - b).abs() <= rel * torch.maximum(a.abs(), b.abs()) + 1e-30).all())


def main():
    plexus_run = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="plexus-ddp-")
    res = {}
    for backend in ("plexus", "gloo"):
        out = os.path.join(tmp, backend + ".pt")
        if not train(plexus_run, backend, out):
            print("FAIL: training on %s failed" % backend)
            return 1
        res[backend] = torch.load(out)
    a, b = res["plexus"], res["gloo"]
    la, lb = torch.tensor(a["losses"], dtype=torch.float64), torch.tensor(b["losses"], dtype=torch.float64)
    fails = []
    if len(la) != len(lb) or not close(la, lb):
        fails.append("losses differ:\n  plexus %s\n  gloo   %s" % (a["losses"], b["losses"]))
    if la[-1] >= la[0]:
        fails.append("the loss did not go down (%g -> %g)" % (la[0], la[-1]))
    for i, (pa, pb) in enumerate(zip(a["params"], b["params"])):
        if not close(pa, pb):
            fails.append("parameter %d differs (max abs diff %g)" % (i, (pa - pb).abs().max()))
    bitwise = all(torch.equal(pa, pb) for pa, pb in zip(a["params"], b["params"])) and a["losses"] == b["losses"]
    print("losses %.6f -> %.6f on both; final parameters %s" % (la[0], la[-1], "bitwise equal" if bitwise
                                                                 else "equal within 1e-6"))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
