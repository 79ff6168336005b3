"""comm.py - plexus.Comm: a communicator and its collectives on numpy
arrays and other buffers, through libplexus (ctypes: the GIL is released
during every call into C, so other threads run while one waits).

Buffers are borrowed, never copied: the collective reads and writes the
caller's memory (_buffers.py says what is accepted). The conventions are
the same for every collective:
- sendbuf first, recvbuf second, as in mpi4py's Allreduce(sendbuf, recvbuf).
- allreduce and reduce without recvbuf work in place (the result replaces
  sendbuf); the others allocate and return a new numpy array when recvbuf
  is None.
- IN_PLACE names the buffer that is a block of the other one: allgather and
  gather take their input from block `rank` of recvbuf (sendbuf=IN_PLACE);
  reduce_scatter and scatter leave their output in block `rank` of sendbuf
  (recvbuf=IN_PLACE); allreduce, reduce and alltoall take it for either.
- Every call returns its result buffer (None on ranks that receive
  nothing); every i-form returns a Request whose wait() returns the same.
"""
import ctypes
import inspect
import pickle
import weakref

import numpy as np

from . import _lib
from ._buffers import Buf, Op, op_code
from ._prepared import PREPARABLE, Prepared
from ._request import Request, _size_array, _whole
from .errors import InvalidUsageError, check, error

SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = Op.SUM, Op.PROD, Op.MIN, Op.MAX, Op.AVG, Op.BAND, Op.BOR, Op.BXOR
ANY_SOURCE = -1
_FNS = {}  # name -> (plx_name, plx_iname)
_PREPARE = object()  # Comm._go's nb for a call that Comm.prepare prepares



def _v_buffers(sendbuf, recvbuf, rc, rd):
    """A v-collective's send and receive Bufs; recvbuf None: a new array
    that holds every block (packed, or up to the furthest displacement)."""
    s = Buf(sendbuf, "sendbuf")
    if recvbuf is None:
        recvbuf = _new(s, (sum(rc) if rd is None else max(d + c for d, c in zip(rd, rc)),))
    r = Buf(recvbuf, "recvbuf", writable=True)
    if r.dtype != s.dtype:
        raise TypeError("recvbuf has dtype %s, sendbuf %s: plexus never converts" % (r.arr.dtype, s.arr.dtype))
    return s, r, recvbuf

class _InPlace:
    def __repr__(self):
        return "plexus.IN_PLACE"


IN_PLACE = _InPlace()


def _same(a, b, count, what):
    """b must hold count elements of a's dtype."""
    if a.dtype != b.dtype:
        raise TypeError("%s has dtype %s, sendbuf %s: plexus never converts" % (what, b.arr.dtype, a.arr.dtype))
    if b.count != count:
        raise ValueError("%s holds %d elements, this call needs %d" % (what, b.count, count))


def _new(like, shape):
    return np.empty(shape, dtype=like.arr.dtype)


class Comm:
    """A plexus communicator (made by plexus.init, split, shrink, grow or
    join). Destroy it with destroy() or by leaving a `with` block; pending
    requests are aborted then."""

    def __init__(self, handle):
        lib = _lib.lib()
        self._h = handle
        self._requests = weakref.WeakSet()
        self.rank = lib.plx_comm_rank(handle)
        self.size = lib.plx_comm_size(handle)
        self.local_rank = lib.plx_comm_local_rank(handle)
        self.local_size = lib.plx_comm_local_size(handle)
        self.backend = lib.plx_comm_backend(handle).decode()
        self.name = lib.plx_comm_name(handle).decode()

    def __repr__(self):
        state = "" if self._h else ", destroyed"
        return "<plexus.Comm %r rank %d of %d on %s%s>" % (self.name, self.rank, self.size, self.backend, state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # interpreter shutdown, or a failed destroy nobody can see
            pass

    def _handle(self):
        if not self._h:
            raise InvalidUsageError("%r: the communicator was destroyed" % self)
        return self._h

    # ---- lifecycle ---------------------------------------------------------

    def destroy(self):
        """Free the communicator (plx_comm_destroy). Requests still pending
        are aborted first and fail with plexus.AbortedError. Idempotent."""
        if not self._h:
            return
        lib = _lib.lib()
        pending = [r for r in self._requests if not r.done]
        if pending:
            lib.plx_comm_abort(self._h)
            for r in pending:
                r._finish(lib.plx_work_wait(r._work, -1))  # ends at once: aborted
        h, self._h = self._h, None
        check(lib.plx_comm_destroy(h), "destroy")

    def abort(self):
        """Make every pending and future operation fail with AbortedError
        (this rank only); safe from any thread."""
        check(_lib.lib().plx_comm_abort(self._handle()), "abort")

    def revoke(self):
        """Make every pending and future operation fail with RevokedError on
        every rank, including ranks blocked in a call; then shrink()."""
        check(_lib.lib().plx_comm_revoke(self._handle()), "revoke")

    def _new_comm(self, fn, *args):
        out = ctypes.c_void_p()
        check(fn(self._handle(), *args, ctypes.byref(out)), fn.__name__)
        return Comm(out.value) if out.value else None

    def shrink(self):
        """Collective over the survivors: a new Comm without the ranks that
        failed (renumbered in their old order). This one stays: destroy it."""
        return self._new_comm(_lib.lib().plx_comm_shrink)

    def grow(self, size):
        """Collective: a new Comm of `size` ranks, this one's first, then the
        processes that called plexus.join(), in the order they joined."""
        return self._new_comm(_lib.lib().plx_comm_grow, _whole(size, "size"))

    def split(self, color, key=None):
        """Collective: ranks with the same color form a new Comm ordered by
        (key, rank). color None takes no part and gets None."""
        return self._new_comm(_lib.lib().plx_comm_split, -1 if color is None else _whole(color, "color"),
                              self.rank if key is None else _whole(key, "key"))

    # ---- plumbing ------------------------------------------------------------

    def _go(self, nb, name, args, keep, result):
        """Run plx_<name> (blocking) or plx_i<name> (a Request), or with nb
        _PREPARE prepare it (a Prepared)."""
        if nb is _PREPARE:
            return Prepared(self, name, args, keep, result)
        fns = _FNS.get(name)
        if fns is None:
            lib = _lib.lib()
            fns = _FNS[name] = (getattr(lib, "plx_" + name), getattr(lib, "plx_i" + name))
        h = self._h or self._handle()
        if not nb:
            rc = fns[0](h, *args)
            if rc:
                raise error(rc, name)
            return result
        w = ctypes.c_void_p()
        rc = fns[1](h, *args, None, ctypes.byref(w))
        if rc:
            raise error(rc, name)
        return Request(self, w.value, keep, result)

    def _pair(self, sendbuf, recvbuf):
        """(send, recv, result) of a call whose buffers have one size; in
        place when recvbuf is None, IN_PLACE or sendbuf itself."""
        if sendbuf is IN_PLACE:
            sendbuf, recvbuf = recvbuf, None
        if recvbuf is None or recvbuf is IN_PLACE or recvbuf is sendbuf:
            s = Buf(sendbuf, "buffer", writable=True)
            return s, s, sendbuf
        s, r = Buf(sendbuf, "sendbuf"), Buf(recvbuf, "recvbuf", writable=True)
        _same(s, r, s.count, "recvbuf")
        return s, r, recvbuf

    def _blocks(self, big, what):
        """Elements per rank of a buffer holding size blocks."""
        if big.count % self.size:
            raise ValueError("%s holds %d elements, not a multiple of the communicator's size %d"
                             % (what, big.count, self.size))
        return big.count // self.size

    def _root(self, root):
        root = _whole(root, "root")
        if not 0 <= root < self.size:
            raise ValueError("root %d is not a rank of a communicator of size %d" % (root, self.size))
        return root

    # ---- collectives -----------------------------------------------------------

    def _allreduce(self, nb, sendbuf, recvbuf, op):
        s, r, res = self._pair(sendbuf, recvbuf)
        return self._go(nb, "allreduce", (s.ptr, r.ptr, s.count, s.dtype, op_code(op)), (s, r), res)

    def allreduce(self, sendbuf, recvbuf=None, op=SUM):
        """recvbuf[i] = op over ranks of sendbuf[i] (in place without recvbuf)."""
        return self._allreduce(False, sendbuf, recvbuf, op)

    def iallreduce(self, sendbuf, recvbuf=None, op=SUM):
        return self._allreduce(True, sendbuf, recvbuf, op)

    def _broadcast(self, nb, buf, root):
        b = Buf(buf, "buffer", writable=True)
        return self._go(nb, "broadcast", (b.ptr, b.count, b.dtype, self._root(root)), (b,), buf)

    def broadcast(self, buf, root=0):
        """root's buf is copied into buf on every rank."""
        return self._broadcast(False, buf, root)

    def ibroadcast(self, buf, root=0):
        return self._broadcast(True, buf, root)

    def _reduce(self, nb, sendbuf, recvbuf, op, root):
        root = self._root(root)
        if self.rank == root:
            s, r, res = self._pair(sendbuf, recvbuf)
        else:
            s = Buf(recvbuf if sendbuf is IN_PLACE else sendbuf, "sendbuf")
            r, res = None, None
        return self._go(nb, "reduce", (s.ptr, r and r.ptr, s.count, s.dtype, op_code(op), root), (s, r), res)

    def reduce(self, sendbuf, recvbuf=None, op=SUM, root=0):
        """Like allreduce, but only root gets the result (in its recvbuf, or
        its sendbuf without one); other ranks get None."""
        return self._reduce(False, sendbuf, recvbuf, op, root)

    def ireduce(self, sendbuf, recvbuf=None, op=SUM, root=0):
        return self._reduce(True, sendbuf, recvbuf, op, root)

    def _gathered(self, sendbuf, recvbuf, need_recv):
        """(send, recv, result, count) for allgather and gather: recv holds
        size blocks of send's count; IN_PLACE send is recv's block rank."""
        if sendbuf is IN_PLACE:
            if recvbuf is None:
                raise ValueError("sendbuf=IN_PLACE needs a recvbuf (its block rank is the input)")
            r = Buf(recvbuf, "recvbuf", writable=True)
            n = self._blocks(r, "recvbuf")
            s = Buf(r.arr.reshape(-1)[self.rank * n:(self.rank + 1) * n], "recvbuf block")
            return s, r, recvbuf, n
        s = Buf(sendbuf, "sendbuf")
        if not need_recv:
            return s, None, None, s.count
        if recvbuf is None:
            recvbuf = _new(s, (self.size,) + s.arr.shape)
        r = Buf(recvbuf, "recvbuf", writable=True)
        _same(s, r, s.count * self.size, "recvbuf")
        return s, r, recvbuf, s.count

    def _allgather(self, nb, sendbuf, recvbuf):
        s, r, res, n = self._gathered(sendbuf, recvbuf, True)
        return self._go(nb, "allgather", (s.ptr, r.ptr, n, s.dtype), (s, r), res)

    def allgather(self, sendbuf, recvbuf=None):
        """recvbuf (size blocks; new, shape (size,) + sendbuf's, if None) =
        every rank's sendbuf in rank order."""
        return self._allgather(False, sendbuf, recvbuf)

    def iallgather(self, sendbuf, recvbuf=None):
        return self._allgather(True, sendbuf, recvbuf)

    def _gather(self, nb, sendbuf, recvbuf, root):
        root = self._root(root)
        s, r, res, n = self._gathered(sendbuf, recvbuf, self.rank == root)
        return self._go(nb, "gather", (s.ptr, r and r.ptr, n, s.dtype, root), (s, r), res)

    def gather(self, sendbuf, recvbuf=None, root=0):
        """root's recvbuf = every rank's sendbuf in rank order (None elsewhere)."""
        return self._gather(False, sendbuf, recvbuf, root)

    def igather(self, sendbuf, recvbuf=None, root=0):
        return self._gather(True, sendbuf, recvbuf, root)

    def _scattered(self, sendbuf, recvbuf, writable_send):
        """(send, recv, result, count) for reduce_scatter and scatter at the
        root: send holds size blocks of recv's count; IN_PLACE recv is
        send's block rank."""
        s = Buf(sendbuf, "sendbuf", writable=writable_send or recvbuf is IN_PLACE)
        n = self._blocks(s, "sendbuf")
        if recvbuf is IN_PLACE:
            recvbuf = s.arr.reshape(-1)[self.rank * n:(self.rank + 1) * n]
            return s, Buf(recvbuf, "sendbuf block", writable=True), recvbuf, n
        if recvbuf is None:
            shape = s.arr.shape[1:] if s.arr.ndim > 1 and s.arr.shape[0] == self.size else (n,)
            recvbuf = _new(s, shape)
        r = Buf(recvbuf, "recvbuf", writable=True)
        _same(s, r, n, "recvbuf")
        return s, r, recvbuf, n

    def _reduce_scatter(self, nb, sendbuf, recvbuf, op):
        s, r, res, n = self._scattered(sendbuf, recvbuf, False)
        return self._go(nb, "reduce_scatter", (s.ptr, r.ptr, n, s.dtype, op_code(op)), (s, r), res)

    def reduce_scatter(self, sendbuf, recvbuf=None, op=SUM):
        """sendbuf holds size blocks; rank r's recvbuf = block r of the
        reduction (recvbuf=IN_PLACE: block r of sendbuf)."""
        return self._reduce_scatter(False, sendbuf, recvbuf, op)

    def ireduce_scatter(self, sendbuf, recvbuf=None, op=SUM):
        return self._reduce_scatter(True, sendbuf, recvbuf, op)

    def _scatter(self, nb, sendbuf, recvbuf, root):
        root = self._root(root)
        if self.rank == root:
            s, r, res, n = self._scattered(sendbuf, recvbuf, False)
        else:
            if recvbuf is None or recvbuf is IN_PLACE:
                raise ValueError("scatter: rank %d (not the root) needs a recvbuf" % self.rank)
            r = Buf(recvbuf, "recvbuf", writable=True)
            s, res, n = None, recvbuf, r.count
        return self._go(nb, "scatter", (s and s.ptr, r.ptr, n, r.dtype, root), (s, r), res)

    def scatter(self, sendbuf, recvbuf=None, root=0):
        """Block r of root's sendbuf goes to rank r's recvbuf (every rank but
        the root passes a recvbuf; sendbuf is ignored there)."""
        return self._scatter(False, sendbuf, recvbuf, root)

    def iscatter(self, sendbuf, recvbuf=None, root=0):
        return self._scatter(True, sendbuf, recvbuf, root)

    def _alltoall(self, nb, sendbuf, recvbuf):
        if recvbuf is None and sendbuf is not IN_PLACE:
            recvbuf = _new(Buf(sendbuf, "sendbuf"), np.shape(sendbuf))
        s, r, res = self._pair(sendbuf, recvbuf)
        n = self._blocks(s, "sendbuf")
        return self._go(nb, "alltoall", (s.ptr, r.ptr, n, s.dtype), (s, r), res)

    def alltoall(self, sendbuf, recvbuf=None):
        """Block j of rank i's sendbuf goes to block i of rank j's recvbuf."""
        return self._alltoall(False, sendbuf, recvbuf)

    def ialltoall(self, sendbuf, recvbuf=None):
        return self._alltoall(True, sendbuf, recvbuf)

    def _alltoallv(self, nb, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls):
        n = self.size
        sc, rc = _size_array(sendcounts, n, "sendcounts"), _size_array(recvcounts, n, "recvcounts")
        sd, rd = _size_array(sdispls, n, "sdispls"), _size_array(rdispls, n, "rdispls")
        s, r, recvbuf = _v_buffers(sendbuf, recvbuf, rc, rd)
        args = (s.ptr, sc, sd, r.ptr, rc, rd, s.dtype)
        return self._go(nb, "alltoallv", args, (s, r, sc, rc, sd, rd), recvbuf)

    def alltoallv(self, sendbuf, sendcounts, recvbuf, recvcounts, sdispls=None, rdispls=None):
        """sendcounts[j] elements from sendbuf (at sdispls[j], else packed)
        go to rank j; recvcounts[j] from rank j land in recvbuf (at
        rdispls[j], else packed). recvbuf None: a new packed array."""
        return self._alltoallv(False, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)

    def ialltoallv(self, sendbuf, sendcounts, recvbuf, recvcounts, sdispls=None, rdispls=None):
        return self._alltoallv(True, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls)

    def _allgatherv(self, nb, sendbuf, recvbuf, recvcounts, rdispls):
        n = self.size
        rc, rd = _size_array(recvcounts, n, "recvcounts"), _size_array(rdispls, n, "rdispls")
        s, r, recvbuf = _v_buffers(sendbuf, recvbuf, rc, rd)
        args = (s.ptr, s.count, r.ptr, rc, rd, s.dtype)
        return self._go(nb, "allgatherv", args, (s, r, rc, rd), recvbuf)

    def allgatherv(self, sendbuf, recvbuf, recvcounts, rdispls=None):
        """Rank j's sendbuf (recvcounts[j] elements) lands in every recvbuf at
        rdispls[j] (else packed in rank order). recvbuf None: a new array."""
        return self._allgatherv(False, sendbuf, recvbuf, recvcounts, rdispls)

    def iallgatherv(self, sendbuf, recvbuf, recvcounts, rdispls=None):
        return self._allgatherv(True, sendbuf, recvbuf, recvcounts, rdispls)

    def barrier(self):
        """Return when every rank has called it."""
        check(_lib.lib().plx_barrier(self._handle()), "barrier")

    def ibarrier(self):
        return self._go(True, "barrier", (), (), None)

    def prepare(self, name, *args, **kwargs):
        """The call comm.<name>(*args, **kwargs) checked once, for running
        again and again on the same buffers: a Prepared whose run() returns
        what the call would and start() gives its Request. name: allreduce,
        broadcast, reduce, allgather, reduce_scatter, gather, scatter,
        alltoall or barrier. Each run is an ordinary collective (the other
        ranks may make the plain call); the buffers stay borrowed until the
        Prepared is closed."""
        if name not in PREPARABLE:
            raise ValueError("%r cannot be prepared (one of %s)" % (name, ", ".join(PREPARABLE)))
        bound = inspect.signature(getattr(Comm, name)).bind(self, *args, **kwargs)
        bound.apply_defaults()
        if name == "barrier":
            return self._go(_PREPARE, "barrier", (), (), None)
        return getattr(self, "_" + name)(_PREPARE, *list(bound.arguments.values())[1:])

    # ---- point-to-point ------------------------------------------------------

    def _p2p(self, nb, name, buf, peer, tag, writable):
        b = Buf(buf, "buffer", writable=writable)
        return self._go(nb, name, (b.ptr, b.count, b.dtype, _whole(peer, "peer"), _whole(tag, "tag")), (b,), buf)

    def send(self, buf, dest, tag=0):
        """Send buf to rank dest; matched with dest's recv by (rank, tag), FIFO."""
        self._p2p(False, "send", buf, dest, tag, False)

    def isend(self, buf, dest, tag=0):
        return self._p2p(True, "send", buf, dest, tag, False)

    def recv(self, buf, source, tag=0):
        """Receive into buf (its size is the message's) from rank source
        (ANY_SOURCE where the backend can); returns buf."""
        return self._p2p(False, "recv", buf, source, tag, True)

    def irecv(self, buf, source, tag=0):
        return self._p2p(True, "recv", buf, source, tag, True)

    # ---- Python objects (pickle) ---------------------------------------------

    def allgather_object(self, obj):
        """Every rank's obj, pickled, as a list in rank order. For small
        values: each rank's pickle travels to every rank."""
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        sizes = self.allgather(np.array([data.size], dtype=np.int64)).reshape(-1)
        out = self.allgatherv(data, None, [int(n) for n in sizes])
        offs = np.concatenate(([0], np.cumsum(sizes)))
        return [pickle.loads(out[offs[i]:offs[i + 1]].tobytes()) for i in range(self.size)]

    def broadcast_object(self, obj=None, root=0):
        """root's obj, pickled, on every rank (obj is ignored elsewhere)."""
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if self.rank == self._root(root) else b""
        n = self.broadcast(np.array([len(data)], dtype=np.int64), root)
        buf = np.frombuffer(data, dtype=np.uint8).copy() if self.rank == root else np.empty(int(n[0]), np.uint8)
        self.broadcast(buf, root)
        return obj if self.rank == root else pickle.loads(buf.tobytes())
