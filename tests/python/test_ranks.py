#!/usr/bin/python3
"""test_ranks.py PLEXUS_RUN N BACKEND SCRIPT - run SCRIPT on N ranks under
plexus-run (BACKEND "auto": plexus's choice) and pass on its exit status."""
import subprocess
import sys

try:
    import numpy  # noqa: F401 - the ranks need it
except ImportError as e:
    print("SKIP: %s cannot import numpy (python3-numpy): %s" % (sys.executable, e))
    sys.exit(77)

plexus_run, n, backend, script = sys.argv[1:5]
cmd = [plexus_run, "-n", n, "--timeout", "120"] + (["--backend", backend] if backend != "auto" else [])
p = subprocess.run(cmd + [sys.executable, "-B", script], timeout=180)
sys.exit(p.returncode)
