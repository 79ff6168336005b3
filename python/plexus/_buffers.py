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
import enum

import numpy as np


class Op(enum.IntEnum):
    """Reduction operators (enum plx_redop)."""
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


# numpy dtype name -> enum plx_dtype. bfloat16 is ml_dtypes' (numpy has none).
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "bfloat16": 7, "float32": 8, "float64": 9}
_OP_NAMES = {"sum": Op.SUM, "prod": Op.PROD, "product": Op.PROD, "min": Op.MIN, "max": Op.MAX, "avg": Op.AVG,
             "mean": Op.AVG}


def op_code(op):
    """Op.SUM, 0 or "sum" -> 0; anything else is a ValueError naming it."""
    if isinstance(op, str):
        try:
            return int(_OP_NAMES[op.lower()])
        except KeyError:
            pass
    elif isinstance(op, int) and not isinstance(op, bool) and 0 <= op < len(Op):
        return int(op)
    raise ValueError("op %r is not a plexus reduction (one of %s)" % (op, ", ".join(o.name for o in Op)))


def dtype_code(dt):
    """The plexus dtype of a numpy dtype; TypeError if plexus has none."""
    code = DTYPES.get(dt.name)
    if code is None or not dt.isnative:
        raise TypeError("dtype %s (%s) is not one plexus reduces (it takes %s, in native byte order); convert "
                        "it explicitly, e.g. with arr.astype(np.float32)" % (dt, dt.str, ", ".join(DTYPES)))
    return code


def as_array(obj, what, writable=False):
    """A numpy view of obj's memory (no copy), C-contiguous, of a plexus dtype."""
    if isinstance(obj, np.ndarray):
        arr = obj
    elif hasattr(obj, "__dlpack__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            arr = np.from_dlpack(obj)
        except (TypeError, RuntimeError, BufferError, AttributeError) as e:
            raise TypeError("%s: cannot view %s through DLPack on the CPU: %s" % (what, type(obj).__name__, e))
    else:
        try:
            arr = np.asarray(memoryview(obj))
        except TypeError:
            raise TypeError("%s: %s has neither the buffer protocol nor DLPack" % (what, type(obj).__name__))
    if not arr.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (shape %s, strides %s); plexus reads and writes the caller's "
                         "memory in place: pass np.ascontiguousarray(...) and copy back yourself"
                         % (what, arr.shape, arr.strides))
    if writable and not arr.flags.writeable:
        why = (" (numpy %s's from_dlpack views DLPack memory read-only: pass a numpy array or a writable buffer "
               "for results)" % np.__version__) if arr is not obj and not isinstance(obj, memoryview) and \
            hasattr(obj, "__dlpack__") else ""
        raise ValueError("%s is read-only; plexus writes its result there%s" % (what, why))
    dtype_code(arr.dtype)
    return arr


class Buf:
    """One argument of a call: the array (kept alive), address, count, dtype."""
    __slots__ = ("arr", "ptr", "count", "dtype")

    def __init__(self, obj, what, writable=False):
        arr = as_array(obj, what, writable)
        self.arr = arr
        self.ptr = arr.ctypes.data if arr.size else None
        self.count = arr.size
        self.dtype = DTYPES[arr.dtype.name]
