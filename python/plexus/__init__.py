"""plexus - collective communication for distributed training, from Python.

A thin layer over libplexus through ctypes (the standard library's foreign
function interface), so the package needs nothing beyond Python itself:

    >>> import plexus
    >>> plexus.version()
    '0.1.0'
    >>> [b["name"] for b in plexus.backends() if b["usable"]]
    ['tcp', 'sim']

plexus.torch registers the torch.distributed backend "plexus" (a C++
extension built against the installed torch).
"""
import json
import os
import shutil
import subprocess

from . import _lib

__all__ = ["version", "backends", "info", "PlexusError"]


class PlexusError(RuntimeError):
    """A failed plexus call: the status name and plexus's own message."""


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
