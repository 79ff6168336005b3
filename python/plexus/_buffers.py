"""_buffers.py - what a Python object means to a plexus collective: its
address, element count and plexus dtype, without copying.

Accepted: numpy arrays, anything with the buffer protocol (bytearray,
array.array, memoryview, ...) and CPU objects that export DLPack
(__dlpack__). numpy does the reading (np.asarray / np.from_dlpack view the
caller's memory). Results are written only where numpy's view is writable:
a DLPack object is an input only, unless numpy (2.x, DLPack 1.0) says its
exporter allows writing. The memory must be C-contiguous: a non-contiguous array
is refused with a ValueError rather than copied, because a copy would
silently turn an in-place or output buffer into one nobody reads. The
element type must be one plexus reduces natively; anything else (bool,
int16, complex, float128, a non-native byte order, ...) is a TypeError,
never a cast.
"""
import ctypes
import enum

import numpy as np


class Op(enum.IntEnum):
    """Reduction operators (enum plx_redop)."""
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5  # bitwise: integer dtypes only
    BOR = 6
    BXOR = 7


# numpy dtype name -> enum plx_dtype. bfloat16 is ml_dtypes' (numpy has none).
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "bfloat16": 7, "float32": 8, "float64": 9}
_NOPS = len(Op)
_OP_NAMES = {"sum": Op.SUM, "prod": Op.PROD, "product": Op.PROD, "min": Op.MIN, "max": Op.MAX, "avg": Op.AVG,
             "mean": Op.AVG, "band": Op.BAND, "bor": Op.BOR, "bxor": Op.BXOR}


def op_code(op):
    """Op.SUM, 0 or "sum" -> 0; anything else is a ValueError naming it."""
    if isinstance(op, int) and type(op) is not bool and 0 <= op < _NOPS:
        return int(op)
    if isinstance(op, str) and op.lower() in _OP_NAMES:
        return int(_OP_NAMES[op.lower()])
    raise ValueError("op %r is not a plexus reduction (one of %s)" % (op, ", ".join(o.name for o in Op)))


def dtype_code(dt):
    """The plexus dtype of a numpy dtype; TypeError if plexus has none."""
    code = DTYPES.get(dt.name)
    if code is None or not dt.isnative:
        raise TypeError("dtype %s (%s) is not one plexus reduces (it takes %s, in native byte order); convert "
                        "it explicitly, e.g. with arr.astype(np.float32)" % (dt, dt.str, ", ".join(DTYPES)))
    return code


def as_array(obj, what):
    """A numpy view of obj's memory (no copy): numpy arrays as they are,
    DLPack exporters through np.from_dlpack, buffers through memoryview."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            return np.from_dlpack(obj)
        except (TypeError, RuntimeError, BufferError, AttributeError) as e:
            raise TypeError("%s: cannot view %s through DLPack on the CPU: %s" % (what, type(obj).__name__, e))
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        raise TypeError("%s: %s has neither the buffer protocol nor DLPack" % (what, type(obj).__name__))


def _refuse(obj, arr, what):
    """The ValueError for a layout or a read-only buffer plexus cannot use."""
    if not arr.flags.c_contiguous:
        return ValueError("%s is not C-contiguous (shape %s, strides %s); plexus reads and writes the caller's "
                          "memory in place: pass np.ascontiguousarray(...) and copy back yourself"
                          % (what, arr.shape, arr.strides))
    why = ""
    if arr is not obj and not isinstance(obj, memoryview) and hasattr(obj, "__dlpack__"):
        why = (" (numpy %s's from_dlpack views DLPack memory read-only: pass a numpy array or a writable buffer "
               "for results)" % np.__version__)
    return ValueError("%s is read-only; plexus writes its result there%s" % (what, why))


# Looked up by the dtype object itself: dtype.name is slow in numpy 1.x.
_BY_DTYPE = {np.dtype(name): code for name, code in DTYPES.items() if name != "bfloat16"}


class Buf:
    """One argument of a call: the array (kept alive while the call may
    touch it), its address, element count and plexus dtype. TypeError for a
    dtype plexus lacks, ValueError for a layout it cannot use."""
    __slots__ = ("arr", "ptr", "count", "dtype")

    def __init__(self, obj, what, writable=False):
        arr = obj if type(obj) is np.ndarray else as_array(obj, what)
        flags = arr.flags
        if not flags.c_contiguous or (writable and not flags.writeable):
            raise _refuse(obj, arr, what)
        code = _BY_DTYPE.get(arr.dtype)
        self.arr, self.count, self.dtype = arr, arr.size, dtype_code(arr.dtype) if code is None else code
        if not self.count:
            self.ptr = None
        elif flags.writeable:  # the quickest way to the address
            self.ptr = ctypes.addressof(ctypes.c_char.from_buffer(arr))
        else:
            self.ptr = arr.ctypes.data
