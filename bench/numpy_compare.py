#!/usr/bin/python3
"""numpy_compare.py BUILD [--reps N] - allreduce of float32 numpy arrays from
Python on plexus (bench/numpy_allreduce.py under plexus-run), the same in C
(plexus-bench, in place) and mpi4py over Open MPI (mpirun; vader for shared
memory, tcp on loopback), on shm and tcp, 2 and 4 processes, 8 B to 64 MiB.
Each configuration runs N times (default 3) in turn; the table shows the
median time per call in microseconds. Skips mpi4py where it is missing.

    PYTHONPATH=build/python /usr/bin/python3 bench/numpy_compare.py build
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL = ["-b", "8", "-e", "64K", "-f", "8", "-n", "200", "-w", "20"]
LARGE = ["-b", "1M", "-e", "64M", "-f", "4", "-n", "10", "-w", "2"]
MPI_BTL = {"shm": "self,vader", "tcp": "self,tcp"}


def rows(text):
    """{bytes: time_us} from plexus-bench's or numpy_allreduce.py's output."""
    out = {}
    for line in text.splitlines():
        f = line.split("]")[-1].split()
        if len(f) >= 2 and f[0].isdigit():
            out[int(f[0])] = float(f[-4] if len(f) > 6 else f[1])
    return out


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if p.returncode:
        print("FAILED (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout[-2000:]), file=sys.stderr)
        return {}
    return rows(p.stdout)


def job(lib, backend, n, build, env):
    py = [sys.executable, "-B", os.path.join(HERE, "numpy_allreduce.py")]
    prun = [os.path.join(build, "tools", "plexus-run"), "-n", str(n), "--backend", backend, "--timeout", "300"]
    res = {}
    for sizes in (SMALL, LARGE):
        if lib == "python":
            cmd = prun + py + ["--lib", "plexus"] + sizes
        elif lib == "C":
            cmd = prun + [os.path.join(build, "tools", "plexus-bench"), "--inplace"] + sizes
        else:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(n), "--mca", "pml", "ob1",
                   "--mca", "btl", MPI_BTL[backend], "--mca", "btl_tcp_if_include", "lo"] + py + ["--lib", "mpi4py"]
            cmd += sizes
        res.update(run(cmd, env))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.setdefault("PYTHONPATH", os.path.join(build, "python"))
    env.setdefault("PLEXUS_LIBRARY", os.path.join(build, "core", "libplexus.so.0.1.0"))
    env.setdefault("PLEXUS_CONFIG_PATH", os.path.join(build, "devconfig"))
    libs = ["python", "C"]
    if shutil.which("mpirun") and subprocess.run([sys.executable, "-c", "import mpi4py"]).returncode == 0:
        libs.append("mpi4py")
    else:
        print("# mpi4py or mpirun missing: no mpi4py column")
    with open("/proc/loadavg") as f:
        print("# load average before: %s" % " ".join(f.read().split()[:3]))
    for backend in ("shm", "tcp"):
        for n in (2, 4):
            times = {lib: {} for lib in libs}
            for _ in range(args.reps):
                for lib in libs:
                    for size, t in job(lib, backend, n, build, env).items():
                        times[lib].setdefault(size, []).append(t)
            print("\n# %s, %d processes: median us per allreduce (float32, in place) of %d runs"
                  % (backend, n, args.reps))
            print("%10s " % "bytes" + " ".join("%12s" % lib for lib in libs) + "   python/C")
            for size in sorted(times["C"]):
                med = {lib: statistics.median(times[lib][size]) if times[lib].get(size) else float("nan")
                       for lib in libs}
                print("%10d " % size + " ".join("%12.2f" % med[lib] for lib in libs) +
                      "   %8.2f" % (med["python"] / med["C"]), flush=True)
    with open("/proc/loadavg") as f:
        print("\n# load average after: %s" % " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
