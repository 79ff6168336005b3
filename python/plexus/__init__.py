"""plexus - collective communication for distributed training, from Python.

A thin layer over libplexus through ctypes (the standard library's foreign
function interface), so the package needs nothing beyond Python itself:

    >>> import plexus
    >>> plexus.version()
    '0.1.0'
    >>> [b["name"] for b in plexus.backends() if b["usable"]]
    ['tcp', 'sim']

Collectives without torch, on numpy arrays and other buffers:

    >>> with plexus.init() as comm:          # under plexus-run, torchrun, srun
    ...     x = np.ones(4, np.float32)
    ...     comm.allreduce(x, op=plexus.SUM)  # in place

plexus.Comm (plexus.init, split, shrink, grow, plexus.join) holds the
collectives; plexus.Request the nonblocking ones; failures raise
PlexusError subclasses named after plexus's status (docs/python.md). The
collectives need numpy; version(), backends() and info() do not.

plexus.torch registers the torch.distributed backend "plexus" (a C++
extension built against the installed torch).
"""
import json
import os
import shutil
import subprocess

from . import _lib
from .errors import *  # noqa: F401,F403 (PlexusError and one class per status)
from .errors import PlexusError, __all__ as _errors_all

__all__ = ["version", "backends", "info", "Comm", "Request", "Prepared", "Op", "init", "join", "describe_bootstrap",
           "finalize", "IN_PLACE", "ANY_SOURCE", "SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR",
           "BXOR"] + _errors_all


def __getattr__(name):
    """The collectives' names, imported on first use (they need numpy) and
    then kept in the module, so later lookups are plain attribute reads."""
    if name in ("Comm", "IN_PLACE", "ANY_SOURCE", "SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR", "Op"):
        from . import comm as mod
    elif name == "Request":
        from . import _request as mod
    elif name == "Prepared":
        from . import _prepared as mod
    elif name in ("init", "join", "describe_bootstrap", "finalize"):
        from . import _setup as mod
    else:
        raise AttributeError("module 'plexus' has no attribute %r" % name)
    value = globals()[name] = getattr(mod, name)
    return value


def version():
    """The version of the libplexus in use, e.g. "0.1.0"."""
    return _lib.lib().plx_version().decode()


def _plexus_info():
    """The plexus-info tool that belongs to this libplexus."""
    cand = [os.environ.get("PLEXUS_INFO"), os.path.join(_lib.BINDIR, "plexus-info") if _lib.BINDIR else None,
            shutil.which("plexus-info")]
    for c in cand:
        if c and os.access(c, os.X_OK):
            return c
    raise PlexusError("plexus-info not found (looked in %s and PATH); set PLEXUS_INFO" % _lib.BINDIR)


def info():
    """What `plexus-info --json` says, as Python objects: a dict with the
    version ("plexus"), the plugin ABI ("abi"), "backends" and "auth"."""
    out = subprocess.run([_plexus_info(), "--json"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def backends():
    """Every backend plexus knows here, best first: a list of dicts (name,
    state, usable, reason, library, collectives, dtypes, ops, flags, ...),
    exactly the "backends" of `plexus-info --json`."""
    return info()["backends"]
