"""matrix.py - the case list and the deterministic inputs both sides use.

The case list is written to a file that the torch ranks and the plexus ranks
(plexus_rank.c) read line by line, so both run the same cases in the same
order. Inputs are a function of (rank, dtype, distribution, index) only, and
plexus_rank.c computes the same function in C; the bitwise comparison of the
data-movement collectives checks that the two agree.
"""
import numpy as np

# name, bytes, numpy type holding the raw bits, significand bits (floats)
DTYPES = [
    ("f32", 4, np.int32, 24),
    ("f64", 8, np.int64, 53),
    ("f16", 2, np.int16, 11),
    ("bf16", 2, np.int16, 8),
    ("i32", 4, np.int32, 0),
    ("i64", 8, np.int64, 0),
    ("u8", 1, np.uint8, 0),
    ("i8", 1, np.int8, 0),
]
DT = {d[0]: d for d in DTYPES}
FLOATS = ("f32", "f64", "f16", "bf16")
OPS = ["sum", "prod", "min", "max", "avg"]
REDUCING = ["allreduce", "reduce", "reduce_scatter"]
MOVING = ["broadcast", "allgather", "gather", "scatter", "alltoall"]
# Collectives whose count is per block of P blocks (buffer = count * P).
BLOCKED = ("reduce_scatter", "allgather", "gather", "scatter", "alltoall")
DIST = {"raw": 0, "sum": 1, "prod": 2}
BIG = 1 << 20  # "1 MiB-ish": the whole buffer, like plexus-bench's sizes


def root_of(P):
    return P - 1  # not 0, so a root mix-up shows


def counts(coll, dtype, P):
    """Element counts (per block for BLOCKED): 0, 1, P-1, 1000 and about
    1 MiB of buffer, one more than a round number so it splits unevenly."""
    big = BIG // DT[dtype][1] // (P if coll in BLOCKED else 1) + 1
    out = []
    for n in (0, 1, P - 1, 1000, big):
        if n not in out:
            out.append(n)
    return out


def cases(P):
    """(coll, dtype, op, count, root) in the order both sides run them."""
    out = []
    for dtype, *_ in DTYPES:
        for coll in REDUCING:
            for op in OPS:
                for n in counts(coll, dtype, P):
                    out.append((coll, dtype, op, n, root_of(P)))
        for coll in MOVING:
            for n in counts(coll, dtype, P):
                out.append((coll, dtype, "-", n, root_of(P)))
    out.append(("barrier", "u8", "-", 0, 0))
    return out


def key(case):
    return "%s.%s.%s.%d" % case[:4]


def dist_of(coll, dtype, op):
    """Integers always take raw random bits (sums and products wrap); floats
    take raw bits when only moved, else values chosen per operation."""
    if coll in MOVING or dtype not in FLOATS:
        return "raw"
    return "prod" if op == "prod" else "sum"


def input_len(coll, n, P):
    return n * P if coll in ("reduce_scatter", "scatter", "alltoall") else n


def _splitmix(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def gen(rank, dtype, dist, n):
    """Raw bits (numpy array of DT[dtype][2]) of n inputs of rank.

    h = splitmix64(((rank + 1) << 32 | i) ^ (salt << 56)), salt = 8 * dtype
    index + distribution. raw: the low bytes of h. Floats, b significand bits:
      sum:  k = (h >> (64 - b)) - 2^(b-1), value k * 2^-(b-1) * 2^-(h & 3)
      prod: m = h >> (65 - b), value (-1)^(h & 1) * (1 + m * 2^-(b-1)) * 2^-((h >> 1) & 1)
    Every value is exact in its type and normal (no NaN, inf, -0 or
    subnormal), so min/max are order-free and products stay in [1/8, 8]
    for three ranks. Sum inputs span four binades, so partial sums round
    and the order of a 3-rank sum shows in the last bits.
    """
    name, size, bits_t, b = DT[dtype]
    salt = np.uint64(8 * [d[0] for d in DTYPES].index(dtype) + DIST[dist])
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = _splitmix((np.uint64(rank + 1) << np.uint64(32) | i) ^ (salt << np.uint64(56)))
    if dist == "raw" or not b:
        return h.view(np.uint8).reshape(-1, 8)[:, :size].copy().view(bits_t).reshape(-1)
    if dist == "sum":
        v = (h >> np.uint64(64 - b)).astype(np.int64) - (1 << (b - 1))
        v = v.astype(np.float64) * 2.0 ** -(b - 1) / (1 << (h & np.uint64(3))).astype(np.float64)
    else:
        m = (h >> np.uint64(65 - b)).astype(np.float64)
        v = (1.0 + m * 2.0 ** -(b - 1)) * np.where((h >> np.uint64(1)) & np.uint64(1), 0.5, 1.0)
        v = np.where(h & np.uint64(1), -v, v)
    return to_bits(v, dtype)


def to_bits(v, dtype):
    """float64 values exact in dtype -> raw bits of dtype."""
    if dtype == "f64":
        return v.view(np.int64)
    if dtype == "f32":
        return v.astype(np.float32).view(np.int32)
    if dtype == "f16":
        return v.astype(np.float16).view(np.int16)
    return (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(np.int16)


def to_f64(bits, dtype):
    """Raw bits -> float64 values (exact for every dtype but i64/u64 extremes)."""
    if dtype == "f64":
        return bits.view(np.float64)
    if dtype == "f32":
        return bits.view(np.float32).astype(np.float64)
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    if dtype == "bf16":
        with np.errstate(invalid="ignore"):  # NaN bits convert quietly
            return (bits.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return bits.astype(np.float64)


def write_cases(path, P):
    with open(path, "w") as f:
        for c in cases(P):
            f.write("%s %s %s %d %d\n" % c)
