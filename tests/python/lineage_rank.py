#!/usr/bin/python3
"""lineage_rank.py DEPTH - one rank of test_lineage.py: a chain of DEPTH
communicators, each split from the one before, then DEPTH more, each the
shrink of the one before (nobody lost: everyone stays). Every link must
have a name of its own, no longer than a bound, and a right allreduce:
a name or store key root cut to a fixed buffer would make a generation
share its keys with the one before."""
import sys

import numpy as np

import plexus

BOUND = 200  # characters: readable in an error message


def check(comm, names, what):
    if comm.name in names:
        raise SystemExit("FAIL: %s: the name %r was taken by an earlier link" % (what, comm.name))
    names.add(comm.name)
    if len(comm.name) > BOUND:
        raise SystemExit("FAIL: %s: the name has %d characters (bound %d)" % (what, len(comm.name), BOUND))
    x = np.full(3, comm.rank + 1.0)
    comm.allreduce(x)
    want = comm.size * (comm.size + 1) / 2
    if not (x == want).all():
        raise SystemExit("FAIL: %s: allreduce gave %s, want %s" % (what, x, want))


def main():
    depth = int(sys.argv[1])
    comm = plexus.init(timeout=60)
    names = {comm.name}
    for i in range(depth):
        nxt = comm.split(0, comm.rank)
        comm.destroy()
        comm = nxt
        check(comm, names, "split %d" % (i + 1))
    for i in range(depth):
        nxt = comm.shrink()
        comm.destroy()
        comm = nxt
        check(comm, names, "shrink %d" % (i + 1))
    print("rank %d: %d links, last %r" % (comm.rank, len(names), comm.name), flush=True)
    comm.destroy()


if __name__ == "__main__":
    main()
