#!/usr/bin/python3
"""elastic_rank.py VICTIM [--join] - one rank of test_elastic.py. The ranks
warm up, print "ready", and call an allreduce that rank VICTIM never joins:
test_elastic.py SIGKILLs it meanwhile, and every other rank must raise
PeerLostError (printed with its time.monotonic(), which the driver compares
with the kill's). The survivors shrink, check an allreduce, and grow back to
the old size with a newcomer (a process started with --join). On the grown
communicator rank 0 revokes while the others wait in recv: they must raise
RevokedError within 2 s of the revoke; a shrink of the revoked communicator
keeps everyone, and its allreduce is checked too.
"""
import os
import sys
import time

import numpy as np

import plexus

fails = []


def expect(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def check_sum(comm, what):
    x = np.full(5, comm.rank + 1, np.int64)
    comm.allreduce(x)
    expect((x == comm.size * (comm.size + 1) // 2).all(), "%s: allreduce over %d ranks gave %s" % (what, comm.size, x))


def survive_kill(comm, victim):
    comm.allreduce(np.ones(1000))
    comm.barrier()
    print("ready", flush=True)
    if comm.rank == victim:
        time.sleep(120)  # SIGKILLed here by the driver
    try:
        comm.allreduce(np.ones(1 << 16, np.float32))
        expect(False, "allreduce returned although rank %d is gone" % victim)
    except plexus.PlexusError as e:
        print("caught %s at %.6f: %s" % (type(e).__name__, time.monotonic(), e), flush=True)
    old = comm.rank
    shrunk = comm.shrink()
    comm.destroy()
    want = old - (old > victim)
    expect(shrunk.rank == want and shrunk.size == comm.size - 1,
           "shrink: rank %d of %d, want %d of %d" % (shrunk.rank, shrunk.size, want, comm.size - 1))
    check_sum(shrunk, "after the shrink")
    print("shrunk to %d" % shrunk.size, flush=True)
    grown = shrunk.grow(comm.size)
    shrunk.destroy()
    return grown


def revoke_and_recover(comm):
    if comm.rank == 0:
        time.sleep(0.5)
        t_rev = time.monotonic()
        comm.revoke()
    else:
        t_rev = None
        try:
            comm.recv(np.zeros(4), 0, tag=11)
            expect(False, "recv returned on a revoked communicator")
        except plexus.RevokedError:
            t_err = time.monotonic()
        except plexus.PlexusError as e:
            t_err = time.monotonic()
            expect(False, "recv on a revoked communicator raised %s, not RevokedError: %s" % (type(e).__name__, e))
    after = comm.shrink()
    comm.destroy()
    expect(after.size == comm.size, "the shrink of a revoked communicator (nobody dead) has %d ranks" % after.size)
    t_rev = after.broadcast_object(t_rev, root=0)
    if after.rank:
        expect(t_err - t_rev < 2.0, "RevokedError came %.2f s after the revoke" % (t_err - t_rev))
        print("revoked: RevokedError after %.3f s" % (t_err - t_rev), flush=True)
    check_sum(after, "after the revoke")
    return after


def main():
    victim = int(sys.argv[1])
    if "--join" in sys.argv:
        grown = plexus.join(timeout=30)
        print("joined as rank %d of %d" % (grown.rank, grown.size), flush=True)
    else:
        grown = survive_kill(plexus.init(timeout=30), victim)
    expect(grown.size == int(os.environ["PY_ELASTIC_N"]), "grown size %d" % grown.size)
    check_sum(grown, "after the grow")
    with revoke_and_recover(grown):
        pass
    print("done: %d failures" % len(fails), flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
