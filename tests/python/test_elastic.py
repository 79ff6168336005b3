#!/usr/bin/python3
"""test_elastic.py BACKEND N - elastic_rank.py on N ranks started as
torchrun starts them (launch.py, since plexus-run would stop the job when a
rank dies): rank 1 is SIGKILLed while the others wait in an allreduce, and
each of them must raise PeerLostError within 2 s of the kill. Then the
survivors shrink, a newcomer joins their grow, and a revoke ends everyone's
recv within 2 s (elastic_rank.py checks those)."""
import os
import sys
import time

try:
    import numpy  # noqa: F401 - the ranks need it
except ImportError as e:
    print("SKIP: %s cannot import numpy (python3-numpy): %s" % (sys.executable, e))
    sys.exit(77)

from launch import Job

backend, n = sys.argv[1], int(sys.argv[2])
victim = 1
here = os.path.dirname(os.path.abspath(__file__))
job = Job(n, [os.path.join(here, "elastic_rank.py"), str(victim)], backend=backend, env={"PY_ELASTIC_N": str(n)})
fails = []
try:
    deadline = time.monotonic() + 60
    if not all(job.wait_for(p, "ready", deadline) for p in job.procs):
        fails.append("the ranks did not all get ready")
    else:
        time.sleep(0.5)  # the survivors are inside their allreduce
        t_kill = time.monotonic()
        job.procs[victim].kill()
        job.spawn_joiner([str(victim), "--join"])
    codes = job.wait(time.monotonic() + 90)
    for r, p in enumerate(job.procs):
        out = job.output(p)
        if r == victim:
            if codes[r] != -9:
                fails.append("the victim ended with %s, not SIGKILL" % codes[r])
            continue
        if codes[r] != 0:
            fails.append("%s exited %s" % (p.name, codes[r]))
        if p.name.startswith("joiner"):
            continue
        caught = [ln for ln in out.splitlines() if ln.startswith("caught ")]
        if not caught:
            fails.append("%s caught nothing" % p.name)
            continue
        words = caught[0].split()
        cls, t = words[1], float(words[3].rstrip(":"))
        print("%s: %s %.3f s after the kill" % (p.name, cls, t - t_kill))
        if cls != "PeerLostError":
            fails.append("%s raised %s, not PeerLostError" % (p.name, cls))
        if not 0 <= t - t_kill < 2.0:
            fails.append("%s raised %.2f s after the kill (bound: 2 s)" % (p.name, t - t_kill))
finally:
    job.stop()
    print(job.report())
    job.remove()
for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)
