"""compare.py - the rules that decide whether plexus and torch's gloo agree.

For each case of the matrix and each rank, the torch side (gloo) and the
plexus side either both refused, or both produced bytes that must agree:

BITWISE where the result does not depend on the reduction order:
  - every data-movement collective (broadcast, allgather, gather, scatter,
    alltoall), for every dtype: raw random bits, NaN payloads included;
  - integer dtypes, every op: wrapping integer arithmetic (and min/max) is
    associative and commutative, so any order gives the same bits;
  - float min/max: the inputs have no NaN and no -0 (see matrix.gen), so
    the result is one of the inputs whatever the order;
  - float sum/prod with 2 ranks: one operation, and IEEE addition and
    multiplication are commutative. f16 is widened to f32, combined and
    rounded to nearest-even on both sides (gloo's float16 operators,
    plexus's half kernels; torch's CPU ops, for the bf16 reference below),
    so it too is bitwise; avg adds one correctly rounded division.
WITHIN A TOLERANCE for float sum/prod/avg with 3 or more ranks, where gloo
and plexus may associate differently. With u the unit roundoff of the dtype
(f64 2^-53, f32 2^-24, f16 2^-11, bf16 2^-8, as f16/bf16 are rounded after
every step) and P ranks, each side is within (P-1)u of the exact result, so:
  sum:  |plexus - gloo| <= 2 (P-1) u * sum_r |x_r| * 1.05
  prod: |plexus - gloo| <= 2 (P-1) u * max(|plexus|, |gloo|) * 1.05
  avg:  the sum's bound / P, plus 2u |result| for the final division
(1.05 covers the second-order terms). Every rank of an allreduce must also
hold the same bits as every other rank (on each side). reduce and gather
are compared at the root only (elsewhere the result is undefined).

Where gloo refuses and plexus runs the case, plexus is compared by the same
rules with a reference computed here with torch's own CPU arithmetic in rank
order (avg: the sum divided by P, integers truncated toward zero, as torch
does), so plexus-only features still follow torch's semantics.
"""
import os

import numpy as np
import torch

import matrix
from torch_rank import BITS_DT, GLOO_CRASHES, TORCH_DT

# Accepted differences: (coll, dtype, op, count) patterns, "*" for any,
# where gloo in torch 1.13 refuses (or crashes) and plexus runs the case.
# Any other difference in what is refused fails the test, and so does an
# entry that no longer matches any difference (keep this list exact).
ACCEPTED = [
    # gloo 1.13 has no bfloat16 at all: "Invalid scalar type" for every
    # collective. plexus supports bf16 everywhere (f32 arithmetic, rounded).
    ("*", "bf16", "*", "*"),
    # torch 1.13: "Cannot use ReduceOp.AVG with Gloo" (AVG is NCCL-only).
    # plexus computes SUM / P, integers truncated toward zero.
    ("allreduce", "*", "avg", "*"),
    ("reduce", "*", "avg", "*"),
    # "ProcessGroupGloo does not support reduce_scatter". plexus has it.
    ("reduce_scatter", "*", "*", "*"),
    # all_gather of 0 elements kills the process with SIGFPE inside libgloo
    # (run.py checks that it still does); plexus returns an empty result.
    ("allgather", "*", "-", 0),
]

# Refusals of some torch releases only, each accepted where gloo refuses with
# the reason given (matched in its message), and compared as above against
# torch's arithmetic; unlike ACCEPTED, an entry need not occur (the releases
# where gloo runs those cases compare them with gloo's results).
REFUSED_BY_SOME = [
    # torch 2.14 with gloo 2025-09 (Debian sid): "Invalid scalar type" for
    # every float16 collective (torch 1.13 and 2.6 run them).
    (("*", "f16", "*", "*"), "Invalid scalar type"),
]

UNIT = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def matches(pattern, coll, dtype, op, n):
    return all(p in ("*", v) for p, v in zip(pattern, (coll, dtype, op, n)))


def accepted(coll, dtype, op, n, why):
    """The ACCEPTED entries, else the REFUSED_BY_SOME ones whose reason gloo
    gave, that cover a case gloo refuses and plexus runs."""
    return [a for a in ACCEPTED if matches(a, coll, dtype, op, n)] or \
        [pat for pat, reason in REFUSED_BY_SOME if matches(pat, coll, dtype, op, n) and reason in why]


def load(outdir, side, P):
    """{key: [(status, bytes, reason) per rank]}, plus API notes."""
    res, notes = {}, {}
    for r in range(P):
        with open(os.path.join(outdir, "%s.%d.bin" % (side, r)), "rb") as f:
            data = f.read()
        off = 0
        with open(os.path.join(outdir, "%s.%d.idx" % (side, r))) as f:
            for line in f:
                key, status, nbytes, why = line.rstrip("\n").split("\t", 3)
                if key.startswith("api."):
                    notes[key[4:]] = (status, why)
                    continue
                nbytes = int(nbytes)
                res.setdefault(key, []).append((status, data[off:off + nbytes], why))
                off += nbytes
    return res, notes


class Inputs:
    """Every rank's inputs, regenerated here (bits, per dtype and dist)."""

    def __init__(self, P):
        self.P, self.cache = P, {}

    def get(self, rank, coll, dtype, op, n):
        d = matrix.dist_of(coll, dtype, op)
        need = matrix.input_len(coll, n, self.P)
        k = (rank, dtype, d)
        if k not in self.cache or len(self.cache[k]) < need:
            self.cache[k] = matrix.gen(rank, dtype, d, max(need, matrix.BIG + 8))
        return self.cache[k][:need]


def tensor(bits, dtype):
    return torch.from_numpy(bits.copy()).view(TORCH_DT[dtype])


def bits_of(t, dtype):
    return t.view(BITS_DT.get(dtype, t.dtype)).numpy()


def reference(inp, coll, dtype, op, n, root, rank, P):
    """What rank should hold, per torch's CPU arithmetic in rank order;
    None where the rank keeps nothing."""
    if coll in ("reduce", "gather") and rank != root:
        return None
    xs = [inp.get(r, coll, dtype, op, n) for r in range(P)]
    if coll == "broadcast":
        return xs[root]
    if coll in ("allgather", "gather"):
        return np.concatenate(xs)
    if coll == "scatter":
        return xs[root][rank * n:(rank + 1) * n]
    if coll == "alltoall":
        return np.concatenate([x[rank * n:(rank + 1) * n] for x in xs])
    if coll == "barrier":
        return np.zeros(0, np.uint8)
    if coll == "reduce_scatter":
        xs = [x[rank * n:(rank + 1) * n] for x in xs]
    ts = [tensor(x, dtype) for x in xs]
    acc = ts[0].clone()
    for t in ts[1:]:
        if op in ("sum", "avg"):
            acc = acc + t
        elif op == "prod":
            acc = acc * t
        elif op == "min":
            acc = torch.minimum(acc, t)
        else:
            acc = torch.maximum(acc, t)
    if op == "avg":
        acc = acc / P if dtype in matrix.FLOATS else torch.div(acc, P, rounding_mode="trunc")
    return bits_of(acc, dtype)


def rule(coll, dtype, op, P):
    if coll in matrix.MOVING or coll == "barrier" or dtype not in matrix.FLOATS or op in ("min", "max"):
        return "bitwise"
    return "bitwise" if P == 2 else "tolerance"


def close(a, b, inp, coll, dtype, op, n, rank, P):
    """Tolerance check of two results' bits (see the module comment).
    Returns (ok, index of the worst element, its excess over the bound,
    the largest difference as a fraction of its bound)."""
    va, vb = matrix.to_f64(a, dtype), matrix.to_f64(b, dtype)
    u = UNIT[dtype]
    if op == "prod":
        bound = 2 * (P - 1) * u * np.maximum(np.abs(va), np.abs(vb)) * 1.05
    else:
        xs = [inp.get(r, coll, dtype, op, n) for r in range(P)]
        if coll == "reduce_scatter":
            xs = [x[rank * n:(rank + 1) * n] for x in xs]
        mag = sum(np.abs(matrix.to_f64(x, dtype)) for x in xs)
        bound = 2 * (P - 1) * u * mag * 1.05
        if op == "avg":
            bound = bound / P + 2 * u * np.maximum(np.abs(va), np.abs(vb))
    diff = np.abs(va - vb)
    diff[np.isnan(diff)] = np.inf  # the inputs have no NaN, so neither may the results
    excess = diff - bound
    if not len(excess):
        return True, -1, 0.0, 0.0
    i = int(np.argmax(excess))
    return bool(excess[i] <= 0), i, float(excess[i]), float(np.max(diff / bound))


def agree(a, b, inp, case, rank, P, stats):
    """Compare two results' bits by the case's rule; None if they agree,
    else a message."""
    coll, dtype, op, n, root = case
    if a.shape != b.shape:
        return "%d vs %d elements" % (len(a), len(b))
    if a.tobytes() == b.tobytes():
        stats["bitwise"] += 1
        return None
    if rule(coll, dtype, op, P) == "bitwise":
        i = int(np.nonzero(a != b)[0][0])
        return "bits differ at element %d of %d (%s vs %s; %d elements differ)" % (
            i, len(a), a[i], b[i], int(np.count_nonzero(a != b)))
    ok, i, excess, ratio = close(a, b, inp, coll, dtype, op, n, rank, P)
    if ratio > stats["worst"][0]:
        stats["worst"] = (ratio, matrix.key(case))
    stats["tolerance"] += 1
    stats["tol_elems"] += int(np.count_nonzero(a != b))
    stats["elems"] += len(a)
    if ok:
        return None
    return "element %d: %r vs %r exceeds the bound by %g" % (
        i, matrix.to_f64(a[i:i + 1], dtype)[0], matrix.to_f64(b[i:i + 1], dtype)[0], excess)


def plexus_only(p, inp, case, P, stats, log):
    """A case gloo refuses: plexus against torch's local arithmetic."""
    coll, dtype, op, n, root = case
    fails = 0
    for r in range(P):
        want = reference(inp, coll, dtype, op, n, root, r, P)
        if want is None:
            continue
        msg = agree(np.frombuffer(p[r][1], matrix.DT[dtype][2]), want, inp, case, r, P, stats)
        stats["ref_checked"] += 1
        if msg:
            log("FAIL %s P=%d rank %d: plexus vs torch reference: %s" % (matrix.key(case), P, r, msg))
            fails += 1
    return fails


def both(t, p, inp, case, P, stats, log):
    """A case both ran: plexus against gloo, rank by rank; on a mismatch the
    torch reference says which side strayed."""
    coll, dtype, op, n, root = case
    fails = 0
    for r in range(P):
        a, b = np.frombuffer(p[r][1], matrix.DT[dtype][2]), np.frombuffer(t[r][1], matrix.DT[dtype][2])
        msg = agree(a, b, inp, case, r, P, stats)
        if msg:
            want = reference(inp, coll, dtype, op, n, root, r, P)
            hint = ""
            if want is not None and len(want) == len(a):
                hint = " (torch reference matches %s)" % (
                    "plexus" if want.tobytes() == a.tobytes() else
                    "gloo" if want.tobytes() == b.tobytes() else "neither bitwise")
            log("FAIL %s P=%d rank %d: plexus vs gloo: %s%s" % (matrix.key(case), P, r, msg, hint))
            fails += 1
    return fails


def compare(outdir, P, log, crashes):
    """Judges one world size's outputs. Returns (failures, stats, the
    differences in refusals by ACCEPTED entry or "NEW", gloo API notes);
    log gets one line per problem. crashes: the (coll, count) cases that
    still kill this torch's gloo (the others of GLOO_CRASHES ran)."""
    torch_res, notes = load(outdir, "torch", P)
    plx_res, _ = load(outdir, "plexus", P)
    inp = Inputs(P)
    fails = 0
    stats = {"bitwise": 0, "tolerance": 0, "tol_elems": 0, "elems": 0, "refused_both": 0,
             "ref_checked": 0, "worst": (0.0, "")}
    diffs = {}  # ACCEPTED entry or "NEW" -> {what differs: [case keys]}
    for case in matrix.cases(P):
        coll, dtype, op, n, root = case
        k = matrix.key(case)
        t, p = torch_res.get(k), plx_res.get(k)
        if t is None or p is None or len(t) != P or len(p) != P:
            log("FAIL %s P=%d: missing from the %s side" % (k, P, "torch" if t is None else "plexus"))
            fails += 1
            continue
        t_ok = {s == "ok" for s, _, _ in t}
        p_ok = {s == "ok" for s, _, _ in p}
        if len(t_ok) > 1 or len(p_ok) > 1:
            log("FAIL %s P=%d: ranks disagree on refusing (torch %s, plexus %s)" % (k, P, t_ok, p_ok))
            fails += 1
            continue
        t_ok, p_ok = t_ok.pop(), p_ok.pop()
        if t_ok != p_ok:
            who = "gloo %s (%s), plexus runs it" % (t[0][0], t[0][2]) if p_ok else \
                "plexus refuses (%s), gloo runs it" % p[0][2]
            acc = accepted(coll, dtype, op, n, t[0][2]) if p_ok else []
            for a in acc or ["NEW"]:
                diffs.setdefault(a, {}).setdefault(who, []).append(k)
            if not acc:
                log("FAIL %s P=%d: new difference: %s" % (k, P, who))
                fails += 1
                continue
            fails += plexus_only(p, inp, case, P, stats, log)
        elif not t_ok:
            stats["refused_both"] += 1
        else:
            fails += both(t, p, inp, case, P, stats, log)
        # allreduce: every rank holds the same bits, on each side.
        for side, res, ran in (("gloo", t, t_ok), ("plexus", p, p_ok)):
            if coll == "allreduce" and ran and len({d for _, d, _ in res}) > 1:
                log("FAIL %s P=%d: %s ranks hold different results" % (k, P, side))
                fails += 1
    for a in ACCEPTED:
        if (a[0], a[3]) in GLOO_CRASHES and (a[0], a[3]) not in crashes:
            continue  # this gloo no longer crashes there: the case was compared
        if a not in diffs:
            log("FAIL P=%d: accepted difference %s no longer occurs: update ACCEPTED" % (P, a,))
            fails += 1
    return fails, stats, diffs, notes
