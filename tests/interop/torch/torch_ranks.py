#!/usr/bin/python3
"""Our TCPStore server hosts two unmodified torch ranks.

store_host (our server, nothing else of plexus) plays the launcher's store,
the way torchrun's agent hosts one: the ranks get torchrun's variables plus
TORCHELASTIC_USE_AGENT_STORE=True, so torch's env:// rendezvous connects to
it as a client instead of starting its own. Each rank runs
init_process_group("gloo"), all_reduce, broadcast, all_gather and barrier
with checked results; rank 0 also drives every query type torch's client
has (set, get, add, compare_set, check, wait, wait timing out, num_keys,
delete_key; torch 1.13 does not expose CHECK) against our server while rank 1 blocks in a WAIT that rank 0
releases.

Usage: torch_ranks.py STORE_HOST   (the driver; exit 77 without torch)
"""
import os
import subprocess
import sys
import time
from datetime import timedelta


def skip(reason):
    print("skip: " + reason)
    sys.exit(77)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def no_libuv(dist):
    """torch 2.x's TCPStore asks for libuv by default, which Debian's torch
    is built without: ask for the classic one where the argument exists."""
    return {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}


def store_queries(dist, host, port):
    """Every query type of torch 1.13's TCPStore client, against our server."""
    s = dist.TCPStore(host, port, None, False, timedelta(seconds=30), wait_for_workers=False, **no_libuv(dist))
    s.set("a", "1")
    check(s.get("a") == b"1", "set/get")
    blob = bytes(range(256)) * 4096  # 1 MiB with every byte value
    s.set("blob", blob)
    check(s.get("blob") == blob, "1 MiB binary value")
    check(s.add("ctr", 5) == 5 and s.add("ctr", -2) == 3, "add")
    check(s.get("ctr") == b"3", "a counter reads as decimal text")
    # compare_set as torch 1.13's server answers it.
    n_before = s.num_keys()
    check(s.compare_set("cs", "x", "y") == b"x", "compare_set on a missing key returns expected")
    check(s.num_keys() == n_before, "...and does not create it")
    check(s.compare_set("cs", "", "v1") == b"v1", "compare_set with empty expected creates")
    check(s.compare_set("cs", "no", "v2") == b"v1", "compare_set with a wrong expected keeps the value")
    check(s.compare_set("cs", "v1", "v2") == b"v2", "compare_set swaps")
    s.wait(["a", "ctr"])
    s.wait(["a"], timedelta(seconds=5))
    n0 = s.num_keys()
    s.set("nk", "x")
    check(s.num_keys() == n0 + 1, "num_keys counts a new key")
    check(s.delete_key("nk") is True and s.num_keys() == n0, "delete_key")
    check(s.delete_key("nk") is False, "delete_key of a missing key")
    # A wait that times out, on a client of its own (its connection keeps
    # the pending WAIT, as torch's does).
    t = dist.TCPStore(host, port, None, False, timedelta(seconds=30), wait_for_workers=False, **no_libuv(dist))
    t0 = time.monotonic()
    try:
        t.wait(["never"], timedelta(milliseconds=300))
        check(False, "wait on a key nobody sets must time out")
    except RuntimeError as e:
        took = time.monotonic() - t0
        check(0.25 <= took < 10, "wait timed out after %.2f s, asked 0.3 s" % took)
        print("rank 0: wait timed out as asked (%.2f s): %s" % (took, str(e).splitlines()[0]))
    # The first client is unaffected; release rank 1.
    check(s.get("a") == b"1", "the store still answers")
    s.set("checks_done", "yes")


def rank_main():
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    try:
        dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=60))
    except RuntimeError as e:
        if "libuv" not in str(e):
            raise
        # torch 2.14 makes the agent store's client without use_libuv, so it
        # asks for libuv whatever USE_LIBUV says, and Debian's torch has none:
        # the same client and prefix, made here.
        print("rank %d: torch's env:// agent-store client needs libuv here; making it directly" % rank)
        store = dist.TCPStore(host, port, 2, False, timedelta(seconds=60), wait_for_workers=False, use_libuv=False)
        dist.init_process_group("gloo", store=dist.PrefixStore("/worker/attempt_0", store), rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
    check(dist.get_rank() == rank and dist.get_world_size() == 2, "rank and size")

    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    check(torch.all(t == 3.0).item(), "all_reduce sum f32")
    i = torch.tensor([rank * 7, -rank, 5], dtype=torch.int64)
    dist.all_reduce(i, op=dist.ReduceOp.MAX)
    check(i.tolist() == [7, 0, 5], "all_reduce max i64: %s" % i.tolist())
    b = torch.arange(4096, dtype=torch.float64) * 10 if rank == 1 else torch.zeros(4096, dtype=torch.float64)
    dist.broadcast(b, src=1)
    check(torch.equal(b, torch.arange(4096, dtype=torch.float64) * 10), "broadcast from rank 1")
    out = [torch.zeros(3) for _ in range(2)]
    dist.all_gather(out, torch.full((3,), float(rank)))
    check([o.tolist() for o in out] == [[0.0] * 3, [1.0] * 3], "all_gather")
    dist.barrier()

    if rank == 0:
        store_queries(dist, host, port)
    else:
        s = dist.TCPStore(host, port, None, False, timedelta(seconds=60), wait_for_workers=False, **no_libuv(dist))
        check(s.get("checks_done") == b"yes", "a get released by another client's set")
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d: ok" % rank)


def driver_main(store_host):
    try:
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        skip("torch is not importable by %s: %s" % (sys.executable, e))
    if not dist.is_available() or not dist.is_gloo_available():
        skip("this torch has no distributed gloo backend")
    host = subprocess.Popen([store_host], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    procs = []
    try:
        port = int(host.stdout.readline())
        print("our store server listens on 127.0.0.1:%d" % port, flush=True)
        for r in range(2):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                       TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
                       OMP_NUM_THREADS="1", USE_LIBUV="0")
            procs.append(subprocess.Popen([sys.executable, __file__, "--rank"], env=env))
        deadline = time.monotonic() + 150
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append("timeout")
        print("rank exit codes:", codes)
        return 0 if codes == [0, 0] else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        host.stdin.close()
        try:
            host.wait(timeout=10)
        except subprocess.TimeoutExpired:
            host.kill()


if __name__ == "__main__":
    if sys.argv[1:] == ["--rank"]:
        try:
            rank_main()
        except Exception as e:  # noqa: BLE001 - report and fail this rank
            print("rank %s: FAILED: %r" % (os.environ.get("RANK"), e), flush=True)
            sys.exit(1)
        sys.exit(0)
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(driver_main(sys.argv[1]))
