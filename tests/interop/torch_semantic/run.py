"""run.py PLEXUS_RUN PLEXUS_RANK [P...] - semantic compatibility with torch's
gloo process group: one matrix of collectives x dtypes x ops x sizes runs
through torch 1.13's gloo (P python ranks) and through plexus's tcp backend
(P ranks under plexus-run) on the same inputs, and compare.py judges the
outputs and the refusals. Default P: 2 and 3. Exit 0 when they agree, 1 if
not, 77 (skip) without torch or numpy. Run with /usr/bin/python3 (Debian's
python3-torch); every child has a timeout.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

try:
    import numpy  # noqa: F401
    import torch
    import torch.distributed as dist
except ImportError as e:
    print("SKIP: torch/numpy not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)
if not dist.is_available() or not dist.is_gloo_available():
    print("SKIP: torch %s has no gloo process group" % torch.__version__)
    sys.exit(77)

import compare  # noqa: E402
import matrix  # noqa: E402
import torch_rank  # noqa: E402

TIMEOUT = 100  # seconds per side and world size


def start_torch(outdir, cases, P, timeout, extra=()):
    """Runs P torch ranks; returns [(exit status, output)] per rank."""
    init = os.path.join(outdir, "torch-init")
    if os.path.exists(init):
        os.unlink(init)
    procs = [subprocess.Popen([sys.executable, "-B", os.path.join(HERE, "torch_rank.py"), cases, outdir, str(r), str(P),
                               init, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(P)]
    deadline, res = time.monotonic() + timeout, []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n(killed after %d s)" % timeout
        res.append((p.returncode, out))
    return res


def run_torch(outdir, cases, P):
    status = 0
    for r, (rc, out) in enumerate(start_torch(outdir, cases, P, TIMEOUT)):
        if rc:
            status = 1
            print("torch rank %d exited with %d:\n%s" % (r, rc, out))
    return status


def check_crashes(outdir, P):
    """Which of the cases that killed the process inside libgloo (torch
    1.13) still do: those torch_rank.py does not run; the others it
    runs and compare.py compares. Returns the ones that crash."""
    crashes = []
    for coll, n in torch_rank.GLOO_CRASHES:
        cases = os.path.join(outdir, "crash-cases")
        with open(cases, "w") as f:
            f.write("%s f32 - %d %d\n" % (coll, n, matrix.root_of(P)))
        res = start_torch(outdir, cases, P, 30, ["--crashes"])
        if any(rc == -signal.SIGFPE for rc, _ in res):
            print("gloo crash still there: %s of %d elements kills a rank with SIGFPE" % (coll, n))
            crashes.append((coll, n))
        else:
            print("this gloo no longer crashes on %s of %d elements (exit %s): the case is compared" % (
                coll, n, [rc for rc, _ in res]))
    return crashes


def run_plexus(outdir, cases, P, plexus_run, plexus_rank):
    p = subprocess.run([plexus_run, "-n", str(P), "--backend", "tcp", "--timeout", str(TIMEOUT), plexus_rank, cases,
                        outdir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT + 20)
    if p.returncode:
        print("plexus side exited with %d:\n%s" % (p.returncode, p.stdout))
    return p.returncode


def main():
    plexus_run, plexus_rank = sys.argv[1], sys.argv[2]
    sizes = [int(a) for a in sys.argv[3:]] or [2, 3]
    print("torch %s, numpy %s" % (torch.__version__, numpy.__version__))
    failed = 0
    # Once: the crashes do not depend on P.
    probe = tempfile.mkdtemp(prefix="plexus-semantic-crashes-")
    crashes = check_crashes(probe, sizes[0])
    shutil.rmtree(probe)
    os.environ["PLEXUS_SEMANTIC_CRASHES"] = " ".join("%s:%d" % c for c in crashes)
    for P in sizes:
        outdir = tempfile.mkdtemp(prefix="plexus-semantic-P%d-" % P)
        cases = os.path.join(outdir, "cases")
        matrix.write_cases(cases, P)
        t0 = time.monotonic()
        rc = run_torch(outdir, cases, P)
        t1 = time.monotonic()
        rc = run_plexus(outdir, cases, P, plexus_run, plexus_rank) or rc
        t2 = time.monotonic()
        if rc:
            print("P=%d: a side failed; outputs kept in %s" % (P, outdir))
            failed += 1
            continue
        fails, st, diffs, notes = compare.compare(outdir, P, print, crashes)
        t3 = time.monotonic()
        print("P=%d: %d cases; gloo %.1f s, plexus %.1f s, compare %.1f s" % (
            P, len(matrix.cases(P)), t1 - t0, t2 - t1, t3 - t2))
        print("  rank results bitwise equal: %d; within tolerance but not bitwise: %d "
              "(%d of %d elements differ in their bits; largest difference %.2f of its bound, in %s)"
              % (st["bitwise"], st["tolerance"], st["tol_elems"], st["elems"], st["worst"][0], st["worst"][1] or "-"))
        print("  both refused: %d; plexus-only results checked against torch's arithmetic: %d"
              % (st["refused_both"], st["ref_checked"]))
        for entry, whys in diffs.items():
            for who, keys in whys.items():
                print("  %s difference %s: %d cases (e.g. %s): %s" % (
                    "NEW" if entry == "NEW" else "accepted", "" if entry == "NEW" else entry, len(keys),
                    keys[0], who))
        for name, (status, why) in sorted(notes.items()):
            print("  gloo API note: dist.%s %s%s" % (name, status, ": " + why if why else ""))
        if fails:
            print("P=%d: %d failures; outputs kept in %s" % (P, fails, outdir))
            failed += 1
        else:
            shutil.rmtree(outdir)
    print("FAILED" if failed else "ok: plexus tcp and torch gloo agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
