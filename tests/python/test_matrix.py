#!/usr/bin/python3
"""test_matrix.py PLEXUS_RUN BACKEND N... - matrix_rank.py (every collective
x dtype x op, in and out of place, blocking and nonblocking, against numpy)
under plexus-run on BACKEND with each N processes."""
import os
import subprocess
import sys
import time

try:
    import numpy  # noqa: F401 - the ranks need it
except ImportError as e:
    print("SKIP: %s cannot import numpy (python3-numpy): %s" % (sys.executable, e))
    sys.exit(77)

plexus_run, backend, sizes = sys.argv[1], sys.argv[2], sys.argv[3:]
rank_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matrix_rank.py")
failed = 0
for n in sizes:
    t0 = time.monotonic()
    p = subprocess.run([plexus_run, "-n", n, "--backend", backend, "--timeout", "120", sys.executable, "-B", rank_py],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    print("--- %s processes on %s: exit %d in %.1f s\n%s" % (n, backend, p.returncode, time.monotonic() - t0,
                                                           p.stdout[-6000:]), flush=True)
    lines = [ln for ln in p.stdout.splitlines() if " checks over " in ln]
    if p.returncode or len(lines) != int(n) or any(" 0 failed" not in ln for ln in lines):
        print("FAIL: %s processes on %s" % (n, backend))
        failed += 1
sys.exit(1 if failed else 0)
