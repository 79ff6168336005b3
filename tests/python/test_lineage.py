#!/usr/bin/python3
"""test_lineage.py BACKEND N DEPTH - lineage_rank.py on N ranks: long
chains of split and shrink keep names distinct and bounded, and every
link works."""
import os
import sys
import time

try:
    import numpy  # noqa: F401 - the ranks need it
except ImportError as e:
    print("SKIP: %s cannot import numpy (python3-numpy): %s" % (sys.executable, e))
    sys.exit(77)

from launch import Job

backend, n, depth = sys.argv[1], int(sys.argv[2]), sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
job = Job(n, [os.path.join(here, "lineage_rank.py"), depth], backend=backend)
try:
    codes = job.wait(time.monotonic() + 240)
finally:
    job.stop()
    print(job.report())
    job.remove()
bad = [r for r, c in enumerate(codes) if c != 0]
if bad:
    print("FAIL: ranks %s exited %s" % (bad, [codes[r] for r in bad]))
    sys.exit(1)
print("ok")
