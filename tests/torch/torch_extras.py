#!/usr/bin/python3
"""torch_extras.py - what torch_matrix.py does not cover, on backend
"plexus", with P processes (default 3) and each of torch's init methods:

  - init_method env:// (MASTER_ADDR/PORT, torch's TCPStore hosted by rank 0),
    tcp://, file:// -- each a full run of the checks below;
  - all_to_all_single with uneven split sizes, zeros included, rows of 3;
    all_to_all with tensor lists of uneven sizes;
  - _allgather_base and _reduce_scatter_base (flat tensors, FSDP's calls)
    against the expected values;
  - send/recv with tags (two tags in flight, received in the other order),
    recv from any source (the sender is reported), isend/irecv;
  - async work: wait(timeout) on a receive nobody sends to raises a timeout
    and leaves the work pending; the late send then completes it;
  - BAND, BOR and BXOR on int32 and bool against the expected values;
  - refusals: int16 tensors (complex ones where torch passes them as they
    are; torch 2.x broadcasts their real view), ReduceOp.BAND on float32,
    bool with SUM, a split list of the wrong length: RuntimeError naming the
    cause;
  - non-contiguous tensors (a transposed view) in all_reduce and broadcast;
  - a second group (new_group) of a subset of ranks.
Exit 0 if every rank passes, 1 if not, 77 without torch or plexus.torch.
"""
import datetime
import os
import subprocess
import sys
import tempfile

from torch_needs import free_port, require_plexus_torch

TIMEOUT = 120


def bitwise(rank, P, check):
    """BAND, BOR, BXOR elementwise on int32 and bool (as gloo does them):
    all_reduce for each, reduce and reduce_scatter with one each."""
    import functools
    import operator
    import torch
    import torch.distributed as dist

    ops = ((dist.ReduceOp.BAND, operator.and_), (dist.ReduceOp.BOR, operator.or_), (dist.ReduceOp.BXOR, operator.xor))
    mine = lambda q: [1 << q, 7 - q % 3, 0x55 ^ q, -1 - q]  # noqa: E731
    flags = lambda q: [q == 0, True, False, q % 2 == 1]  # noqa: E731
    for op, f in ops:
        want = [functools.reduce(f, col) for col in zip(*(mine(q) for q in range(P)))]
        x = torch.tensor(mine(rank), dtype=torch.int32)
        dist.all_reduce(x, op=op)
        check(x.tolist() == want, "all_reduce int32 %s: %s, want %s" % (op, x.tolist(), want))
        want = [functools.reduce(f, col) for col in zip(*(flags(q) for q in range(P)))]
        b = torch.tensor(flags(rank))
        dist.all_reduce(b, op=op)
        check(b.tolist() == want, "all_reduce bool %s: %s, want %s" % (op, b.tolist(), want))
    x = torch.tensor(mine(rank), dtype=torch.int32)
    dist.reduce(x, 0, op=dist.ReduceOp.BXOR)
    want = [functools.reduce(operator.xor, col) for col in zip(*(mine(q) for q in range(P)))]
    check(rank != 0 or x.tolist() == want, "reduce int32 BXOR: %s, want %s" % (x.tolist(), want))
    out = torch.zeros(2, dtype=torch.int32)
    dist.reduce_scatter(out, [torch.tensor([1 << (q + rank), rank], dtype=torch.int32) for q in range(P)],
                        op=dist.ReduceOp.BOR)
    want = [functools.reduce(operator.or_, [1 << (rank + q) for q in range(P)]),
            functools.reduce(operator.or_, range(P))]
    check(out.tolist() == want, "reduce_scatter int32 BOR: %s, want %s" % (out.tolist(), want))


def rank_main(method, rank, P, arg):
    import torch
    import torch.distributed as dist
    import plexus.torch  # noqa: F401

    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)
            print("rank %d CHECK failed: %s" % (rank, what), flush=True)

    def refused(fn, words, what):
        try:
            fn()
        except RuntimeError as e:
            check(all(w in str(e) for w in words), "%s: message %r lacks %s" % (what, str(e)[:200], words))
            return
        check(False, "%s was not refused" % what)

    timeout = datetime.timedelta(seconds=60)
    if method == "env":
        dist.init_process_group("plexus", init_method="env://", rank=rank, world_size=P, timeout=timeout)
    elif method == "tcp":
        dist.init_process_group("plexus", init_method="tcp://127.0.0.1:%s" % arg, rank=rank, world_size=P,
                                timeout=timeout)
    else:
        dist.init_process_group("plexus", init_method="file://" + arg, rank=rank, world_size=P, timeout=timeout)
    check(dist.get_backend() == "plexus", "backend name")

    # all_to_all_single with uneven splits (rows of 3 elements): rank i sends
    # (i + j) % 3 rows to rank j, row k of it holding 100 i + 10 j + k.
    cnt = lambda i, j: (i + j) % 3  # noqa: E731
    rows = [torch.full((cnt(rank, j), 3), 100.0 * rank + 10 * j) + torch.arange(cnt(rank, j)).view(-1, 1)
            for j in range(P)]
    inp = torch.cat(rows)
    out = torch.full((sum(cnt(j, rank) for j in range(P)), 3), -1.0)
    dist.all_to_all_single(out, inp, [cnt(j, rank) for j in range(P)], [cnt(rank, j) for j in range(P)])
    want = torch.cat([torch.full((cnt(j, rank), 3), 100.0 * j + 10 * rank) + torch.arange(cnt(j, rank)).view(-1, 1)
                      for j in range(P)])
    check(torch.equal(out, want), "all_to_all_single with splits")
    refused(lambda: dist.all_to_all_single(out, inp, [1] * (P + 1), [1] * (P + 1)), ["split sizes"],
            "splits of the wrong length")

    # all_to_all with lists of uneven sizes.
    ins = [torch.full((rank + j + 1,), float(rank * P + j), dtype=torch.float64) for j in range(P)]
    outs = [torch.empty(j + rank + 1, dtype=torch.float64) for j in range(P)]
    dist.all_to_all(outs, ins)
    check(all(torch.equal(outs[j], torch.full((j + rank + 1,), float(j * P + rank), dtype=torch.float64))
              for j in range(P)), "all_to_all with lists")

    # _allgather_base / _reduce_scatter_base.
    x = torch.arange(5, dtype=torch.int64) + 10 * rank
    flat = torch.empty(5 * P, dtype=torch.int64)
    dist._all_gather_base(flat, x)
    check(torch.equal(flat, torch.cat([torch.arange(5) + 10 * r for r in range(P)])), "_allgather_base")
    big = torch.arange(4 * P, dtype=torch.float32) * (rank + 1)
    part = torch.empty(4)
    dist._reduce_scatter_base(part, big)
    check(torch.equal(part, (torch.arange(4 * rank, 4 * rank + 4, dtype=torch.float32) * sum(range(1, P + 1)))),
          "_reduce_scatter_base")

    # send/recv: rank 0 sends two tags to rank 1, which receives them in the
    # other order; everyone else sends to rank 0, which receives from any source.
    if rank == 0:
        dist.send(torch.full((4,), 1.0), 1, tag=5)
        dist.send(torch.full((4,), 2.0), 1, tag=6)
        seen = set()
        for _ in range(P - 1):
            t = torch.zeros(2, dtype=torch.int32)
            src = dist.recv(t)
            check(src is not None and torch.equal(t, torch.full((2,), src, dtype=torch.int32)),
                  "recv from any source: sender %s, data %s" % (src, t.tolist()))
            seen.add(src)
        check(seen == set(range(1, P)), "any-source senders %s" % seen)
    else:
        if rank == 1:
            a, b = torch.zeros(4), torch.zeros(4)
            wb = dist.irecv(b, 0, tag=6)
            wa = dist.irecv(a, 0, tag=5)
            wb.wait()
            wa.wait()
            check(torch.equal(a, torch.full((4,), 1.0)) and torch.equal(b, torch.full((4,), 2.0)), "tags")
        dist.send(torch.full((2,), rank, dtype=torch.int32), 0)

    # Async work and timeouts: rank 1 waits 300 ms for a message rank 0
    # sends only after a barrier.
    if rank == 1:
        t = torch.zeros(3)
        w = dist.irecv(t, 0, tag=9)
        try:
            w.wait(datetime.timedelta(milliseconds=300))
            check(False, "wait(300 ms) on a receive nobody sent returned")
        except RuntimeError as e:
            check("pending" in str(e), "timeout message: %s" % e)
        check(not w.is_completed(), "work still pending after its wait timed out")
        dist.barrier()
        w.wait()
        check(torch.equal(t, torch.full((3,), 9.0)), "late message")
    else:
        dist.barrier()
        if rank == 0:
            dist.send(torch.full((3,), 9.0), 1, tag=9)
    w = dist.all_reduce(torch.ones(1000), async_op=True)
    check(w.wait(), "async all_reduce wait")
    check(w.is_completed(), "async all_reduce completed")
    # Small collectives start lazily: issue order must still be program
    # order whatever the ranks wait for first (here in opposite orders), and
    # polling is_completed() alone must finish one.
    small, big = torch.ones(4) * (rank + 1), torch.ones(1 << 16) * (rank + 1)
    w1 = dist.all_reduce(small, async_op=True)
    w2 = dist.all_reduce(big, async_op=True)
    w3 = dist.broadcast(torch.ones(2) * rank, 0, async_op=True)
    for w in ((w3, w2, w1) if rank % 2 else (w1, w2, w3)):
        w.wait()
    tot = P * (P + 1) / 2
    check(torch.equal(small, torch.full((4,), tot)) and torch.equal(big, torch.full((1 << 16,), tot)),
          "async small/big all_reduce waited in different orders")
    w = dist.all_reduce(torch.ones(3), async_op=True)
    while not w.is_completed():
        pass
    check(w.wait(), "polled small all_reduce")

    # Refusals with a clear reason.
    refused(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), ["dtype", "Short"], "int16")
    # torch 2.x hands a complex broadcast over as its real view (two floats an element), which plexus
    # carries; torch 1.13 passes the complex tensor itself, which plexus refuses by its dtype.
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64) * (rank == 0)
    try:
        dist.broadcast(z, 0)
        check(torch.equal(z, torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)), "complex64 broadcast")
    except RuntimeError as e:
        check("dtype" in str(e), "complex64: message %r lacks dtype" % str(e)[:200])
    refused(lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND), ["ReduceOp.BAND", "Float", "bitwise"],
            "BAND on float32")
    bitwise(rank, P, check)
    refused(lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)), ["bool"], "bool SUM")
    b = torch.tensor([rank == 0, True, False])
    dist.all_reduce(b, op=dist.ReduceOp.MAX)
    check(b.tolist() == [True, True, False], "bool MAX")

    # Non-contiguous tensors.
    m = (torch.arange(6, dtype=torch.float32).view(2, 3) + rank).t()
    dist.all_reduce(m)
    check(torch.equal(m, (torch.arange(6, dtype=torch.float32).view(2, 3) * P + sum(range(P))).t()),
          "all_reduce of a transposed view")
    m = torch.zeros(3, 2).t() if rank else torch.arange(6.0).view(3, 2).t()
    dist.broadcast(m, 0)
    check(torch.equal(m, torch.arange(6.0).view(3, 2).t()), "broadcast into a transposed view")

    # A second group of ranks {0, P-1}.
    g = dist.new_group([0, P - 1])
    if rank in (0, P - 1):
        y = torch.ones(2) * rank
        dist.all_reduce(y, group=g)
        check(torch.equal(y, torch.ones(2) * (P - 1)), "new_group all_reduce")
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d (%s): %s" % (rank, method, "FAIL" if fails else "ok"), flush=True)
    return 1 if fails else 0


def main():
    require_plexus_torch()
    P = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    failed = 0
    tmp = tempfile.mkdtemp(prefix="plexus-torch-extras-")
    for method in ("env", "tcp", "file"):
        port = free_port()
        arg = str(port) if method == "tcp" else os.path.join(tmp, "init")
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONWARNINGS="ignore")
        procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", method, str(r), str(P), arg], env=env)
                 for r in range(P)]
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=TIMEOUT))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                codes.append("timeout")
        print("init %s://: exit codes %s" % (method, codes), flush=True)
        failed += any(c != 0 for c in codes)
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
    sys.exit(main())
