"""_lib.py - find and load libplexus with ctypes.

Search order: $PLEXUS_LIBRARY (meson devenv sets it to the build tree's
library), the library this package was installed with (_config.py, written
by meson), then the system's search path.
"""
import ctypes
import ctypes.util
import os

try:
    from ._config import BINDIR, LIBPLEXUS
except ImportError:  # a source checkout that meson has not configured
    BINDIR, LIBPLEXUS = "", ""

_handle = None


def lib():
    """The loaded libplexus (ctypes.CDLL) with the prototypes we call."""
    global _handle
    if _handle is None:
        cand = [os.environ.get("PLEXUS_LIBRARY"), LIBPLEXUS, ctypes.util.find_library("plexus"), "libplexus.so.0"]
        errors = []
        for c in cand:
            if not c:
                continue
            try:
                h = ctypes.CDLL(c)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            raise OSError("cannot load libplexus: " + "; ".join(errors))
        h.plx_version.restype = ctypes.c_char_p
        h.plx_version.argtypes = []
        h.plx_last_error.restype = ctypes.c_char_p
        h.plx_err_name.restype = ctypes.c_char_p
        h.plx_err_name.argtypes = [ctypes.c_int]
        _handle = h
    return _handle
