"""torch_exit_inflight.py - a rank that leaves with an operation in flight
must still exit cleanly and run what it asked to run on completion.

2 processes init "plexus" over tcp://, start all_reduce(async_op=True) on
a small tensor (started lazily) and on a large one, chain a callback on
each work's future (get_future().then, as DDP's communication hooks do),
and return from the script without waiting. The callbacks run in plexus's
completer thread and need the interpreter; one that takes the GIL after
the interpreter began finalizing is ended in a noexcept frame
(std::terminate: "terminate called without an active exception", exit
code 250 or SIGABRT), which torch's gloo does in the same script.

Each rank must exit 0, with nothing on stderr from a terminate or a fatal
Python error, and each callback must have run and seen the right sum
(it prints a line per tensor to stdout). RUNS (argv[1], default 3) runs,
each killed after RUN_TIMEOUT s. Exit 0 if all pass, 1 if not, 77 without
torch or plexus.torch.
"""
import os
import subprocess
import sys
import time

from torch_needs import free_port, require_plexus_torch

RUN_TIMEOUT = 120
NOISE = ("terminate called", "Fatal Python error")
SIZES = (16, 1 << 20)


def rank_main(rank, port):
    import torch
    import torch.distributed as dist
    import plexus.torch  # noqa: F401

    dist.init_process_group("plexus", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)

    def report(n):
        def done(fut):
            t = fut.value()[0]
            ok = bool(torch.all(t == 3.0))
            print("rank %d: callback for %d elements: %s" % (rank, n, "sum ok" if ok else "wrong sum"),
                  flush=True)
            return t
        return done

    for n in SIZES:
        t = torch.full((n,), float(rank + 1))
        dist.all_reduce(t, async_op=True).get_future().then(report(n))
    return 0  # no wait, no destroy_process_group: the interpreter's exit ends the group


def one_try(port):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", str(r), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    deadline = time.monotonic() + RUN_TIMEOUT
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            results.append((p.returncode, out, err))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            results.append(("hung", out, err))
    return results


def judge(results):
    """The reasons a run failed (empty: it passed)."""
    why = []
    for r, (code, out, err) in enumerate(results):
        if code != 0:
            why.append("rank %d exit code %s" % (r, code))
        if any(n in err for n in NOISE):
            why.append("rank %d: %s" % (r, [n for n in NOISE if n in err]))
        for n in SIZES:
            line = "rank %d: callback for %d elements: sum ok" % (r, n)
            if line not in out:
                why.append("rank %d: no '%s'" % (r, line))
    return why


def main():
    require_plexus_torch()
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    failed = 0
    for i in range(runs):
        t0 = time.monotonic()
        for _ in range(3):
            results = one_try(free_port())
            # The free port was taken before rank 0 bound it (other jobs on the host): again, on another.
            if "Address already in use" not in results[0][2]:
                break
        why = judge(results)
        print("run %d: %s, %.1f s" % (i, "; ".join(why) if why else "ok", time.monotonic() - t0), flush=True)
        if why:
            failed += 1
            for r, (_, out, err) in enumerate(results):
                print("--- rank %d stdout:\n%s--- stderr (last 1500 chars):\n%s" % (r, out, err[-1500:]))
    print("FAILED: %d run(s)" % failed if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit(main())
