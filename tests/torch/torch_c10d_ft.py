"""torch_c10d_ft.py CASE - c10d::Backend's newer entries on "plexus", each case
its own test (exit 77 with the reason where this torch lacks the entry):
  split     4 processes: ProcessGroup.split_group (what dist.split_group calls)
            into [[0, 2], [3, 1]] and [[0, 1, 2]] (rank 3 outside): the
            backend's split (plx_comm_split), new ranks in the order given,
            all_reduce and broadcast on the parts, None outside; the same
            on torch's gloo first where its backend splits (the times printed
            side by side).
            dist.split_group itself refuses a CPU-only torch before any
            backend is asked (torch's check, printed).
  shrink    4 processes: rank 3 SIGKILLs itself; the others' next all_reduce
            fails within 2 s naming rank 3, getError says REMOTE_ERROR,
            dist.shrink_group([3]) takes under 1 s and the 3 go on. Then a
            second round on the 3 with SHRINK_ABORT while rank 2 is gone.
  abort     2 processes: rank 0 blocked in an all_reduce rank 1 never joins
            (a small one, run in the waiting thread, and a large one), another
            thread aborts the group: the all_reduce raises within 1 s; an
            abort hook registered on the backend ran once.
  error     3 processes: getError SUCCESS on a fresh group, TIMEOUT after a
            wait timed out, REMOTE_ERROR after another rank revoked the
            group, COMM_ERROR after an abort. On tcp: shm's nonblocking
            all_reduce of a few bytes completes inside its start, so a
            bounded wait there has nothing left to time out. (gloo's
            getError answers SUCCESS always: ProcessGroupGloo.hpp.)
  coalesce  2 processes: supports_coalescing; _coalescing_manager's all_gather and
            reduce_scatter batches (one plexus call each) and batch_isend_irecv.
  reconfigure  3 processes: _supports_reconfigure; the handles exchanged through
            the default store; _reconfigure with the 3 in order, then reversed
            (ranks follow the list), then rank 2 SIGKILLs itself and the 2
            left reconfigure as a set (ranks in sorted handle order); then a
            fresh process, started beside them and outside the group, joins
            the job's store, makes a group of its own (rank 2 of 3 with
            enable_reconfigure where torch has it: init returns at once, an
            all_reduce refuses until _reconfigure) and joins the 2 through
            _reconfigure, so they are 3 again; each time rank, size,
            all_reduce and broadcast are checked.
  timeest   2 processes: dist._time_estimator on a [core] estimates table
            that plexus-whatif --emit-estimates wrote for 2 ranks: all_reduce
            (at a row's size and between two rows), all_gather, broadcast and
            an async all_reduce add up to the table's times (microseconds),
            their tensors untouched (nothing ran) and the work complete at
            once; a reduce_scatter the table has no rows for raises naming
            it; afterwards the same collectives run. Then again without the
            key: supports_time_estimate False, torch's NotImplementedError.
Exit 0 if every check passes on every rank, 1 if not.
"""
import datetime
import os
import signal
import subprocess
import sys
import threading
import time

from listening import wait_listening  # beside this file
from torch_needs import free_port

TIMEOUT = 180


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(77)


class Checks:
    def __init__(self, rank):
        self.rank, self.failures = rank, []

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
            print("rank %d: FAIL: %s" % (self.rank, what), flush=True)

    def done(self):
        return 1 if self.failures else 0


def init(rank, P, backend="plexus", seconds=60):
    import torch.distributed as dist
    import plexus.torch  # noqa: F401 - registers "plexus"
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=P,
                            timeout=datetime.timedelta(seconds=seconds))


def backend_of(pg):
    import torch
    return pg._get_backend(torch.device("cpu"))


def case_split(rank, P):
    import torch
    import torch.distributed as dist
    ck = Checks(rank)
    for name in (os.environ.get("SPLIT_BACKEND", "plexus"),):
        init(rank, P, name)
        world = dist.group.WORLD
        if name == "gloo" and not backend_of(world).supports_splitting:
            print("gloo rank %d: this torch's gloo does not split: nothing to compare" % rank, flush=True)
            dist.destroy_process_group()
            return 0
        ck.check(backend_of(world).supports_splitting, "%s: supports_splitting is False" % name)
        if name == "plexus" and rank == 0:
            try:
                dist.split_group(split_ranks=[[0, 1], [2, 3]])
                print("dist.split_group ran on this CPU-only torch", flush=True)
            except RuntimeError as e:
                print("dist.split_group on a CPU-only torch: %s" % e, flush=True)
        for parts in ([[0, 2], [3, 1]], [[0, 1, 2]]):
            mine = next((p for p in parts if rank in p), parts[0])
            t0 = time.time()
            # A name per part: gloo meets a part's members under it.
            sub = world.split_group(mine, timeout=datetime.timedelta(seconds=30),
                                    group_name="s" + "-".join(map(str, mine)))
            took = time.time() - t0
            if rank not in mine:
                ck.check(sub is None, "%s %s: rank %d outside got %r" % (name, parts, rank, sub))
                continue
            ck.check(sub is not None, "%s %s: no group" % (name, parts))
            if sub is None:
                continue
            be = backend_of(sub)
            ck.check(sub.rank() == mine.index(rank) and sub.size() == len(mine),
                     "%s %s: rank %d/%d, want %d/%d" % (name, parts, sub.rank(), sub.size(), mine.index(rank),
                                                        len(mine)))
            if name == "plexus":
                import plexus.torch
                ck.check(isinstance(be, plexus.torch.ProcessGroupPlexus), "split gave %r" % type(be))
            t = torch.full((3,), float(rank + 1))
            sub.allreduce([t]).wait()
            want = float(sum(r + 1 for r in mine))
            ck.check(bool((t == want).all()), "%s %s: all_reduce gave %s, want %s" % (name, parts, t.tolist(), want))
            b = torch.full((2,), float(rank))
            opts = dist.BroadcastOptions()
            opts.rootRank = 0
            sub.broadcast([b], opts).wait()
            ck.check(bool((b == float(mine[0])).all()),
                     "%s %s: broadcast from new rank 0 gave %s, want %s" % (name, parts, b.tolist(), mine[0]))
            print("%s rank %d: split %s in %.3f s -> rank %d of %d" % (name, rank, parts, took, sub.rank(),
                                                                       sub.size()), flush=True)
        dist.barrier()
        dist.destroy_process_group()
    return ck.done()


def failed_op(ck, rank, what, fn, limit, need, also=None):
    """Runs fn, which must raise within limit seconds with need (or also) in the message."""
    t0 = time.time()
    try:
        fn()
        ck.check(False, "%s returned, expected a failure" % what)
        return
    except Exception as e:  # noqa: BLE001 - what it raised is the check
        took, msg = time.time() - t0, str(e).splitlines()[0]
    print("rank %d: %s raised after %.3f s: %s" % (rank, what, took, msg[:300]), flush=True)
    ck.check(took < limit, "%s raised only after %.2f s (limit %.1f s)" % (what, took, limit))
    ck.check(need in msg or (also is not None and also in msg), "%s: %r does not name %r" % (what, msg[:300], need))


def case_shrink(rank, P):
    import torch
    import torch.distributed as dist
    ck = Checks(rank)
    init(rank, P)
    if not backend_of(dist.group.WORLD).supports_shrinking:
        ck.check(False, "supports_shrinking is False")
        return ck.done()
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        try:
            dist.shrink_group([3], group=gloo)
            print("gloo: shrink_group accepted", flush=True)
        except (TypeError, RuntimeError) as e:
            print("gloo: shrink_group: %s" % e, flush=True)
    t = torch.ones(4)
    dist.all_reduce(t)
    dist.barrier()
    if rank == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    failed_op(ck, rank, "all_reduce after rank 3 was killed", lambda: dist.all_reduce(torch.ones(4)), 2.0, "rank 3")
    err = backend_of(dist.group.WORLD).get_error()
    remote = torch._C._distributed_c10d.ErrorType.REMOTE_ERROR
    ck.check(err == remote, "get_error after the kill: %s, want REMOTE_ERROR" % err)
    t0 = time.time()
    pg = dist.shrink_group([3])
    took = time.time() - t0
    print("rank %d: shrink_group([3]) took %.3f s -> rank %d of %d" % (rank, took, pg.rank(), pg.size()), flush=True)
    ck.check(took < 1.0, "shrink_group took %.2f s (limit 1 s)" % took)
    ck.check(pg.size() == 3 and pg.rank() == rank, "after the shrink: rank %d of %d" % (pg.rank(), pg.size()))
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    ck.check(bool((t == 6.0).all()), "all_reduce on the 3 gave %s, want 6" % t.tolist())
    # Round 2: rank 2 leaves while ranks 0 and 1 are blocked in an all_reduce it never joins
    # (SIGKILL again); SHRINK_ABORT revokes what is pending first.
    dist.barrier()
    if rank == 2:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    # A survivor that saw it first may already be in shrink_group's SHRINK_ABORT revoke.
    failed_op(ck, rank, "all_reduce while rank 2 dies", lambda: dist.all_reduce(torch.ones(1 << 16)), 2.5, "rank 2",
              "PLX_ERR_REVOKED")
    t0 = time.time()
    pg = dist.shrink_group([2], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    took = time.time() - t0
    print("rank %d: shrink_group([2], SHRINK_ABORT) took %.3f s" % (rank, took), flush=True)
    ck.check(took < 1.0, "the second shrink_group took %.2f s (limit 1 s)" % took)
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    ck.check(bool((t == 3.0).all()) and pg.size() == 2, "all_reduce on the 2 gave %s" % t.tolist())
    dist.destroy_process_group()
    return ck.done()


def aborted_in_time(ck, rank, pg, n, abort):
    """rank 0: an all_reduce of n floats on pg that rank 1 never joins, aborted by another thread."""
    import torch
    import torch.distributed as dist
    when = {}

    def later():
        time.sleep(1.0)
        when["abort"] = time.time()
        abort(pg)

    hooked = []
    if hasattr(backend_of(pg), "register_abort_hook"):  # torch's C10D_BACKEND_HAS_HOOKS
        backend_of(pg).register_abort_hook(7, lambda: hooked.append(time.time()))
    th = threading.Thread(target=later)
    th.start()
    try:
        dist.all_reduce(torch.ones(n), group=pg)
        ck.check(False, "all_reduce of %d floats returned though rank 1 never joined" % n)
    except Exception as e:  # noqa: BLE001
        after = time.time() - when.get("abort", time.time())
        print("rank 0: all_reduce of %d floats raised %.3f s after the abort: %s" % (n, after, str(e).splitlines()[0]),
              flush=True)
        ck.check("abort" in when and after < 1.0, "all_reduce of %d floats ended %.2f s after the abort" % (n, after))
        ck.check("Abort" in str(e), "all_reduce of %d floats raised %r, not an abort" % (n, str(e)[:200]))
    th.join()
    if hasattr(backend_of(pg), "register_abort_hook"):
        ck.check(len(hooked) == 1, "the abort hook ran %d times, want once" % len(hooked))
    if "abort" in when:
        err = backend_of(pg).get_error() if hasattr(backend_of(pg), "get_error") else None
        print("rank 0: get_error after the abort: %s" % err, flush=True)


def case_abort(rank, P):
    import torch.distributed as dist
    ck = Checks(rank)
    init(rank, P)
    # ProcessGroup.abort, which aborts the group's backends (torch's _abort_process_group
    # also drops the group from torch's tables, and the blocked call then reports that instead).
    def abort(pg):
        pg.abort()
    for n in (16, 1 << 18):  # a small one runs in the waiting thread, a large one on plexus's
        pg = dist.new_group(backend="plexus")
        if rank == 0:
            aborted_in_time(ck, rank, pg, n, abort)
        dist.barrier()  # on the default group, which the abort left alone
    dist.destroy_process_group()
    return ck.done()


def case_error(rank, P):
    import torch
    import torch.distributed as dist
    import plexus.torch
    ck = Checks(rank)
    init(rank, P)
    E = torch._C._distributed_c10d.ErrorType

    def err(pg):
        return backend_of(pg).get_error()
    ck.check(err(dist.group.WORLD) == E.SUCCESS, "fresh group: %s, want SUCCESS" % err(dist.group.WORLD))
    # TIMEOUT: rank 0 waits 0.5 s for an all_reduce rank 1 joins only later.
    g = dist.new_group([0, 1], backend="plexus")
    if rank == 0:
        w = dist.all_reduce(torch.ones(4), group=g, async_op=True)
        try:
            w.wait(datetime.timedelta(seconds=0.5))
            ck.check(False, "a wait for an all_reduce rank 1 had not joined returned")
        except RuntimeError as e:
            print("rank 0: the bounded wait raised: %s" % str(e).splitlines()[0], flush=True)
        ck.check(err(g) == E.TIMEOUT, "after a timed-out wait: %s, want TIMEOUT" % err(g))
    dist.barrier()
    if rank == 1:
        dist.all_reduce(torch.ones(4), group=g)
    if rank == 0:
        w.wait()
    # REMOTE_ERROR: rank 2 revokes a group the others are blocked in.
    r = dist.new_group(backend="plexus")
    dist.barrier()
    if rank == 2:
        time.sleep(0.5)
        plexus.torch.revoke(r)
    else:
        try:
            dist.all_reduce(torch.ones(4), group=r)
        except RuntimeError:
            pass
        ck.check(err(r) == E.REMOTE_ERROR, "after another rank revoked: %s, want REMOTE_ERROR" % err(r))
    # COMM_ERROR: this rank aborted its group.
    a = dist.new_group(backend="plexus")
    backend_of(a).abort()
    try:
        dist.all_reduce(torch.ones(4), group=a)
    except RuntimeError:
        pass
    ck.check(err(a) == E.COMM_ERROR, "after an abort: %s, want COMM_ERROR" % err(a))
    ck.check(err(dist.group.WORLD) == E.SUCCESS, "the default group, untouched: %s" % err(dist.group.WORLD))
    dist.barrier()
    dist.destroy_process_group()
    return ck.done()


def case_coalesce(rank, P):
    """_coalescing_manager's fast paths (one plexus call per batch) and batch_isend_irecv, which
    goes through startCoalescing/endCoalescing where the backend says it coalesces."""
    import torch
    import torch.distributed as dist
    ck = Checks(rank)
    init(rank, P)
    be = backend_of(dist.group.WORLD)
    ck.check(be.supports_coalescing, "supports_coalescing is False")
    ck.check(not be.supports_time_estimate and not getattr(be, "supports_window", False),
             "time estimates or windows claimed")
    cm = dist.distributed_c10d._coalescing_manager
    ins = [torch.full((3,), float(rank + 1)), torch.full((2, 2), float(10 * (rank + 1)))]
    outs = [torch.empty(6), torch.empty(4, 2)]
    with cm(async_ops=False):
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    ck.check(outs[0].tolist() == [1.0] * 3 + [2.0] * 3 and outs[1].flatten().tolist() == [10.0] * 4 + [20.0] * 4,
             "coalesced all_gather gave %s %s" % (outs[0].tolist(), outs[1].tolist()))
    rin = [torch.arange(4, dtype=torch.float32) + rank, torch.ones(6) * (rank + 1)]
    rout = [torch.empty(2), torch.empty(3)]
    with cm(async_ops=False):
        for o, i in zip(rout, rin):
            dist.reduce_scatter_tensor(o, i)
    want = [[1.0, 3.0], [5.0, 7.0]][rank]
    ck.check(rout[0].tolist() == want and rout[1].tolist() == [3.0] * 3,
             "coalesced reduce_scatter gave %s %s" % (rout[0].tolist(), rout[1].tolist()))
    peer = 1 - rank
    s, r = torch.full((4,), float(rank)), torch.empty(4)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer), dist.P2POp(dist.irecv, r, peer)]):
        q.wait()
    ck.check(r.tolist() == [float(peer)] * 4, "batch_isend_irecv received %s" % r.tolist())
    dist.destroy_process_group()
    return ck.done()


def read_estimates(path):
    """The rows (coll, ranks, bytes, seconds) of a [core] estimates table."""
    rows = []
    for line in open(path):
        f = line.split("#")[0].split()
        if len(f) == 4:
            rows.append((f[0], int(f[1]), int(f[2]), float(f[3])))
    return rows


def estimate_of(rows, coll, ranks, nbytes):
    """What plx_comm_estimate answers from rows: a row's seconds at its size, the straight line between the
    two rows around nbytes otherwise (core/algo/estimates.h)."""
    pts = sorted((b, s) for c, r, b, s in rows if c == coll and r == ranks)
    for (b0, s0), (b1, s1) in zip(pts, pts[1:] + pts[-1:]):
        if b0 == nbytes:
            return s0
        if b0 < nbytes < b1:
            return s0 + (s1 - s0) * (nbytes - b0) / (b1 - b0)
    raise KeyError("%s at %d ranks, %d B: not in the table" % (coll, ranks, nbytes))


def case_timeest(rank, P):
    import torch
    import torch.distributed as dist
    ck = Checks(rank)
    init(rank, P)
    be = backend_of(dist.group.WORLD)
    path = os.environ.get("TIMEEST_TABLE")
    if not path:
        ck.check(not be.supports_time_estimate, "supports_time_estimate is True without [core] estimates")
        try:
            with dist._time_estimator():
                dist.all_reduce(torch.ones(4))
            ck.check(False, "_time_estimator did not refuse without [core] estimates")
        except NotImplementedError as e:
            print("rank %d: without [core] estimates: NotImplementedError: %s" % (rank, e), flush=True)
        t = torch.ones(4)
        dist.all_reduce(t)
        ck.check(t.tolist() == [float(P)] * 4, "all_reduce after the refusal gave %s" % t.tolist())
        dist.destroy_process_group()
        return ck.done()
    rows = read_estimates(path)
    ck.check(be.supports_time_estimate, "supports_time_estimate is False with [core] estimates = %s" % path)
    a = torch.full((256,), float(rank + 1))   # 1 KiB
    c = torch.full((750,), float(rank + 1))   # 3000 B, between two rows
    g = torch.full((64,), float(rank))        # gathered: 256 B from each rank
    outs = [torch.full((64,), -7.0) for _ in range(P)]
    b = torch.full((128,), float(rank + 5))
    before = [x.clone() for x in [a, c, g, b] + outs]
    with dist._time_estimator() as cm:
        dist.all_reduce(a)
        dist.all_reduce(c)
        dist.all_gather(outs, g)
        dist.broadcast(b, src=0)
        w = dist.all_reduce(a, async_op=True)
        ck.check(w.is_completed(), "an estimated all_reduce's work is not complete at once")
        w.wait()
    parts = [("allreduce", 1024), ("allreduce", 3000), ("allgather", 256 * P), ("broadcast", 512),
             ("allreduce", 1024)]
    want = sum(estimate_of(rows, coll, P, n) for coll, n in parts) * 1e6
    got = cm.estimated_time
    ck.check(got is not None and want > 0 and abs(got - want) <= 1e-9 * want,
             "estimated_time %r us, want %r us (the table's %s)" % (got, want, parts))
    ck.check(all(torch.equal(x, y) for x, y in zip(before, [a, c, g, b] + outs)),
             "a tensor changed under _time_estimator: a collective ran")
    print("rank %d: estimated %.3f us for %s" % (rank, got or 0, parts), flush=True)
    r_in, r_out = torch.ones(2 * P), torch.full((2,), -7.0)
    try:
        with dist._time_estimator():
            dist.reduce_scatter_tensor(r_out, r_in)
        ck.check(False, "a reduce_scatter without rows in the table was estimated")
    except RuntimeError as e:
        ck.check("estimate" in str(e) and "reduce_scatter" in str(e), "the refusal does not name it: %s" % e)
        print("rank %d: no rows: %s" % (rank, e), flush=True)
    ck.check(r_out.tolist() == [-7.0] * 2, "the refused reduce_scatter ran: %s" % r_out.tolist())
    dist.all_reduce(a)
    ck.check(a.tolist() == [float(sum(r + 1 for r in range(P)))] * 256, "all_reduce after: %s" % a[:4].tolist())
    dist.broadcast(b, src=0)
    ck.check(b.tolist() == [5.0] * 128, "broadcast after: %s" % b[:4].tolist())
    dist.all_gather(outs, g)
    ck.check([o.tolist() for o in outs] == [[float(r)] * 64 for r in range(P)], "all_gather after")
    dist.reduce_scatter_tensor(r_out, r_in)
    ck.check(r_out.tolist() == [float(P)] * 2, "reduce_scatter after: %s" % r_out.tolist())
    dist.destroy_process_group()
    return ck.done()


def handles_of(store, tag, ranks, mine, rank):
    """Every rank in ranks puts its handle under tag; all read them all."""
    store.set("%s/%d" % (tag, rank), mine)
    return [store.get("%s/%d" % (tag, r)).decode() for r in ranks]


def reconfigured(ck, what, want_rank, want_size, values, total):
    import torch
    import torch.distributed as dist
    r, n = dist.get_rank(), dist.get_world_size()
    ck.check((r, n) == (want_rank, want_size), "%s: rank %d of %d, want %d of %d" % (what, r, n, want_rank, want_size))
    t = torch.tensor([float(values)])
    dist.all_reduce(t)
    ck.check(t.item() == total, "%s: all_reduce gave %s, want %s" % (what, t.item(), total))
    b = torch.tensor([float(r * 10 + 7)])
    dist.broadcast(b, src=n - 1)
    ck.check(b.item() == (n - 1) * 10 + 7, "%s: broadcast from rank %d gave %s" % (what, n - 1, b.item()))


def case_reconfigure(rank, P):
    import torch.distributed as dist
    ck = Checks(rank)
    init(rank, P)
    if not dist._supports_reconfigure():
        ck.check(False, "_supports_reconfigure() is False")
        return ck.done()
    store = dist.distributed_c10d._get_default_store()
    mine = dist._get_reconfigure_handle()
    ck.check(mine == dist._get_reconfigure_handle(), "the handle changed between two calls")
    hs = handles_of(store, "h1", range(P), mine, rank)
    ck.check(len(set(hs)) == P, "handles not distinct: %s" % hs)
    dist._reconfigure(uuid=1, handles=hs).wait()
    reconfigured(ck, "in order", rank, P, rank + 1, 6.0)
    dist._reconfigure(uuid=2, handles=list(reversed(hs))).wait()
    reconfigured(ck, "reversed", P - 1 - rank, P, rank + 1, 6.0)
    dist.barrier()
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    two = handles_of(store, "h3", [0, 1], mine, rank)
    t0 = time.time()
    dist._reconfigure(uuid=3, handles=set(two), timeout=datetime.timedelta(seconds=20)).wait()
    print("rank %d: reconfigure of the 2 left took %.3f s" % (rank, time.time() - t0), flush=True)
    reconfigured(ck, "the 2 left, as a set", sorted(two).index(mine), 2, rank + 1, 3.0)
    # A newcomer (newcomer_reconfigure below) waits for this key, on the
    # job's store as any client reaches it (no group's prefix).
    job = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=False, use_libuv=False)
    if rank == 0:
        job.set("join/go", "1")
    job.set("h4/%d" % rank, mine)
    three = [job.get("h4/0").decode(), job.get("h4/1").decode(), job.get("h4/new").decode()]
    dist._reconfigure(uuid=4, handles=three, timeout=datetime.timedelta(seconds=20)).wait()
    reconfigured(ck, "the 2 and a newcomer", rank, 3, rank + 1, 6.0)
    dist.destroy_process_group()
    return ck.done()


def newcomer_reconfigure(port):
    """A process that was not in the group: it reaches the job's store as a
    client, makes a group under a prefix of its own (started with the
    others, it must not meet them there), and joins the survivors through
    _reconfigure as rank 2. Where torch's init_process_group takes
    enable_reconfigure, the group is made as torch means a replacement's to
    be: rank 2 of 3, in the reconfigure regime, so init must return without
    a rendezvous (the other two never come under that prefix) and an
    all_reduce before _reconfigure must refuse, naming it. Elsewhere it is a
    group of one."""
    import inspect
    import torch
    import torch.distributed as dist
    import plexus.torch  # noqa: F401 - registers "plexus"
    ck = Checks(2)
    job = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=60),
                        use_libuv=False)
    deferred = "enable_reconfigure" in inspect.signature(dist.init_process_group).parameters
    t0 = time.time()
    dist.init_process_group("plexus", store=dist.PrefixStore("newcomer", job), rank=2 if deferred else 0,
                            world_size=3 if deferred else 1, timeout=datetime.timedelta(seconds=60),
                            **({"enable_reconfigure": True} if deferred else {}))
    if deferred:
        took = time.time() - t0
        print("newcomer: init_process_group(enable_reconfigure=True) took %.3f s" % took, flush=True)
        ck.check(took < 10, "init with enable_reconfigure waited %.1f s: it met, not deferred" % took)
        try:
            dist.all_reduce(torch.ones(1))
            ck.check(False, "all_reduce before _reconfigure ran on a group made with enable_reconfigure")
        except RuntimeError as e:
            ck.check("reconfigure" in str(e), "all_reduce before _reconfigure: %s" % e)
    job.wait(["join/go"])
    mine = dist._get_reconfigure_handle()
    job.set("h4/new", mine)
    three = [job.get("h4/0").decode(), job.get("h4/1").decode(), mine]
    dist._reconfigure(uuid=4, handles=three, timeout=datetime.timedelta(seconds=20)).wait()
    reconfigured(ck, "the newcomer", 2, 3, 3, 6.0)
    dist.destroy_process_group()
    return ck.done()


CASES = {"split": (case_split, 4, ("split_group", None)),
         "shrink": (case_shrink, 4, ("shrink_group", None)),
         "abort": (case_abort, 2, (None, "abort")),
         "error": (case_error, 3, (None, "get_error")),
         "coalesce": (case_coalesce, 2, (None, "supports_coalescing")),
         "reconfigure": (case_reconfigure, 3, ("_reconfigure", None)),
         "timeest": (case_timeest, 2, ("_time_estimator", "supports_time_estimate"))}


def main(case):
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        skip("torch not importable by %s: %s" % (sys.executable, e))
    try:
        import plexus.torch
    except ImportError as e:
        skip("plexus.torch is not built or not on PYTHONPATH: %s" % e)
    _, P, (in_dist, in_backend) = CASES[case]
    if in_dist and not hasattr(dist, in_dist):
        skip("torch %s has no torch.distributed.%s" % (torch.__version__, in_dist))
    backend_class = getattr(torch._C._distributed_c10d, "Backend", None)  # torch 1.x has none
    if in_backend and not hasattr(backend_class, in_backend):
        skip("torch %s's c10d Backend has no %s" % (torch.__version__, in_backend))
    if case == "split" and not hasattr(dist.ProcessGroup, "split_group"):
        skip("torch %s's ProcessGroup has no split_group" % torch.__version__)
    if case == "split":  # gloo's split beside plexus's: the same checks, both must pass
        runs = [run_case(case, P, {"SPLIT_BACKEND": b}) for b in ("gloo", "plexus")
                if b == "plexus" or dist.is_gloo_available()]
        return 0 if all(r == 0 for r in runs) else 1
    if case == "timeest":  # with the table, then without the key
        return timeest(P)
    return run_case(case, P, {})


def timeest(P):
    import tempfile
    whatif = os.path.join(os.environ["PLEXUS_BUILD_ROOT"], "tools", "plexus-whatif")
    with tempfile.TemporaryDirectory() as d:
        table = os.path.join(d, "estimates.txt")
        cmd = [whatif, "--ranks", str(P), "--coll", "allreduce,allgather,broadcast", "-b", "8", "-e", "64K",
               "--emit-estimates", table]
        made = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if made.returncode != 0:
            print("FAIL: %s: exit %d\n%s" % (" ".join(cmd), made.returncode, made.stdout), flush=True)
            return 1
        print("".join(open(table).readlines()[:4]), end="", flush=True)
        runs = [run_case("timeest", P, {"TIMEEST_TABLE": table, "PLEXUS_CORE_ESTIMATES": table}),
                run_case("timeest", P, {})]
    return 0 if all(r == 0 for r in runs) else 1


def run_case(case, P, extra):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               PYTHONWARNINGS="ignore", **extra)
    if case == "error":
        env["PLEXUS_BACKEND"] = "tcp"
    procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", case, str(r), str(P)], env=env)
             for r in range(P)]
    if case == "reconfigure":  # joins from outside the group, once rank 0's store listens
        wait_listening(int(env["MASTER_PORT"]))
        procs.append(subprocess.Popen([sys.executable, "-B", __file__, "--newcomer", env["MASTER_PORT"]], env=env))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=TIMEOUT))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            codes.append("timeout")
    # The shrink case's ranks that kill themselves end by SIGKILL.
    want = [0] * P
    if case == "shrink":
        want[3] = want[2] = -signal.SIGKILL
    if case == "reconfigure":
        want[2] = -signal.SIGKILL
        want.append(0)  # the newcomer
    print("%s%s, %d processes: exit codes %s (want %s)" % (case, "".join(" " + v for v in extra.values()),
                                                        len(procs), codes, want), flush=True)
    ok = codes == want
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        case, rank, P = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        sys.exit(CASES[case][0](rank, P))
    if len(sys.argv) > 1 and sys.argv[1] == "--newcomer":
        sys.exit(newcomer_reconfigure(int(sys.argv[2])))
    sys.exit(main(sys.argv[1]))
