#!/usr/bin/python3
"""api_rank.py - one rank of test_api.py (plexus-run, 2 or more ranks): the
parts of plexus.Comm around the collectives. Refusals happen before any
call reaches plexus (so the ranks stay in step, which the allreduce after
each group proves): an unsupported dtype with every op and every collective
is a TypeError, an unknown op a ValueError, non-contiguous or read-only
buffers a ValueError. Errors from plexus carry their status: one class per
PLX_ERR_* code, a Request.wait timeout (plexus.TimeoutError, still pending,
then completed), AbortedError for a request its communicator's destroy
ended and for a recv another thread's abort() ended, a MismatchError when
the ranks disagree. The attributes match the launcher's variables. Also: buffer
protocol and DLPack objects, pickled objects, split, the context manager,
prepared collectives (Comm.prepare).
"""
import array
import builtins
import os
import sys
import threading
import time

import numpy as np

import plexus
from plexus import errors

fails = []


def expect(cond, what):
    if not cond:
        fails.append(what)


def raises(exc, what, fn):
    try:
        fn()
    except exc as e:
        return e
    except Exception as e:  # noqa: BLE001 - reported as the wrong exception
        fails.append("%s: raised %s: %s, want %s" % (what, type(e).__name__, e, exc.__name__))
        return None
    fails.append("%s: did not raise %s" % (what, exc.__name__))
    return None


def in_step(comm, what):
    """The ranks are still in step: an allreduce gives the right sum."""
    x = np.full(3, comm.rank + 1, dtype=np.int64)
    comm.allreduce(x)
    expect((x == comm.size * (comm.size + 1) // 2).all(), "after %s: allreduce gave %s" % (what, x))


def status_classes():
    """One class per status of plexus.h, named after plx_err_name."""
    lib = plexus._lib.lib()
    special = {"INVALID_ARG": "InvalidArgumentError", "NOMEM": "OutOfMemoryError", "SYSTEM": "SystemCallError",
               "ABI": "ABIError", "AUTH": "AuthError"}
    for s in range(-1, -20, -1):
        name = lib.plx_err_name(s).decode()
        short = name[len("PLX_ERR_"):]
        want = special.get(short, "".join(w.capitalize() for w in short.split("_")) + "Error")
        cls = errors.BY_STATUS.get(s)
        expect(cls is not None and cls.__name__ == want and cls.status == s and getattr(plexus, want) is cls,
               "status %d (%s): class %r, want %s" % (s, name, cls, want))
    expect(lib.plx_err_name(-20).decode() not in [lib.plx_err_name(s).decode() for s in range(-1, -20, -1)],
           "plexus.h has a status -20 that errors.py does not map")
    expect(issubclass(plexus.TimeoutError, builtins.TimeoutError), "plexus.TimeoutError is not a TimeoutError")
    expect(issubclass(plexus.PeerLostError, ConnectionError), "PeerLostError is not a ConnectionError")


BAD_DTYPES = [np.bool_, np.int16, np.uint16, np.complex64, np.complex128, np.longdouble, object, ">i4", ">f8",
              "datetime64[s]", "U3"]


def refusals(comm):
    n = comm.size
    for dt in BAD_DTYPES:
        x = np.zeros(2 * n, dtype=dt)
        for op in plexus.Op:
            for name, fn in (("allreduce", lambda: comm.allreduce(x, op=op)),
                             ("iallreduce", lambda: comm.iallreduce(x, np.empty_like(x), op=op)),
                             ("reduce", lambda: comm.reduce(x, op=op)),
                             ("reduce_scatter", lambda: comm.reduce_scatter(x, op=op))):
                e = raises(TypeError, "%s(%s, %s)" % (name, np.dtype(dt), op.name), fn)
                expect(e is None or np.dtype(dt).str in str(e) or str(np.dtype(dt)) in str(e),
                       "%s(%s): the TypeError does not name the dtype: %s" % (name, np.dtype(dt), e))
        for name, fn in (("broadcast", lambda: comm.broadcast(x)), ("allgather", lambda: comm.allgather(x)),
                         ("gather", lambda: comm.gather(x)), ("scatter", lambda: comm.scatter(x, x[:2])),
                         ("alltoall", lambda: comm.alltoall(x)), ("send", lambda: comm.send(x, 0)),
                         ("recv", lambda: comm.recv(x, 0))):
            raises(TypeError, "%s(%s)" % (name, np.dtype(dt)), fn)
    x = np.zeros(4, np.float32)
    for op in ("xor", "and", 8, -1, True, None, 1.0):
        raises(ValueError, "allreduce op %r" % (op,), lambda: comm.allreduce(x, op=op))
    for op, code in (("sum", 0), ("PROD", 1), ("min", 2), (plexus.MAX, 3), ("avg", 4), (4, 4), ("band", 5),
                     (plexus.BOR, 6), ("BXOR", 7), (7, 7)):
        expect(plexus._buffers.op_code(op) == code, "op %r is not %d" % (op, code))
    # Bitwise ops take integers: a float buffer is refused by the core, naming both.
    for op, name in (("band", "band"), (plexus.BOR, "bor"), ("bxor", "bxor")):
        e = raises(plexus.PlexusError, "allreduce(float32, %s)" % name, lambda: comm.allreduce(x, op=op))
        expect(e is None or ("f32" in str(e) and name in str(e) and "integer" in str(e)),
               "allreduce(float32, %s): the refusal does not name op, dtype and why: %s" % (name, e))
    mine = lambda q: np.array([1 << q, 7 - q % 3, 0x55 ^ q, -1 - q], np.int32)  # noqa: E731
    for op, f in (("band", np.bitwise_and), ("bor", np.bitwise_or), ("bxor", np.bitwise_xor)):
        want = f.reduce([mine(q) for q in range(comm.size)])
        got = comm.allreduce(mine(comm.rank), op=op)
        expect(np.array_equal(got, want), "allreduce(int32, %s) gave %r, want %r" % (op, got, want))
    m = np.zeros((4, 4), np.float32)
    raises(ValueError, "non-contiguous sendbuf", lambda: comm.allreduce(m[:, 1]))
    raises(ValueError, "non-contiguous recvbuf", lambda: comm.allreduce(x, m[::2, :2]))
    raises(ValueError, "Fortran-order buffer", lambda: comm.allgather(np.asfortranarray(m)))
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    raises(ValueError, "read-only recvbuf", lambda: comm.allreduce(x, ro))
    raises(ValueError, "read-only in-place buffer", lambda: comm.allreduce(ro))
    raises(ValueError, "bytes as recv", lambda: comm.recv(b"1234", 0))
    raises(TypeError, "recvbuf of another dtype", lambda: comm.allreduce(x, np.zeros(4, np.float64)))
    raises(ValueError, "recvbuf of another size", lambda: comm.allreduce(x, np.zeros(5, np.float32)))
    raises(ValueError, "allgather recvbuf too small", lambda: comm.allgather(x, np.zeros(4, np.float32)))
    raises(ValueError, "reduce_scatter of a size not a multiple", lambda: comm.reduce_scatter(np.zeros(n + 1)))
    raises(ValueError, "root out of range", lambda: comm.broadcast(x, root=n))
    raises(TypeError, "an object without buffer", lambda: comm.allreduce([1.0, 2.0]))
    # A rank, root, color or tag that int() would truncate: refused, never another rank.
    raises(TypeError, "root 1.5", lambda: comm.broadcast(x, root=1.5))
    raises(TypeError, "root True", lambda: comm.broadcast(x, root=True))
    raises(TypeError, "root '0'", lambda: comm.broadcast(x, root="0"))
    raises(TypeError, "send to peer 1.0", lambda: comm.send(x, 1.0))
    raises(TypeError, "recv tag 0.5", lambda: comm.irecv(x, 0, tag=0.5))
    raises(ValueError, "send tag 2**40", lambda: comm.send(x, (comm.rank + 1) % n, tag=2 ** 40))
    raises(TypeError, "split color 0.5", lambda: comm.split(0.5))
    raises(TypeError, "allgatherv counts 1.5", lambda: comm.allgatherv(x, None, [1.5] * n))
    raises(TypeError, "init(rank=0.0)", lambda: plexus.init(rank=0.0, size=1, backend="sim"))
    e = raises(ValueError, "an override without '='", lambda: plexus.init(backend="sim", overrides=["nonsense"]))
    expect(e is None or "'nonsense' is not 'section.key=value'" in str(e), "the override's error: %s" % e)
    expect(comm.broadcast(np.ones(2, np.float32), root=np.int64(0)).sum() == 2, "root as numpy's int64")
    in_step(comm, "the refusals")


class DLPackOnly:
    """An object that only exports DLPack (as a CPU array from JAX or CuPy's
    host arrays would)."""

    def __init__(self, arr):
        self._a = arr

    def __dlpack__(self, **kw):  # numpy 2 asks for max_version, copy, ...
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def buffers(comm):
    n, r = comm.size, comm.rank
    total = n * (n + 1) // 2
    a = array.array("d", [r + 1.0] * 5)
    comm.allreduce(a)
    expect(list(a) == [float(total)] * 5, "array.array in place: %s" % list(a))
    ba = bytearray([r + 1] * 3)
    comm.allreduce(ba, op="max")
    expect(list(ba) == [n] * 3, "bytearray max: %s" % list(ba))
    out = np.zeros(4, np.uint8)
    comm.allreduce(bytes([r + 1] * 4), out)
    expect((out == total).all(), "bytes into numpy: %s" % out)
    mv = memoryview(np.full(6, r + 1, np.int32)).cast("B").cast("i")
    comm.allreduce(mv)
    expect(list(mv) == [total] * 6, "memoryview: %s" % list(mv))
    base = np.full(4, r + 1, np.float64)
    dl = DLPackOnly(base)
    out = comm.allreduce(dl, np.zeros(4))
    expect((out == total).all(), "DLPack sendbuf: %s" % out)
    if np.from_dlpack(base).flags.writeable:
        comm.allreduce(dl)
        expect((base == total).all(), "DLPack in place (the exporter's memory): %s" % base)
    else:
        e = raises(ValueError, "DLPack in place where numpy views it read-only", lambda: comm.allreduce(dl))
        expect(e is None or "DLPack" in str(e), "the read-only DLPack refusal does not say why: %s" % e)


def objects(comm):
    n, r = comm.size, comm.rank
    mine = {"rank": r, "name": "r" * (r + 1), "arr": np.arange(r + 2), "big": list(range(100 * r))}
    got = comm.allgather_object(mine)
    expect([g["rank"] for g in got] == list(range(n)), "allgather_object ranks: %s" % [g["rank"] for g in got])
    expect(all(g["name"] == "r" * (q + 1) and (g["arr"] == np.arange(q + 2)).all() and len(g["big"]) == 100 * q
               for q, g in enumerate(got)), "allgather_object values differ")
    root = n - 1
    got = comm.broadcast_object({"from": r, "x": [1, 2, 3]} if r == root else None, root=root)
    expect(got == {"from": root, "x": [1, 2, 3]}, "broadcast_object: %r" % (got,))


def splits(comm):
    n, r = comm.size, comm.rank
    sub = comm.split(r % 2, key=-r)
    with sub:
        members = [q for q in range(n) if q % 2 == r % 2]
        expect(sub.size == len(members) and sub.rank == len(members) - 1 - members.index(r),
               "split: rank %d of %d, want %d of %d" % (sub.rank, sub.size, len(members) - 1 - members.index(r),
                                                        len(members)))
        x = np.array([r], np.int64)
        sub.allreduce(x)
        expect(x[0] == sum(members), "split allreduce: %s" % x)
    expect(sub._h is None, "the with block did not destroy the split")
    raises(plexus.InvalidUsageError, "a destroyed comm", lambda: sub.allreduce(np.zeros(1)))
    none = comm.split(None if r == 0 else 1)
    expect((none is None) == (r == 0), "split color None: %r" % none)
    if none is not None:
        expect(none.size == n - 1, "split without rank 0: size %d" % none.size)
        none.destroy()
        none.destroy()  # idempotent


def timeouts(comm):
    """A wait that runs out raises plexus.TimeoutError and leaves the request
    pending; it completes once the message comes."""
    n, r = comm.size, comm.rank
    if r == 0:
        got = np.zeros(3, np.int32)
        req = comm.irecv(got, n - 1, tag=9)
        e = raises(plexus.TimeoutError, "wait(timeout=0.2) on an irecv nobody sent", lambda: req.wait(timeout=0.2))
        expect(e is None or (e.status == -5 and e.name == "PLX_ERR_TIMEOUT" and "pending" in str(e)),
               "the timeout does not carry its status and message: %r" % e)
        expect(not req.done and not req.test(), "the request is not pending after the timeout")
        comm.barrier()
        expect(req.wait(timeout=20) is got and (got == [7, 8, 9]).all(), "irecv after the timeout: %s" % got)
        expect(req.done and req.test(), "the request is not done")
    else:
        comm.barrier()
        if r == n - 1:
            comm.send(np.array([7, 8, 9], np.int32), 0, tag=9)
    # A timeout that is no number of seconds is refused before anything waits.
    req = comm.iallreduce(np.ones(2))
    raises(ValueError, "wait(timeout=-1)", lambda: req.wait(timeout=-1))
    e = raises(TypeError, "wait(timeout='5')", lambda: req.wait(timeout="5"))
    expect(e is None or "number of seconds" in str(e), "the TypeError does not say what a timeout is: %s" % e)
    e = raises(ValueError, "wait(timeout=nan)", lambda: req.wait(timeout=float("nan")))
    expect(e is None or "not a number" in str(e), "the ValueError does not say NaN: %s" % e)
    req.wait(timeout=20)
    in_step(comm, "the timeout")


def pending_destroy(comm):
    """destroy() with a request pending aborts it: its wait raises AbortedError
    at once, not after the communicator's timeout."""
    sub = comm.split(0)
    req = sub.irecv(np.zeros(2), (sub.rank + 1) % sub.size, tag=12) if sub.rank == 0 else None
    sub.barrier()
    # Every rank is out of sub's barrier before rank 0's destroy aborts sub: a barrier can end on
    # rank 0 while a peer still waits for its last message, and the abort would end it there.
    comm.barrier()
    sub.destroy()
    if req is not None:
        expect(req.done, "a request still pending after destroy")
        e = raises(plexus.AbortedError, "wait on a request its destroy aborted", lambda: req.wait(timeout=5))
        expect(e is None or e.status == -7, "AbortedError without its status: %r" % e)


def aborts(comm):
    """abort() from another thread ends this rank's pending recv with
    AbortedError at once (the peers leave the split only afterwards)."""
    sub = comm.split(0)
    if sub.rank == 0:
        timer = threading.Timer(0.3, sub.abort)
        timer.start()
        t0 = time.monotonic()
        e = raises(plexus.AbortedError, "recv on a comm another thread aborts",
                   lambda: sub.recv(np.zeros(2), 1, tag=13))
        expect(time.monotonic() - t0 < 5, "the abort took %.1f s to end the recv" % (time.monotonic() - t0))
        expect(e is None or e.status == -7, "AbortedError without its status: %r" % e)
        timer.join()
    comm.barrier()
    sub.destroy()


def mismatch(comm):
    """Different counts on a split: every rank's call raises MismatchError
    with the status and a message naming the calls."""
    sub = comm.split(0)
    try:
        e = raises(plexus.MismatchError, "allreduce with counts differing across ranks",
                   lambda: sub.allreduce(np.zeros(5 + sub.rank, np.float32)))
        expect(e is None or (e.status == -18 and e.name == "PLX_ERR_MISMATCH" and "allreduce" in str(e)),
               "MismatchError without its status or message: %r" % e)
    finally:
        sub.destroy()


def prepared(comm):
    """Comm.prepare: runs read the buffers anew and return what the call
    would; start() gives a Request; one rank's plain calls match the
    others' prepared runs; refusals; closed and destroyed."""
    P, me = comm.size, comm.rank
    x = np.zeros(5, np.float64)
    with comm.prepare("allreduce", x, op=plexus.MAX) as p:
        for r in range(3):
            x[:] = me * 10 + r
            out = comm.allreduce(x, op=plexus.MAX) if me == 0 and r == 1 else p.run()
            expect(out is x and (x == (P - 1) * 10 + r).all(), "prepared allreduce run %d: %s" % (r, x))
    b = np.zeros(4, np.int32)
    with comm.prepare("broadcast", b, root=P - 1) as p:
        b[:] = 7 if me == P - 1 else -1
        req = p.start()
        expect(req.wait() is b and (b == 7).all(), "prepared broadcast: %s" % b)
    g = comm.prepare("allgather", np.full(2, me, np.int32))
    got = g.run()
    expect(got.shape == (P, 2) and (got == np.arange(P)[:, None]).all(), "prepared allgather: %s" % got)
    g.close()
    g.close()
    raises(errors.InvalidUsageError, "run after close", g.run)
    raises(ValueError, "prepare alltoallv", lambda: comm.prepare("alltoallv", x, None, [1] * P))
    raises(TypeError, "prepare with an unknown keyword", lambda: comm.prepare("allreduce", x, opp=plexus.MAX))
    sub = comm.split(0)
    kept = sub.prepare("barrier")
    kept.run()
    sub.destroy()
    e = raises(errors.InvalidUsageError, "run after its communicator's destroy", kept.run)
    expect(e is None or "destroyed" in str(e), "run after destroy: %s" % e)
    kept.close()
    in_step(comm, "the prepared calls")


def main():
    status_classes()
    with plexus.init(timeout=30) as comm:
        env = os.environ
        expect((comm.rank, comm.size, comm.local_rank, comm.local_size, comm.name) ==
               (int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"]),
                "world") and comm.backend == env.get("PLEXUS_BACKEND", comm.backend),
               "comm %r: rank %d/%d local %d/%d name %s" % (comm, comm.rank, comm.size, comm.local_rank,
                                                            comm.local_size, comm.name))
        text = plexus.describe_bootstrap()
        expect(text.startswith("rank %d of %d (from torchrun)" % (comm.rank, comm.size)),
               "describe_bootstrap: %r" % text)
        for part in (refusals, buffers, objects, splits, timeouts, pending_destroy, aborts, mismatch, prepared):
            part(comm)
            comm.barrier()
        print("rank %d of %d on %s: %d failures" % (comm.rank, comm.size, comm.backend, len(fails)), flush=True)
    for f in fails:
        print("FAIL: " + f, flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
