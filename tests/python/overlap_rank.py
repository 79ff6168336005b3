#!/usr/bin/python3
"""overlap_rank.py - one rank of test_overlap.py (plexus-run -n 2): a Python
thread keeps computing while the main thread waits in plexus. One rank
waits (Request.wait of an iallreduce, then a blocking allreduce) for a peer
that joins 1 s late; a thread counts pure-Python loop iterations meanwhile.
Its rate during the wait must be at least a quarter of its rate alone
(measured just before, the main thread sleeping): were the GIL held in the
wait, the thread would make no progress at all. Then the ranks swap roles.
"""
import sys
import threading
import time

import numpy as np

import plexus

DELAY = 1.0


class Counter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.n, self.stop = 0, False

    def run(self):
        while not self.stop:
            self.n += 1


def rate(during):
    """Loop iterations per second of a thread while during() runs."""
    c = Counter()
    c.start()
    time.sleep(0.05)  # the thread is running
    n0, t0 = c.n, time.monotonic()
    during()
    n1, t1 = c.n, time.monotonic()
    c.stop = True
    c.join()
    return (n1 - n0) / (t1 - t0), t1 - t0


def main():
    fails = []
    with plexus.init(timeout=30) as comm:
        for waiter in (0, 1):
            for form in ("iallreduce + wait", "allreduce"):
                x = np.ones(1 << 14, np.float32)
                if comm.rank != waiter:
                    comm.barrier()
                    time.sleep(DELAY)
                    comm.allreduce(x)
                    continue
                alone, _ = rate(lambda: time.sleep(DELAY))
                comm.barrier()
                if form == "allreduce":
                    during, took = rate(lambda: comm.allreduce(x))
                else:
                    req = comm.iallreduce(x)
                    during, took = rate(req.wait)
                ok = (x == 2).all() and took > 0.5 * DELAY and during >= 0.25 * alone
                print("rank %d %s: waited %.2f s; the thread ran %.0f loops/s, %.0f alone (%.0f%%) %s" % (
                    comm.rank, form, took, during, alone, 100 * during / alone, "ok" if ok else "FAIL"), flush=True)
                if not ok:
                    fails.append(form)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
