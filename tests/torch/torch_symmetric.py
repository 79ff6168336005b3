"""torch_symmetric.py - tensors from plexus.torch.alloc (memory every rank of
the host maps, plx_mem_alloc) under torch.distributed on "plexus", 2
processes, under auto (shm: its single-pass allreduce on such memory) and
tcp (ordinary memory behind the same call):
  - all_reduce in place on an alloc'd tensor gives the same bits as on an
    ordinary tensor with the same values, for f32, f64, bf16, i32 and i64
    under sum, max, min and product, at 8 B and 4 MiB + 36 B;
  - the tensor is zeroed, of the shape and dtype asked, 64-byte aligned;
  - 40 rounds of alloc and drop of 4 MiB leave the process's memory bounded;
  - a tensor outlives destroy_process_group and keeps its values;
  - a dtype that is not a torch.dtype and a group on gloo are refused.
Exit 0 if every check passes on every rank, 1 if not, 77 without torch or
plexus.torch.
"""
import os
import resource
import subprocess
import sys

from torch_needs import free_port  # beside this file

TIMEOUT = 240


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def check(ok, what, failures):
    if not ok:
        failures.append(what)


def bits(t):
    import torch
    return t.view(torch.uint8) if t.dtype != torch.bfloat16 else t.view(torch.int16)


def values(n, dtype, rank):
    import torch
    g = torch.Generator().manual_seed(17 + rank)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g, dtype=torch.float64) * 1000).to(dtype)
    return torch.randint(-3, 4, (n,), generator=g, dtype=dtype)


def rank_main(rank, P):
    import torch
    import torch.distributed as dist
    import plexus.torch
    dist.init_process_group("plexus", init_method="env://", rank=rank, world_size=P)
    failures = []
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
           "product": dist.ReduceOp.PRODUCT}
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64):
        for nbytes in (8, (4 << 20) + 36):
            n = max(1, nbytes // torch.tensor([], dtype=dtype).element_size())
            for name, op in ops.items():
                if name == "product" and nbytes > 8:
                    continue  # a product of a million values is inf or 0 either way
                t = plexus.torch.alloc([n], dtype)
                check(t.shape == (n,) and t.dtype == dtype and not t.any().item(), "alloc %s %d: not a zeroed tensor "
                      "of the shape and dtype asked" % (dtype, n), failures)
                check(t.data_ptr() % 64 == 0, "alloc: not 64-byte aligned", failures)
                v = values(n, dtype, rank)
                t.copy_(v)
                u = v.clone()
                dist.all_reduce(t, op=op)
                dist.all_reduce(u, op=op)
                check(torch.equal(bits(t), bits(u)), "all_reduce %s %s of %d: alloc'd tensor's bits differ from an "
                      "ordinary tensor's" % (name, dtype, n), failures)
    # alloc and drop: the memory is freed with the tensor
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(40):
        t = plexus.torch.alloc([1 << 20], torch.float32)
        t.fill_(1.0)
        dist.all_reduce(t)
        del t
    grew_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    check(grew_mib < 64, "40 x 4 MiB alloc and drop: peak memory grew %.0f MiB" % grew_mib, failures)
    # refusals
    try:
        plexus.torch.alloc([4], "float32")
        failures.append("alloc with a dtype that is not a torch.dtype was accepted")
    except (RuntimeError, TypeError, ValueError):
        pass
    gloo = dist.new_group(backend="gloo")
    try:
        plexus.torch.alloc([4], torch.float32, group=gloo)
        failures.append("alloc on a gloo group was accepted")
    except ValueError:
        pass
    # outliving the group
    keep = plexus.torch.alloc([1000], torch.float64)
    keep.fill_(rank + 1)
    dist.all_reduce(keep)
    dist.destroy_process_group()
    check(bool((keep == P * (P + 1) / 2).all().item()), "an alloc'd tensor lost its values after "
          "destroy_process_group", failures)
    for f in failures:
        print("rank %d: %s" % (rank, f), flush=True)
    return 1 if failures else 0


def main():
    try:
        import torch.distributed  # noqa: F401
    except ImportError as e:
        skip("torch not importable by %s: %s" % (sys.executable, e))
    try:
        import plexus.torch
        if not hasattr(plexus.torch, "alloc"):
            skip("this plexus.torch has no alloc")
    except ImportError as e:
        skip("plexus.torch is not built or not on PYTHONPATH: %s" % e)
    P = 2
    failed = 0
    for backend in ("auto", "tcp"):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
                   PYTHONWARNINGS="ignore", PLEXUS_BACKEND=backend)
        procs = [subprocess.Popen([sys.executable, "-B", __file__, "--rank", str(r), str(P)], env=env)
                 for r in range(P)]
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=TIMEOUT))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                codes.append("timeout")
        print("%s, %d processes: exit codes %s" % (backend, P, codes), flush=True)
        failed += any(c != 0 for c in codes)
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit(main())
