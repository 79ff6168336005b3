#!/usr/bin/python3
"""test_numpy_sgd.py EXAMPLE BACKEND - examples/numpy_elastic_sgd.py on 4
ranks: once with rank 2 SIGKILLed at step 10 (the survivors shrink and redo
the step on 3 ranks), once with rank 2 leaving at step 10 by a split (the
same membership schedule, nobody dies). The final weights must be bitwise
equal, the three survivors must each have gone on after the shrink, and the
loss must have fallen (the model learned)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:
    print("SKIP: %s cannot import numpy (python3-numpy): %s" % (sys.executable, e))
    sys.exit(77)

example, backend = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="plexus-sgd-")
env = dict(os.environ, PLEXUS_BACKEND=backend)
fails = []
runs = {}
for mode in ("kill", "leave"):
    out = os.path.join(tmp, mode + ".npy")
    p = subprocess.run([sys.executable, "-B", example, "--procs", "4", "--" + mode, "2:10", "--steps", "30",
                        "--out", out, "--timeout", "60"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    print("--- %s on %s (exit %d)\n%s" % (mode, backend, p.returncode, p.stdout[-4000:]), flush=True)
    if p.returncode or not os.path.exists(out):
        fails.append("the %s run failed" % mode)
        continue
    runs[mode] = (np.load(out), p.stdout)
if len(runs) == 2:
    (wk, logk), (wl, _) = runs["kill"], runs["leave"]
    if not np.array_equal(wk, wl):
        fails.append("final weights differ: max |diff| %g over %d values" % (np.abs(wk - wl).max(), wk.size))
    went_on = sorted(re.findall(r"step 10: going on as rank (\d) of 3", logk))
    if went_on != ["0", "1", "2"]:
        fails.append("the survivors did not all go on after the shrink: %s" % went_on)
    loss = [float(v) for v in re.findall(r"loss ([0-9.]+)", logk)]
    if len(loss) < 2 or not loss[-1] < 0.5 * loss[0]:
        fails.append("the loss did not fall: %s" % loss)
    else:
        print("final weights bitwise equal; loss %.4f -> %.4f" % (loss[0], loss[-1]))
shutil.rmtree(tmp, ignore_errors=True)
for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)
