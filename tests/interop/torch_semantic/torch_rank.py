"""torch_rank.py CASES OUTDIR RANK SIZE INITFILE - one rank of the torch side.

Runs every case of CASES through torch.distributed's gloo process group and
writes what this rank received to OUTDIR/torch.RANK.{idx,bin}: one index
line per case (key, "ok" or "refused", bytes, reason) and the bytes, in case
order. A case gloo refuses raises before any message is sent, on every rank
alike, so the group stays in step.
"""
import datetime
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import matrix  # noqa: E402

TORCH_DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
            "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "i8": torch.int8}
BITS_DT = {"f32": torch.int32, "f64": torch.int64, "f16": torch.int16, "bf16": torch.int16}
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}

# Cases that kill the process inside libgloo instead of raising: they are
# not run here but recorded as "crashes"; run.py checks first in a separate
# pair of processes (--crashes) which still crash, and passes those on
# (PLEXUS_SEMANTIC_CRASHES, "coll:count ..."); the others run.
#   all_gather of 0 elements: SIGFPE (an integer division by zero) in
#   torch 1.13 (2.6 and 2.14 run it); bf16 is refused before that ("Invalid
#   scalar type"), so it still runs.
GLOO_CRASHES = [("allgather", 0)]


def crashing():
    env = os.environ.get("PLEXUS_SEMANTIC_CRASHES")
    if env is None:
        return GLOO_CRASHES
    return [(c, int(n)) for c, n in (w.split(":") for w in env.split())]

_inputs = {}


def inputs(rank, coll, dtype, op, n, P):
    """This rank's input tensor: a prefix of one long generated array."""
    d = matrix.dist_of(coll, dtype, op)
    need = matrix.input_len(coll, n, P)
    k = (dtype, d)
    if k not in _inputs or len(_inputs[k]) < need:
        _inputs[k] = matrix.gen(rank, dtype, d, max(need, matrix.BIG + 8))
    return torch.from_numpy(_inputs[k][:need].copy()).view(TORCH_DT[dtype])


def raw(t, dtype):
    return t.view(BITS_DT.get(dtype, t.dtype)).numpy().tobytes()


def run(case, rank, P):
    """Returns the bytes this rank keeps, or raises what gloo raises."""
    coll, dtype, op, n, root = case
    dt = TORCH_DT[dtype]
    x = inputs(rank, coll, dtype, op, n, P)
    if coll == "allreduce":
        dist.all_reduce(x, op=OPS[op])
        return raw(x, dtype)
    if coll == "reduce":
        dist.reduce(x, dst=root, op=OPS[op])
        return raw(x, dtype) if rank == root else b""  # only the root's result is defined
    if coll == "reduce_scatter":
        out = torch.empty(n, dtype=dt)
        dist.reduce_scatter(out, [x[j * n:(j + 1) * n] for j in range(P)], op=OPS[op])
        return raw(out, dtype)
    if coll == "broadcast":
        dist.broadcast(x, src=root)
        return raw(x, dtype)
    if coll == "allgather":
        outs = [torch.empty(n, dtype=dt) for _ in range(P)]
        dist.all_gather(outs, x)
        return raw(torch.cat(outs), dtype)
    if coll == "gather":
        outs = [torch.empty(n, dtype=dt) for _ in range(P)] if rank == root else None
        dist.gather(x, outs, dst=root)
        return raw(torch.cat(outs), dtype) if rank == root else b""
    if coll == "scatter":
        out = torch.empty(n, dtype=dt)
        dist.scatter(out, [x[j * n:(j + 1) * n] for j in range(P)] if rank == root else None, src=root)
        return raw(out, dtype)
    if coll == "alltoall":
        # The equal-split tensor form: gloo 1.13 refuses the list form
        # (dist.all_to_all), recorded as an API note below.
        out = torch.empty(n * P, dtype=dt)
        dist.all_to_all_single(out, x)
        return raw(out, dtype)
    dist.barrier()
    return b""


def api_notes(rank, P):
    """Tensor-list/flat forms gloo 1.13 refuses although an equivalent form
    works; recorded so the report and the compare step can show them."""
    x = torch.ones(4)
    notes = []
    for name, fn in (("all_to_all", lambda: dist.all_to_all([torch.empty(4) for _ in range(P)],
                                                               [x.clone() for _ in range(P)])),
                     ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.empty(4 * P), x))):
        try:
            fn()
            notes.append((name, "ok", ""))
        except RuntimeError as e:
            notes.append((name, "refused", str(e).splitlines()[0]))
    return notes


def main():
    cases_path, outdir, rank, P, initfile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    run_crashes = sys.argv[6:] == ["--crashes"]
    crashes = crashing()
    dist.init_process_group("gloo", init_method="file://" + initfile, rank=rank, world_size=P,
                            timeout=datetime.timedelta(seconds=60))
    with open(cases_path) as f:
        cases = [(c, d, o, int(n), int(r)) for c, d, o, n, r in (line.split() for line in f)]
    with open(os.path.join(outdir, "torch.%d.idx" % rank), "w") as idx, \
            open(os.path.join(outdir, "torch.%d.bin" % rank), "wb") as out:
        for case in cases:
            if (case[0], case[3]) in crashes and case[1] != "bf16" and not run_crashes:
                idx.write("%s\tcrashes\t0\tkills the process in libgloo (not run)\n" % matrix.key(case))
                continue
            try:
                data, status, why = run(case, rank, P), "ok", ""
            except RuntimeError as e:
                data, status, why = b"", "refused", str(e).splitlines()[0]
            out.write(data)
            idx.write("%s\t%s\t%d\t%s\n" % (matrix.key(case), status, len(data), why))
            idx.flush()  # a crash inside gloo then shows which case it was
        for name, status, why in api_notes(rank, P):
            idx.write("api.%s\t%s\t0\t%s\n" % (name, status, why))
    dist.barrier()  # no rank leaves while another still reads from it


if __name__ == "__main__":
    main()
    # The oracle's results are written: leave without destroying the group or
    # the interpreter's teardown. On torch 2.x a gloo worker thread may still
    # hold a finished work's tensor and need the GIL to free it: at
    # destroy_process_group (the main thread joins it, holding the GIL) the
    # rank hangs, and after finalization began it aborts.
    # tests/torch/torch_teardown.py tests teardown.
    sys.stdout.flush()
    os._exit(0)
