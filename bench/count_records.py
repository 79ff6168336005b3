#!/usr/bin/env python3
"""count_records.py BUILD [BYTES] - request records per transfer and mutex
locks per operation of a 2-rank allreduce of BYTES (default 8) on tcp
(BACKEND=shm: shm), counted by valgrind's callgrind (exact call counts, no
change to the code under test).

Each rank runs plexus-bench under callgrind; per rank, the calls of
  - tcp's isend and irecv (plugins/tcp/plugin.c): the transfers,
  - the core's a_isend and a_irecv (core/comm/p2p.c): the core's record of a
    transfer (one from its pool each),
  - tcp__req_get (plugins/tcp/pool.c): a request record of tcp's own,
  - malloc,
  - pthread_mutex_lock, all of them and those called from the diagnosis
    (core/diag/ledger.c, fingerprint.c, diag_hooks.c),
and the instructions each rank ran (callgrind's total; a figure the
machine's load does not move).
Two runs of N and 2N operations: the difference over N leaves set-up and
teardown out. Records per transfer = (core records + tcp records) /
transfers. N (environment) sets the operations, default 200.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# (file name ending, function) -> column
COUNTED = {
    ("plugins/tcp/plugin.c", "isend"): "transfers",
    ("plugins/tcp/plugin.c", "irecv"): "transfers",
    ("core/comm/p2p.c", "a_isend"): "core_records",
    ("core/comm/p2p.c", "a_irecv"): "core_records",
    ("plugins/tcp/pool.c", "tcp__req_get"): "tcp_records",
    (None, "malloc"): "mallocs",
}
DIAG_FILES = ("core/diag/ledger.c", "core/diag/fingerprint.c", "core/diag/diag_hooks.c")
LOCK = re.compile(r"pthread_mutex_lock(@.*)?$")


def calls_by_function(path):
    """Sum the calls= lines of a callgrind file by (file, function) of the
    callee; ("", "locks") and ("", "diag_locks") count the mutex locks, all and
    those the diagnosis files call; ("", "instructions") is the total."""
    names = {"fl": {}, "fn": {}}
    callee_file = callee_fn = cur_file = fn_file = None
    totals = {("", "locks"): 0, ("", "diag_locks"): 0, ("", "instructions"): 0}

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), "?")

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            key, _, val = line.partition("=")
            if key in ("fl", "fi", "fe"):
                cur_file = name("fl", val)
                if key == "fl":
                    callee_file = fn_file = cur_file
            elif key == "fn":
                name("fn", val)
                callee_file = cur_file
            elif key in ("cfi", "cfl"):
                callee_file = name("fl", val)
            elif key == "cfn":
                callee_fn = name("fn", val)
            elif key == "calls":
                n = int(val.split()[0])
                k = (callee_file or "", callee_fn or "")
                totals[k] = totals.get(k, 0) + n
                if LOCK.search(callee_fn or ""):
                    totals[("", "locks")] += n
                    if (fn_file or "").endswith(DIAG_FILES):
                        totals[("", "diag_locks")] += n
                callee_file = cur_file
            elif key in ("summary", "totals") or line.startswith(("summary:", "totals:")):
                totals[("", "instructions")] = int(line.split(":", 1)[1].split()[0])
    return totals


def columns(totals):
    out = {c: 0 for c in set(COUNTED.values())}
    for k in ("locks", "diag_locks", "instructions"):
        out[k] = totals[("", k)]
    for (fl, fn), n in totals.items():
        for (want_fl, want_fn), col in COUNTED.items():
            if fn == want_fn and (want_fl is None or fl.endswith(want_fl)):
                out[col] += n
    return out


def run(build, nbytes, ops, folder):
    env = dict(os.environ, PLEXUS_TCP_BUSY_POLL_US="0", PLEXUS_CONFIG_PATH=os.path.join(build, "devconfig"))
    cmd = [os.path.join(build, "tools", "plexus-run"), "-n", "2", "--timeout", "600",
           "valgrind", "--tool=callgrind", "--dump-instr=no", "--compress-strings=yes",
           "--callgrind-out-file=" + os.path.join(folder, "cg.%p"),
           os.path.join(build, "tools", "plexus-bench"), "--backend", os.environ.get("BACKEND", "tcp"), "-b", str(nbytes), "-e", str(nbytes),
           "-n", str(ops), "-w", "0"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    files = sorted(glob.glob(os.path.join(folder, "cg.*")))
    if p.returncode != 0 or len(files) != 2:
        sys.exit("run of %d ops failed (rc %d, %d profiles):\n%s" % (ops, p.returncode, len(files), p.stdout[-3000:]))
    return [columns(calls_by_function(f)) for f in files]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    nbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    n = int(os.environ.get("N", "200"))
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        short, long_ = run(build, nbytes, n, a), run(build, nbytes, 2 * n, b)
    # plexus-bench runs each size out of place and in place: 2 ops per iteration.
    ops = 2 * n
    print("%s, %d B allreduce on %s, 2 ranks, per operation per rank (difference of %d and %d iterations):"
          % (build, nbytes, os.environ.get("BACKEND", "tcp"), 2 * n, n))
    for rank in range(2):
        d = {k: (long_[rank][k] - short[rank][k]) / ops for k in short[rank]}
        per = (d["core_records"] + d["tcp_records"]) / d["transfers"] if d["transfers"] else float("nan")
        print("  rank %d: transfers %.2f, core records %.2f, tcp records %.2f, mallocs %.2f -> %.2f records per "
              "transfer; mutex locks %.2f (diagnosis %.2f); instructions %.0f"
              % (rank, d["transfers"], d["core_records"], d["tcp_records"], d["mallocs"], per, d["locks"],
                 d["diag_locks"], d["instructions"]))


if __name__ == "__main__":
    main()
