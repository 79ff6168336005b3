"""_lib.py - find and load libplexus with ctypes, and declare the C
prototypes the package calls (plexus.h).

Search order: $PLEXUS_LIBRARY (meson devenv sets it to the build tree's
library), the library this package was installed with (_config.py, written
by meson), then the system's search path. The library is a ctypes.CDLL, so
every call releases the GIL while it runs in C.
"""
import ctypes
import ctypes.util
import os

try:
    from ._config import BINDIR, LIBPLEXUS
except ImportError:  # a source checkout that meson has not configured
    BINDIR, LIBPLEXUS = "", ""

_handle = None

# struct plx_comm and struct plx_work are opaque: handles are void pointers.
P = ctypes.c_void_p
PP = ctypes.POINTER(ctypes.c_void_p)
I, I64, SZ, STR = ctypes.c_int, ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
SZP = ctypes.POINTER(ctypes.c_size_t)


class StoreCallbacks(ctypes.Structure):
    """struct plx_store_callbacks: only its size matters here (never filled)."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("user", P), ("set", P), ("get", P), ("add", P), ("wait", P),
                ("check", P), ("del_", P)]


class CommOptions(ctypes.Structure):
    """struct plx_comm_options (append-only; plx_comm_options_init fills it)."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("backend", STR), ("rank", I), ("size", I), ("local_rank", I),
                ("local_size", I), ("init", STR), ("name", STR), ("timeout_ms", I64), ("config_file", STR),
                ("overrides", ctypes.POINTER(STR)), ("store", ctypes.POINTER(StoreCallbacks))]


class OpOptions(ctypes.Structure):
    """struct plx_op_options."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("mem_kind", I), ("stream", P), ("timeout_ms", I64)]


OPTS = ctypes.POINTER(CommOptions)
OOPT = ctypes.POINTER(OpOptions)

# name: (restype, argtypes)
_PROTOS = {
    "plx_version": (STR, []),
    "plx_finalize": (I, []),
    "plx_last_error": (STR, []),
    "plx_err_name": (STR, [I]),
    "plx_strerror": (STR, [I]),
    "plx_dtype_size": (SZ, [I]),
    "plx_dtype_name": (STR, [I]),
    "plx_redop_name": (STR, [I]),
    "plx_dtype_from_name": (I, [STR]),
    "plx_redop_from_name": (I, [STR]),
    "plx_comm_options_init": (None, [OPTS]),
    "plx_comm_init": (I, [OPTS, PP]),
    "plx_bootstrap_describe": (I, [OPTS, STR, SZ]),
    "plx_comm_destroy": (I, [P]),
    "plx_comm_abort": (I, [P]),
    "plx_comm_revoke": (I, [P]),
    "plx_comm_shrink": (I, [P, PP]),
    "plx_comm_grow": (I, [P, I, PP]),
    "plx_comm_join": (I, [OPTS, PP]),
    "plx_comm_split": (I, [P, I, I, PP]),
    "plx_comm_rank": (I, [P]),
    "plx_comm_size": (I, [P]),
    "plx_comm_local_rank": (I, [P]),
    "plx_comm_local_size": (I, [P]),
    "plx_comm_backend": (STR, [P]),
    "plx_comm_name": (STR, [P]),
    "plx_comm_native": (I, [P, I, I, I]),
    "plx_work_test": (I, [P, ctypes.POINTER(I)]),
    "plx_work_wait": (I, [P, I64]),
    "plx_work_free": (None, [P]),
    "plx_allreduce": (I, [P, P, P, SZ, I, I]),
    "plx_iallreduce": (I, [P, P, P, SZ, I, I, OOPT, PP]),
    "plx_broadcast": (I, [P, P, SZ, I, I]),
    "plx_ibroadcast": (I, [P, P, SZ, I, I, OOPT, PP]),
    "plx_reduce": (I, [P, P, P, SZ, I, I, I]),
    "plx_ireduce": (I, [P, P, P, SZ, I, I, I, OOPT, PP]),
    "plx_allgather": (I, [P, P, P, SZ, I]),
    "plx_iallgather": (I, [P, P, P, SZ, I, OOPT, PP]),
    "plx_reduce_scatter": (I, [P, P, P, SZ, I, I]),
    "plx_ireduce_scatter": (I, [P, P, P, SZ, I, I, OOPT, PP]),
    "plx_gather": (I, [P, P, P, SZ, I, I]),
    "plx_igather": (I, [P, P, P, SZ, I, I, OOPT, PP]),
    "plx_scatter": (I, [P, P, P, SZ, I, I]),
    "plx_iscatter": (I, [P, P, P, SZ, I, I, OOPT, PP]),
    "plx_alltoall": (I, [P, P, P, SZ, I]),
    "plx_ialltoall": (I, [P, P, P, SZ, I, OOPT, PP]),
    "plx_alltoallv": (I, [P, P, SZP, SZP, P, SZP, SZP, I]),
    "plx_ialltoallv": (I, [P, P, SZP, SZP, P, SZP, SZP, I, OOPT, PP]),
    "plx_allgatherv": (I, [P, P, SZ, P, SZP, SZP, I]),
    "plx_iallgatherv": (I, [P, P, SZ, P, SZP, SZP, I, OOPT, PP]),
    "plx_coll_prepare": (I, [P, I, P, P, SZ, I, I, I, OOPT, PP]),
    "plx_prepared_run": (I, [P]),
    "plx_prepared_start": (I, [P, PP]),
    "plx_prepared_free": (None, [P]),
    "plx_barrier": (I, [P]),
    "plx_ibarrier": (I, [P, OOPT, PP]),
    "plx_send": (I, [P, P, SZ, I, I, I]),
    "plx_isend": (I, [P, P, SZ, I, I, I, OOPT, PP]),
    "plx_recv": (I, [P, P, SZ, I, I, I]),
    "plx_irecv": (I, [P, P, SZ, I, I, I, OOPT, PP]),
}


def _load():
    cand = [os.environ.get("PLEXUS_LIBRARY"), LIBPLEXUS, ctypes.util.find_library("plexus"), "libplexus.so.0"]
    errors = []
    for c in cand:
        if not c:
            continue
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            errors.append(str(e))
    raise OSError("cannot load libplexus: " + "; ".join(errors))


def lib():
    """The loaded libplexus (ctypes.CDLL) with the prototypes we call."""
    global _handle
    if _handle is None:
        h = _load()
        for name, (res, args) in _PROTOS.items():
            f = getattr(h, name)
            f.restype, f.argtypes = res, args
        _handle = h
    return _handle
