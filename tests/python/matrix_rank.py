#!/usr/bin/python3
"""matrix_rank.py - one rank of test_matrix.py, started by plexus-run: every
collective of plexus.Comm x every numpy dtype plexus takes x every op, in
place and out of place, blocking and nonblocking, checked elementwise
against numpy's own reduction of every rank's input (each rank computes
them all: inputs are a function of the rank).

Inputs are small integers (halves for floats), so every sum, product, min,
max and bitwise result (integer dtypes only) is exact in every dtype and in any order; the result must equal
numpy's bit for bit. AVG of floats is the one inexact result: plexus may
divide before or after summing, so it must be within one unit in the last
place of numpy's mean; AVG of integers truncates toward zero (plexus.h).
Prints one line per rank; exits 1 on any mismatch.
"""
import sys

import numpy as np

import plexus

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
try:
    import ml_dtypes  # numpy has no bfloat16; ml_dtypes' is the one plexus maps
    DTYPES.append(ml_dtypes.bfloat16)
except ImportError:
    pass
OPS = list(plexus.Op)
BITWISE = (plexus.BAND, plexus.BOR, plexus.BXOR)  # integer dtypes only; in half the variants, for CI time
VARIANTS = [(inplace, nb) for inplace in (True, False) for nb in (False, True)]


def data(rank, dt, count, salt=0):
    """Rank rank's input: values in [-3, 3] (integers; halves in [-1.5, 1.5]
    for floats), [0, 3] for unsigned types."""
    i = np.arange(count, dtype=np.int64) * 5 + rank * 3 + salt
    dt = np.dtype(dt)
    if dt.kind == "u":
        return (i % 4).astype(dt)
    v = i % 7 - 3
    return (v / 2.0).astype(dt) if dt.kind not in "iu" else v.astype(dt)


def reference(op, inputs, dt):
    """numpy's reduction of the ranks' inputs, as (exact value in dt, value
    in float64 for the AVG tolerance)."""
    dt = np.dtype(dt)
    wide = np.stack([x.astype(np.float64 if dt.kind not in "iu" else np.int64) for x in inputs])
    if op == plexus.SUM:
        r = wide.sum(axis=0)
    elif op == plexus.PROD:
        r = wide.prod(axis=0)
    elif op == plexus.MIN:
        r = wide.min(axis=0)
    elif op == plexus.MAX:
        r = wide.max(axis=0)
    elif op in BITWISE:
        r = {plexus.BAND: np.bitwise_and, plexus.BOR: np.bitwise_or, plexus.BXOR: np.bitwise_xor}[op].reduce(wide)
    elif dt.kind in "iu":
        s = wide.sum(axis=0)
        r = np.sign(s) * (np.abs(s) // len(inputs))  # truncation toward zero
    else:
        r = wide.mean(axis=0)
    return r.astype(dt), r.astype(np.float64)


class Checker:
    def __init__(self, comm):
        self.comm, self.checks, self.fails = comm, 0, []

    def same(self, what, got, want, want64=None, avg_float=False):
        self.checks += 1
        got = np.asarray(got).reshape(-1)
        want = np.asarray(want).reshape(-1)
        if got.dtype != want.dtype or got.shape != want.shape:
            self.fails.append("%s: got %s%s, want %s%s" % (what, got.dtype, got.shape, want.dtype, want.shape))
            return
        if avg_float:
            ulp = np.spacing(np.abs(want).astype(got.dtype)).astype(np.float64)
            bad = np.abs(got.astype(np.float64) - want64) > ulp
        else:
            bad = got.view(np.uint8).reshape(got.size, -1) != want.view(np.uint8).reshape(want.size, -1)
            bad = bad.any(axis=1) if got.size else bad
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self.fails.append("%s: element %d is %r, numpy says %r (%d of %d differ)"
                              % (what, i, got[i], want[i], int(bad.sum()), got.size))

    def run(self, what, nb, call):
        """call(nb) runs a blocking call or returns a Request to wait for."""
        try:
            out = call(nb)
            return out.wait() if nb else out
        except plexus.PlexusError as e:
            self.fails.append("%s: %s" % (what, e))
            raise


def reductions(ck, dt, op, inplace, nb, tag):
    comm, n, r = ck.comm, ck.comm.size, ck.comm.rank
    avg_float = op == plexus.AVG and np.dtype(dt).kind not in "iu"
    for count in (7, 5003):
        x = data(r, dt, count)
        want, want64 = reference(op, [data(q, dt, count) for q in range(n)], dt)
        out = x if inplace else np.empty_like(x)
        res = ck.run("allreduce" + tag, nb, lambda b: (comm.iallreduce if b else comm.allreduce)(
            x, None if inplace else out, op=op))
        ck.same("allreduce%s count %d" % (tag, count), res, want, want64, avg_float)
        ck.same("allreduce%s count %d (buffer)" % (tag, count), out, want, want64, avg_float)
    root = (int(op) + len(tag)) % n
    x = data(r, dt, 7, 1)
    want, want64 = reference(op, [data(q, dt, 7, 1) for q in range(n)], dt)
    res = ck.run("reduce" + tag, nb, lambda b: (comm.ireduce if b else comm.reduce)(
        x, None if inplace else np.empty_like(x), op=op, root=root))
    if r == root:
        ck.same("reduce%s root %d" % (tag, root), res, want, want64, avg_float)
    elif res is not None:
        ck.same("reduce%s non-root returns None" % tag, [1], [0])
    big = data(r, dt, 7 * n, 2)
    want, want64 = reference(op, [data(q, dt, 7 * n, 2) for q in range(n)], dt)
    res = ck.run("reduce_scatter" + tag, nb, lambda b: (comm.ireduce_scatter if b else comm.reduce_scatter)(
        big, plexus.IN_PLACE if inplace else None, op=op))
    blk = slice(7 * r, 7 * (r + 1))
    ck.same("reduce_scatter%s" % tag, res, want[blk], want64[blk], avg_float)
    if inplace:
        ck.same("reduce_scatter%s block in sendbuf" % tag, big[blk], want[blk], want64[blk], avg_float)


def movers(ck, dt, inplace, nb, tag):
    """The collectives without an op: broadcast, allgather, gather, scatter,
    alltoall, alltoallv, allgatherv, send/recv."""
    comm, n, r = ck.comm, ck.comm.size, ck.comm.rank
    every = [data(q, dt, 7, 3) for q in range(n)]
    root = (len(tag) + 1) % n
    x = data(r, dt, 7, 3)
    ck.run("broadcast" + tag, nb, lambda b: (comm.ibroadcast if b else comm.broadcast)(x, root=root))
    ck.same("broadcast" + tag, x, every[root])
    x = data(r, dt, 7, 3)
    if inplace:
        g = np.zeros((n, 7), dtype=dt)
        g[r] = x
        res = ck.run("allgather" + tag, nb, lambda b: (comm.iallgather if b else comm.allgather)(plexus.IN_PLACE, g))
    else:
        res = ck.run("allgather" + tag, nb, lambda b: (comm.iallgather if b else comm.allgather)(x))
    ck.same("allgather" + tag, res, np.stack(every))
    if inplace and r == root:
        g = np.zeros((n, 7), dtype=dt)
        g[r] = x
        res = ck.run("gather" + tag, nb, lambda b: (comm.igather if b else comm.gather)(plexus.IN_PLACE, g, root))
    else:
        res = ck.run("gather" + tag, nb, lambda b: (comm.igather if b else comm.gather)(x, None, root))
    if r == root:
        ck.same("gather%s root %d" % (tag, root), res, np.stack(every))
    big = [data(q, dt, 7 * n, 4) for q in range(n)]
    if r == root:
        src = big[r].copy()
        res = ck.run("scatter" + tag, nb, lambda b: (comm.iscatter if b else comm.scatter)(
            src, plexus.IN_PLACE if inplace else None, root))
    else:
        res = ck.run("scatter" + tag, nb, lambda b: (comm.iscatter if b else comm.scatter)(
            None, np.empty(7, dt), root))
    ck.same("scatter%s root %d" % (tag, root), res, big[root][7 * r:7 * (r + 1)])
    a = big[r].copy()
    res = ck.run("alltoall" + tag, nb, lambda b: (comm.ialltoall if b else comm.alltoall)(
        a, plexus.IN_PLACE if inplace else None))
    ck.same("alltoall" + tag, res, np.concatenate([big[q][7 * r:7 * (r + 1)] for q in range(n)]))
    vectors(ck, dt, nb, tag)


def vectors(ck, dt, nb, tag):
    """alltoallv (rank i sends i + j + 1 elements to rank j), allgatherv
    (rank j contributes j + 2), send/recv around the ring."""
    comm, n, r = ck.comm, ck.comm.size, ck.comm.rank
    sc = [r + j + 1 for j in range(n)]
    rc = [j + r + 1 for j in range(n)]
    send = data(r, dt, sum(sc), 5)
    res = ck.run("alltoallv" + tag, nb, lambda b: (comm.ialltoallv if b else comm.alltoallv)(send, sc, None, rc))
    want = []
    for q in range(n):
        qs = [q + j + 1 for j in range(n)]
        off = sum(qs[:r])
        want.append(data(q, dt, sum(qs), 5)[off:off + qs[r]])
    ck.same("alltoallv" + tag, res, np.concatenate(want))
    counts = [j + 2 for j in range(n)]
    res = ck.run("allgatherv" + tag, nb, lambda b: (comm.iallgatherv if b else comm.allgatherv)(
        data(r, dt, r + 2, 6), None, counts))
    ck.same("allgatherv" + tag, res, np.concatenate([data(q, dt, q + 2, 6) for q in range(n)]))
    got = np.empty(9, dtype=dt)
    if nb:
        reqs = [comm.isend(data(r, dt, 9, 7), (r + 1) % n, tag=3), comm.irecv(got, (r - 1) % n, tag=3)]
        for q in reqs:
            q.wait()
    elif r % 2 == 0:
        comm.send(data(r, dt, 9, 7), (r + 1) % n, tag=3)
        comm.recv(got, (r - 1) % n, tag=3)
    else:
        comm.recv(got, (r - 1) % n, tag=3)
        comm.send(data(r, dt, 9, 7), (r + 1) % n, tag=3)
    ck.same("send/recv" + tag, got, data((r - 1) % n, dt, 9, 7))


def main():
    with plexus.init(timeout=30) as comm:
        ck = Checker(comm)
        try:
            for dt in DTYPES:
                for inplace, nb in VARIANTS:
                    tag = " %s %s %s" % (np.dtype(dt).name, "in place" if inplace else "out of place",
                                         "nonblocking" if nb else "blocking")
                    for op in OPS:
                        if op not in BITWISE or (np.dtype(dt).kind in "iu" and inplace != nb):
                            reductions(ck, dt, op, inplace, nb, tag + " " + op.name)
                    movers(ck, dt, inplace, nb, tag)
            comm.barrier()
            comm.ibarrier().wait()
        except plexus.PlexusError:
            pass  # recorded by Checker.run; the others fail on their own
        print("rank %d of %d on %s: %d checks over %s, %d failed" % (
            comm.rank, comm.size, comm.backend, ck.checks, ", ".join(np.dtype(d).name for d in DTYPES),
            len(ck.fails)), flush=True)
        for f in ck.fails[:10]:
            print("FAIL rank %d: %s" % (comm.rank, f), flush=True)
        return 1 if ck.fails else 0


if __name__ == "__main__":
    sys.exit(main())
