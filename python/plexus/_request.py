"""_request.py - plexus.Request: a nonblocking operation in flight (a
plx_work handle), and the small conversions the calls share."""
import ctypes
import numbers
import operator

from . import _lib
from .errors import check, error

_TIMEOUT_DEFAULT, _TIMEOUT_INFINITE = -1, -2
_ERR_TIMEOUT = -5


def _ms(seconds, default):
    """Seconds (None: default; math.inf: no limit) as the milliseconds plexus takes."""
    if seconds is None:
        return default
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise TypeError("timeout must be a number of seconds (or None, or math.inf), not %r" % (seconds,))
    if seconds == float("inf"):
        return _TIMEOUT_INFINITE
    if seconds != seconds or seconds < 0:
        raise ValueError("timeout %r s is %s" % (seconds, "not a number" if seconds != seconds else "negative"))
    ms = int(round(seconds * 1000))
    if ms > 2 ** 63 - 1:
        raise ValueError("timeout %r s is too long (math.inf: no limit)" % (seconds,))
    return ms


def _whole(value, what, lo=-2 ** 31, hi=2 ** 31 - 1):
    """An int argument as plexus takes it: ints and numpy's integers, never
    a float or a bool that int() would quietly truncate, within [lo, hi]."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError("%s must be a whole number (an int), not %r" % (what, value))
    n = operator.index(value)
    if not lo <= n <= hi:
        raise ValueError("%s %d is out of range (%d to %d)" % (what, n, lo, hi))
    return n


def _size_array(values, n, what):
    """n non-negative ints as a C size_t array (None stays NULL)."""
    if values is None:
        return None
    values = [_whole(v, what, 0, 2 ** 63 - 1) for v in values]
    if len(values) != n:
        raise ValueError("%s must be %d non-negative counts, got %r" % (what, n, values))
    return (ctypes.c_size_t * n)(*values)


class Request:
    """A nonblocking operation in flight. Its buffers stay borrowed (and
    alive) until wait() or test() sees it finish."""
    __slots__ = ("_comm", "_work", "_keep", "_result", "_exc", "__weakref__")

    def __init__(self, comm, work, keep, result):
        self._comm, self._work, self._keep, self._result, self._exc = comm, work, keep, result, None
        comm._requests.add(self)

    def _finish(self, status):
        _lib.lib().plx_work_free(self._work)
        self._work, self._keep = None, None
        self._comm._requests.discard(self)
        if status < 0:
            self._exc = error(status)

    def _outcome(self):
        if self._exc is not None:
            raise self._exc
        return self._result

    def test(self):
        """True once the operation finished (raising its error if it failed);
        never blocks."""
        if self._work is None:
            self._outcome()
            return True
        done = ctypes.c_int(0)
        rc = _lib.lib().plx_work_test(self._work, ctypes.byref(done))
        if not done.value:
            check(rc, "test")
            return False
        self._finish(rc)
        self._outcome()
        return True

    def wait(self, timeout=None):
        """Wait for the operation (timeout in seconds; None: the
        communicator's; math.inf: no limit) and return its result buffer. plexus.TimeoutError if
        it is still running then (the request stays pending: wait again), or
        the operation's own error."""
        if self._work is None:
            return self._outcome()
        lib = _lib.lib()
        rc = lib.plx_work_wait(self._work, _ms(timeout, _TIMEOUT_DEFAULT))
        if rc == _ERR_TIMEOUT:
            exc = error(rc, "wait")
            done = ctypes.c_int(0)
            rc2 = lib.plx_work_test(self._work, ctypes.byref(done))
            if not done.value:
                raise exc
            rc = rc2
        self._finish(rc)
        return self._outcome()

    @property
    def done(self):
        """Whether wait() or test() has seen the operation finish."""
        return self._work is None

    def __del__(self):
        if self._work is not None and _lib is not None and self._comm._h:
            _lib.lib().plx_work_free(self._work)  # waits for it, with the communicator's timeout
