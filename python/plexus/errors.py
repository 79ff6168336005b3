"""errors.py - plexus's status codes as Python exceptions.

Every failed call raises a subclass of PlexusError named after its status
(PLX_ERR_TIMEOUT -> plexus.TimeoutError, PLX_ERR_PEER_LOST ->
plexus.PeerLostError, ...). The exception carries the status (`status`, a
negative int, and `name`, "PLX_ERR_TIMEOUT") and plexus's own detailed
message (which operation, rank, peer and backend). Where Python has a
matching built-in exception the class derives from it too, so
`except TimeoutError` (the built-in) also catches plexus.TimeoutError.
"""
import builtins

from . import _lib


class PlexusError(RuntimeError):
    """A failed plexus call: `status` (negative int), `name` and the message."""
    status = None
    name = None

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status
            self.name = _lib.lib().plx_err_name(status).decode()


# (status, class name, extra built-in base) in plexus.h's order.
_TABLE = [
    (-1, "InvalidArgumentError", ValueError),
    (-2, "UnsupportedError", NotImplementedError),
    (-3, "UnavailableError", None),
    (-4, "OutOfMemoryError", MemoryError),
    (-5, "TimeoutError", builtins.TimeoutError),
    (-6, "PeerLostError", ConnectionError),
    (-7, "AbortedError", None),
    (-8, "SystemCallError", OSError),
    (-9, "InternalError", None),
    (-10, "ConfigError", None),
    (-11, "NotFoundError", LookupError),
    (-12, "ABIError", None),
    (-13, "BrokenError", None),
    (-14, "InvalidUsageError", None),
    (-15, "ProtocolError", None),
    (-16, "RemoteError", None),
    (-17, "AuthError", PermissionError),
    (-18, "MismatchError", None),
    (-19, "RevokedError", None),
]

BY_STATUS = {}
for _status, _name, _extra in _TABLE:
    _bases = (PlexusError,) + ((_extra,) if _extra else ())
    _cls = type(_name, _bases, {"status": _status, "__module__": "plexus",
                                "__doc__": "plexus status %d (see plexus.h)." % _status})
    BY_STATUS[_status] = _cls
    globals()[_name] = _cls

__all__ = ["PlexusError"] + [n for _, n, _ in _TABLE]


def error(status, what=""):
    """The exception for a failed call (status < 0), with the calling thread's
    plx_last_error() message (it must be read before any other plexus call)."""
    lib = _lib.lib()
    msg = lib.plx_last_error().decode(errors="replace")
    if not msg:
        msg = "%s: %s" % (what or "plexus", lib.plx_strerror(status).decode())
    cls = BY_STATUS.get(status, PlexusError)
    return cls("%s (%s)" % (msg, lib.plx_err_name(status).decode()), status)


def check(status, what=""):
    """Raise the matching PlexusError for a negative status; return it otherwise."""
    if status < 0:
        raise error(status, what)
    return status
