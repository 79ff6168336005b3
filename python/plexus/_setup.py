"""_setup.py - creating communicators (init, join), asking how init would
find its launcher, and plx_finalize."""
import ctypes

from . import _lib
from ._request import _ms, _whole
from .comm import Comm
from .errors import check


def _build_options(backend=None, rank=None, size=None, local_rank=None, local_size=None, init_method=None,
                   name=None, timeout=None, config_file=None, overrides=None):
    """struct plx_comm_options from keyword arguments; returns (opts, what
    must stay alive during the call)."""
    lib = _lib.lib()
    opt = _lib.CommOptions()
    lib.plx_comm_options_init(ctypes.byref(opt))
    keep = []

    def enc(s):
        if s is None:
            return None
        b = str(s).encode()
        keep.append(b)
        return b

    opt.backend, opt.init, opt.name, opt.config_file = enc(backend), enc(init_method), enc(name), enc(config_file)
    for field, v in (("rank", rank), ("size", size), ("local_rank", local_rank), ("local_size", local_size)):
        if v is not None:
            setattr(opt, field, _whole(v, field))
    if timeout is not None:
        opt.timeout_ms = _ms(timeout, -1)
    if overrides:
        if isinstance(overrides, dict):
            items = overrides.items()
        else:
            bad = [o for o in overrides if not isinstance(o, str) or "=" not in o]
            if bad:
                raise ValueError("override %r is not 'section.key=value'" % (bad[0],))
            items = [tuple(o.split("=", 1)) for o in overrides]
        arr = (ctypes.c_char_p * (len(items) + 1))(*[enc("%s=%s" % (k, v)) for k, v in items], None)
        keep.append(arr)
        opt.overrides = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
    return opt, keep


def init(**kwargs):
    """Create a communicator (plx_comm_init): rank, size and rendezvous come
    from the launcher's variables (plexus-run, torchrun, srun, mpirun,
    PLEXUS_INIT) unless given. Keywords: backend, rank, size, local_rank,
    local_size, init_method ("env://", "tcp://host:port", "file:///dir"),
    name, timeout (seconds), config_file, overrides ({"section.key": value}).
    Returns a Comm; use it as a context manager or call destroy()."""
    opt, _keep = _build_options(**kwargs)  # _keep: the strings opt points to
    out = ctypes.c_void_p()
    check(_lib.lib().plx_comm_init(ctypes.byref(opt), ctypes.byref(out)), "init")
    return Comm(out.value)


def join(**kwargs):
    """A new process joins the next Comm.grow() of the communicator named
    name (default "world") in the job the environment names (plx_comm_join).
    Same keywords as init(); rank and size are not needed."""
    opt, _keep = _build_options(**kwargs)  # _keep: the strings opt points to
    out = ctypes.c_void_p()
    check(_lib.lib().plx_comm_join(ctypes.byref(opt), ctypes.byref(out)), "join")
    return Comm(out.value)


def describe_bootstrap(**kwargs):
    """How init(**kwargs) would find its rank, size and rendezvous here, in
    words (plx_bootstrap_describe); raises the error init would meet."""
    opt, _keep = _build_options(**kwargs)  # _keep: the strings opt points to
    buf = ctypes.create_string_buffer(4096)
    check(_lib.lib().plx_bootstrap_describe(ctypes.byref(opt), buf, len(buf)), "describe_bootstrap")
    return buf.value.decode(errors="replace")


def finalize():
    """Release process-wide resources (plx_finalize), after every
    communicator is destroyed."""
    check(_lib.lib().plx_finalize(), "finalize")
