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
(it prints a line per tensor to stdout).

Then the same exit with a daemon thread in a blocking all_reduce that the
other rank never joins: it fails when that rank leaves. Where this one is
finalizing by then (here: an object torn down with the module sleeps
through the other's exit, as a slow teardown does), the thread's return
to Python takes the GIL then: the same terminate (gloo's too). It must
exit 0 as well.

RUNS (argv[1], default 3) runs of the first, one of the second, each killed
after RUN_TIMEOUT s.
Exit 0 if all pass, 1 if not, 77 without torch or plexus.torch.
"""
import os
import subprocess
import sys
import time

from torch_needs import free_port, require_plexus_torch

RUN_TIMEOUT = 120
NOISE = ("terminate called", "Fatal Python error")
SIZES = (16, 1 << 20)


def daemon_main(rank):
    import threading
    import types
    import torch
    import torch.distributed as dist

    def alone():
        try:
            dist.all_reduce(torch.ones(1 << 16))
            print("rank %d: the lone all_reduce returned" % rank, flush=True)
        except RuntimeError as e:
            print("rank %d: the lone all_reduce failed: %s" % (rank, str(e)[:200]), flush=True)

    if rank == 0:
        threading.Thread(target=alone, daemon=True).start()
        time.sleep(0.5)
        # In a module of its own: __main__'s globals stay with the thread's frame.
        m = types.ModuleType("slow_teardown")
        m.obj = SlowTeardown()
        sys.modules[m.__name__] = m
    else:
        time.sleep(1.5)
    print("rank %d: leaves" % rank, flush=True)
    return 0


class SlowTeardown:
    """Torn down with its module once the interpreter is finalizing: sleeps
    (the GIL released) through the other rank's exit."""
    sleep = time.sleep

    def __del__(self):
        self.sleep(3)


def rank_main(rank, port, mode):
    import torch
    import torch.distributed as dist
    import plexus.torch  # noqa: F401

    dist.init_process_group("plexus", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    if mode == "daemon":
        return daemon_main(rank)

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


def one_try(port, mode):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", str(r), str(port), mode], env=env,
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


def judge(results, mode):
    """The reasons a run failed (empty: it passed)."""
    why = []
    for r, (code, out, err) in enumerate(results):
        if code != 0:
            why.append("rank %d exit code %s" % (r, code))
        if any(n in err for n in NOISE):
            why.append("rank %d: %s" % (r, [n for n in NOISE if n in err]))
        if mode == "daemon":
            if "rank %d: leaves" % r not in out:
                why.append("rank %d did not reach its exit" % r)
            continue
        for n in SIZES:
            line = "rank %d: callback for %d elements: sum ok" % (r, n)
            if line not in out:
                why.append("rank %d: no '%s'" % (r, line))
    return why


def main():
    require_plexus_torch()
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    failed = 0
    # The daemon case is certain by construction (and sleeps through the other rank's exit): one run.
    for mode, i in [("callbacks", i) for i in range(runs)] + [("daemon", 0)]:
        t0 = time.monotonic()
        for _ in range(3):
            results = one_try(free_port(), mode)
            # The free port was taken before rank 0 bound it (other jobs on the host): again, on another.
            if "Address already in use" not in results[0][2]:
                break
        why = judge(results, mode)
        print("%s run %d: %s, %.1f s" % (mode, i, "; ".join(why) if why else "ok", time.monotonic() - t0),
              flush=True)
        if why:
            failed += 1
            for r, (_, out, err) in enumerate(results):
                print("--- rank %d stdout:\n%s--- stderr (last 1500 chars):\n%s" % (r, out, err[-1500:]))
    print("FAILED: %d run(s)" % failed if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
    sys.exit(main())
