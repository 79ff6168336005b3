"""_prepared.py - plexus.Prepared: a collective checked once
(plx_coll_prepare) and run again and again on the same buffers, which it
keeps borrowed and alive until close(). Comm.prepare makes one."""
import ctypes

from . import _lib
from ._request import Request
from .errors import InvalidUsageError, error

# For each collective: its enum plx_coll, then where plx_coll_prepare's send,
# recv, count, dtype, op and root are in the plain call's argument tuple
# (Comm._go's args; None: the call has no such argument).
_SPEC = {
    "allreduce": (0, 0, 1, 2, 3, 4, None),
    "broadcast": (1, None, 0, 1, 2, None, 3),
    "reduce": (2, 0, 1, 2, 3, 4, 5),
    "allgather": (3, 0, 1, 2, 3, None, None),
    "reduce_scatter": (4, 0, 1, 2, 3, 4, None),
    "gather": (5, 0, 1, 2, 3, None, 4),
    "scatter": (6, 0, 1, 2, 3, None, 4),
    "alltoall": (7, 0, 1, 2, 3, None, None),
    "barrier": (8, None, None, None, None, None, None),
}
PREPARABLE = tuple(_SPEC)


class Prepared:
    """One collective with fixed buffers: run() does the call again and
    returns what it would, start() its i-form (a Request). The buffers are
    read and written anew on each run. One run at a time."""
    __slots__ = ("_comm", "_p", "_keep", "_result", "name", "__weakref__")

    def __init__(self, comm, name, args, keep, result):
        spec = _SPEC[name]

        def arg(i, default=0):
            return default if i is None else args[i]

        p = ctypes.c_void_p()
        rc = _lib.lib().plx_coll_prepare(comm._handle(), spec[0], arg(spec[1], None), arg(spec[2], None),
                                         arg(spec[3]), arg(spec[4]), arg(spec[5]), arg(spec[6]), None,
                                         ctypes.byref(p))
        if rc:
            raise error(rc, "prepare " + name)
        self._comm, self._p, self._keep, self._result, self.name = comm, p.value, keep, result, name

    def __repr__(self):
        return "<plexus.Prepared %s on %r%s>" % (self.name, self._comm, "" if self._p else ", closed")

    def _handle(self):
        if not self._p:
            raise InvalidUsageError("%r: closed" % self)
        return self._p

    def run(self):
        """The collective once, blocking; returns its result buffer."""
        rc = _lib.lib().plx_prepared_run(self._handle())
        if rc:
            raise error(rc, self.name)
        return self._result

    def start(self):
        """The collective once, nonblocking: a Request (wait before the next run)."""
        w = ctypes.c_void_p()
        rc = _lib.lib().plx_prepared_start(self._handle(), ctypes.byref(w))
        if rc:
            raise error(rc, self.name)
        return Request(self._comm, w.value, self._keep, self._result)

    def close(self):
        """Give the buffers back (plx_prepared_free). Idempotent."""
        p, self._p, self._keep = self._p, None, None
        if p:
            _lib.lib().plx_prepared_free(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if _lib is not None:
            self.close()
