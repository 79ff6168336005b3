#!/usr/bin/python3
"""numpy_allreduce.py - allreduce of float32 numpy arrays (SUM, in place)
timed as plexus-bench times it: warm-up, a barrier, then back-to-back
blocking calls; a row's time is the slowest rank's average per call.

    plexus-run -n 4 /usr/bin/python3 bench/numpy_allreduce.py --lib plexus
    mpirun -n 4 /usr/bin/python3 bench/numpy_allreduce.py --lib mpi4py

Prints "BYTES TIME_US" rows on rank 0 (bench/numpy_compare.py reads them).
--overhead (one rank: plexus-run -n 1) times instead what the Python layer
adds to an 8-byte allreduce: comm.allreduce against the bare ctypes call of
plx_allreduce on the same array and the same call prepared once
(comm.prepare, then run()), the median of 5 batches of 20000.
"""
import statistics
import argparse
import time

import numpy as np


def nbytes_arg(text):
    """"8", "64K", "64M" -> bytes (plexus-bench's suffixes)."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def sizes(lo, hi, factor):
    s = lo
    while s <= hi:
        yield s
        s *= factor


def timed(allreduce, barrier, x, warmup, iters):
    for _ in range(warmup):
        allreduce(x)
    barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        allreduce(x)
    return (time.perf_counter() - t0) / iters * 1e6


def overhead():
    import plexus
    with plexus.init() as comm:
        x = np.ones(2, np.float32)
        lib, h, ptr = plexus._lib.lib(), comm._h, x.ctypes.data
        prepared = comm.prepare("allreduce", x)

        def batch(f, n=20000):
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            return (time.perf_counter() - t0) / n * 1e6

        forms = {"comm.allreduce": lambda: comm.allreduce(x),
                 "ctypes plx_allreduce": lambda: lib.plx_allreduce(h, ptr, ptr, 2, 8, 0),
                 "prepared run()": prepared.run}
        res = {k: [] for k in forms}
        for _ in range(5):
            for k, f in forms.items():
                res[k].append(batch(f))
        for k, v in res.items():
            print("%-22s %8.2f us (median of %s)" % (k, statistics.median(v), " ".join("%.2f" % t for t in v)))
        prepared.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=("plexus", "mpi4py"), default="plexus")
    ap.add_argument("-b", "--minbytes", type=nbytes_arg, default=8)
    ap.add_argument("-e", "--maxbytes", type=nbytes_arg, default=64 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("--overhead", action="store_true", help="the Python layer's cost per call (one rank)")
    args = ap.parse_args()
    if args.overhead:
        return overhead()
    if args.lib == "plexus":
        import plexus
        comm = plexus.init()
        rank, size, name = comm.rank, comm.size, "plexus %s (Python)" % comm.backend
        allreduce, barrier = comm.allreduce, comm.barrier

        def slowest(t):
            return float(comm.allreduce(np.array([t]), op=plexus.MAX)[0])
    else:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank, size, name = comm.Get_rank(), comm.Get_size(), "mpi4py %s" % MPI.Get_library_version().split(",")[0]

        def allreduce(x):
            comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)

        barrier = comm.Barrier

        def slowest(t):
            return comm.allreduce(t, op=MPI.MAX)
    if rank == 0:
        print("# %s, %d ranks, float32 sum in place, %d iterations (+%d warm-up)" % (name, size, args.iters,
                                                                                     args.warmup), flush=True)
    for nbytes in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        x = np.ones(nbytes // 4, np.float32)
        t = slowest(timed(allreduce, barrier, x, args.warmup, args.iters))
        if rank == 0:
            print("%12d %12.2f" % (nbytes, t), flush=True)
    if args.lib == "plexus":
        comm.destroy()


if __name__ == "__main__":
    main()
