#!/usr/bin/python3
"""torch_matrix.py [P...] - the collective matrix through torch.distributed
on backend "plexus" against backend "gloo".

The case list, inputs and judging rules are those of the torch_semantic
interop test (tests/interop/torch_semantic: matrix.py, torch_rank.py,
compare.py): every collective x dtype x op x size (0, 1, P-1, 1000, about
1 MiB), the same torch calls on both backends; results must equal gloo's
(bitwise where the order of reduction cannot matter, within the rounding
bound elsewhere) and, where gloo 1.13 refuses (bf16, AVG, reduce_scatter,
an empty all_gather that kills gloo), torch's own arithmetic. Default P: 2
and 3. Exit 77 without torch, numpy or the plexus.torch extension.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

SEM = os.path.join(os.environ.get("PLEXUS_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                   "tests", "interop", "torch_semantic")
sys.path.insert(0, SEM)
sys.dont_write_bytecode = True

try:
    import numpy  # noqa: F401
    import torch.distributed as dist  # noqa: F401
except ImportError as e:
    print("SKIP: torch/numpy not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)
try:
    import plexus.torch  # noqa: F401
except ImportError as e:
    print("SKIP: plexus.torch is not built or not on PYTHONPATH: %s" % e)
    sys.exit(77)

import compare  # noqa: E402
import matrix  # noqa: E402
import run as semantic  # noqa: E402 - its start_torch runs the gloo side

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 150


def run_plexus(outdir, cases, P):
    init = os.path.join(outdir, "plexus-init")
    procs = [subprocess.Popen([sys.executable, "-B", os.path.join(HERE, "plexus_torch_rank.py"), cases, outdir,
                               str(r), str(P), init], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(P)]
    deadline, status = time.monotonic() + TIMEOUT, 0
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
        if p.returncode:
            status = 1
            print("plexus rank %d exited with %s:\n%s" % (r, p.returncode, out[-4000:]))
    return status


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [2, 3]
    failed = 0
    # As the torch_semantic test: which of gloo's known crashes this torch still has (those cases
    # are not run; the others are compared).
    probe = tempfile.mkdtemp(prefix="plexus-torch-matrix-crashes-")
    crashes = semantic.check_crashes(probe, sizes[0])
    shutil.rmtree(probe)
    os.environ["PLEXUS_SEMANTIC_CRASHES"] = " ".join("%s:%d" % c for c in crashes)
    for P in sizes:
        outdir = tempfile.mkdtemp(prefix="plexus-torch-matrix-P%d-" % P)
        cases = os.path.join(outdir, "cases")
        matrix.write_cases(cases, P)
        t0 = time.monotonic()
        rc = semantic.run_torch(outdir, cases, P)
        t1 = time.monotonic()
        rc = run_plexus(outdir, cases, P) or rc
        t2 = time.monotonic()
        if rc:
            print("P=%d: a side failed; outputs kept in %s" % (P, outdir))
            failed += 1
            continue
        fails, st, diffs, _ = compare.compare(outdir, P, print, crashes)
        print("P=%d: %d cases; gloo %.1f s, plexus %.1f s; bitwise %d, within tolerance %d, both refused %d, "
              "plexus-only checked against torch's arithmetic %d" % (
                  P, len(matrix.cases(P)), t1 - t0, t2 - t1, st["bitwise"], st["tolerance"], st["refused_both"],
                  st["ref_checked"]))
        for entry, whys in diffs.items():
            for who, keys in whys.items():
                print("  %s %s: %d cases (e.g. %s): %s" % ("NEW" if entry == "NEW" else "accepted",
                                                         "" if entry == "NEW" else entry, len(keys), keys[0], who))
        if fails:
            print("P=%d: %d failures; outputs kept in %s" % (P, fails, outdir))
            failed += 1
        else:
            shutil.rmtree(outdir)
    print("FAILED" if failed else "ok: torch on plexus and torch on gloo agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
