#!/usr/bin/python3
"""calibrate.py - fit sim's network model to this machine, then check it.

For each transport (tcp, shm) on real processes (plexus-run):
  1. measure: one-way point-to-point times by size (calib_pingpong, 2 ranks)
     and plexus-bench allreduce and allgather times (in place, float) at 2,
     3 and 4 ranks, every measurement repeated --reps times, the transports
     and runs interleaved within each repetition, medians kept; a sample
     runs enough operations to last about --sample-ms (from the row's
     previous sample), so a microsecond op is a mean over tens of
     thousands, not a few milliseconds that one preemption doubles;
  2. fit: alpha, beta, gamma, the wake-up, the memory, the head, another
     core's cache and the acknowledgement (a message's latency and ns per
     byte, the ns per byte a rank reduces, what a message within a host
     with more ranks than cores waits for its receiver to be woken and
     switched in, the ns more each byte costs where the data outgrows the
     cache, the ns more each of a copy's first bytes costs (no transport
     now: HEADS_OF), the ns more a byte costs while the core that wrote it
     still holds it in its own cache, whose size sysfs gives (shm:
     PRIVATE_OF), and what a message its receiver does not answer costs
     while the receiver sends elsewhere, loopback tcp's acknowledgement
     segment (tcp: ACK_OF), and what a message above the eager limit costs
     its sender, the handling of its receiver's ready notice, once per
     message where a pipeline overlaps the latency (tcp: RENDEZVOUS_OF),
     the core time a wake-up takes, which the ranks on the cores share, so
     it grows with the ranks a core holds (tcp: WAKE_CPU_OF; measure more
     ranks than --ranks' default to tell it from the wake-up's latency),
     and the ns more each copied byte costs by the share of the operation's
     buffers on the host beyond the host's cache) to the collectives at
     --fit-ranks (default 2, 3 and 4), every other size (8 B, 512 B,
     32 KiB, 2 MiB, 64 MiB: the sizes between are held out, and so is
     every row at a rank count left out of --fit-ranks), least squares in
     relative error with none negative, for each
     cache size of CACHES, head size of HEADS_OF and host's cache of
     HOST_CACHES; the smallest cache whose fit rows fit within 5% of the
     best is kept, then the smallest host's cache, with the best head (the
     fit sizes cannot tell caches between 2 MiB and 64 MiB apart); shm's
     host's cache is tcp's too (HOST_CACHE_FROM). The model's time is
     linear in the eleven where nothing contends, so
     plexus-whatif runs with one unit of each give every row's
     coefficients; the one-way times get
     their own alpha + beta n fit, printed for comparison (the core's
     collectives add their own cost per message);
  3. write the model as a [sim] drop-in, calib-<transport>.ini in --out
     (shm's with model_intra_native = shm: its allreduce and allgather are
     its own, priced by their schedule; tcp's run the core's algorithms),
     with the cores this machine has (os.cpu_count()): 3 and 4 ranks on 2
     cores time-share them, which the model then charges (tcp's waits yield
     the core when oversubscribed: model_yielding_waits; shm's spin first);
  4. predict every measured collective with plexus-whatif --model and print
     predicted against measured, with the error;
  5. write tuning-<transport>.txt, the model's fastest allreduce algorithm
     by size at each rank count (plexus-whatif --emit-tuning, over the
     core's generic algorithms, for shm too), for [core] tuner.

Rows whose measurement went into the fit are marked "fit"; "held out" rows
are predictions the fit never saw (the sizes between the fitted ones, and
every row at other rank counts). Beside each prediction: the previous
model, fitted the same way without the memory term and with the core's
generic algorithms for shm too ("previous model");
and whether the prediction lies within the samples' interquartile range.

    bench/calibrate.py [--build build] [--transports tcp,shm] [--reps 5] [--sample-ms 50] [--quiet-wait S] [--out DIR]
    bench/calibrate.py --quick ...   one repetition, 2 ranks, small sizes (for the test)
    bench/calibrate.py --measured DIR/calib-measured.json ...   fit again without measuring
"""
import argparse, csv, datetime, json, os, socket, statistics, subprocess, sys, tempfile, textwrap, time

SIZES = [8 << (3 * i) for i in range(8)] + [64 << 20]  # 8 B .. 16 MiB by factors of 8, and 64 MiB (held out)
QUICK_SIZES = [8, 512, 32768]
# The model's terms the fit sets: alpha, beta, gamma, the wake-up, the memory, the head, another core's cache, an
# unanswered message's acknowledgement, a rendezvous message's overhead, the host's memory, the wake-up's core time.
UNITS = 11


def run(cmd, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-600:]}")
    return p.stdout


def iters_for(size):
    """plexus-bench iterations of a row's first sample: tens of milliseconds per size, at least."""
    return 2000 if size <= 512 else 500 if size <= 32768 else 50 if size <= 2 << 20 else 10


def iters_after(size, last_us, sample_ms):
    """Iterations of a later sample: enough for sample_ms at the row's last time, never fewer than the first's."""
    return max(iters_for(size), min(200000, int(sample_ms * 1e3 / max(last_us, 1e-3))))


class Bench:
    def __init__(self, build, tmp):
        self.run_ = os.path.join(build, "tools", "plexus-run")
        self.bench = os.path.join(build, "tools", "plexus-bench")
        self.pingpong = os.path.join(build, "bench", "calib_pingpong")
        self.whatif = os.path.join(build, "tools", "plexus-whatif")
        self.tmp = tmp
        for exe in (self.run_, self.bench, self.pingpong, self.whatif):
            if not os.access(exe, os.X_OK):
                raise RuntimeError(f"{exe}: not built")

    def pingpong_us(self, transport, sizes):
        out = run([self.run_, "-n", "2", "--timeout", "300", self.pingpong, "--backend", transport,
                   "-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", str(sizes[1] // sizes[0] if len(sizes) > 1 else 2)])
        got = {}
        for line in out.splitlines():
            f = line.split("]", 1)[-1].split()  # plexus-run puts "[rank 0]" in front
            if len(f) == 2 and f[0].isdigit():
                got[int(f[0])] = float(f[1])
        return got

    def coll_us(self, transport, coll, ranks, size, iters):
        """plexus-bench's time for one size: the slowest rank's mean per op."""
        path = os.path.join(self.tmp, "bench.csv")
        run([self.run_, "-n", str(ranks), "--timeout", "300", self.bench, "--backend", transport, "--coll", coll,
             "--inplace", "-b", str(size), "-e", str(size), "-n", str(iters), "-w", "5",
             "--output", "csv", path])
        with open(path, newline="") as f:
            want = row_size(coll, ranks, size)
            rows = [r for r in csv.DictReader(f) if r["coll"] == coll and int(r["size_bytes"]) == want]
        if not rows:
            raise RuntimeError(f"plexus-bench wrote no {coll} row for {size} B")
        return float(rows[0]["time_us"])

    def emit_tuning(self, model, rank_counts, sizes, path):
        """The [core] tuner table of the model: each rank count's rows, in ascending order."""
        parts = []
        for P in rank_counts:
            part = os.path.join(self.tmp, f"tuning-{P}.txt")
            run([self.whatif, "--model", model, "--ranks", str(P), "-b", str(sizes[0]), "-e", str(sizes[-1]),
                 "-f", str(sizes[1] // sizes[0] if len(sizes) > 1 else 2), "--emit-tuning", part])
            with open(part) as f:
                parts.append(f.read())
        with open(path, "w") as f:
            f.write("".join(parts))

    def predict_us(self, model, coll, ranks, sizes):
        """plexus-whatif's modelled time per size (the core's own algorithm choice)."""
        path = os.path.join(self.tmp, "whatif.csv")
        got = {}
        # One run over the sizes by factors of 8, one each for any size off that series (64 MiB).
        series = [n for n in sizes if n in SIZES[:8]]
        runs = ([(series[0], series[-1])] if series else []) + [(n, n) for n in sizes if n not in series]
        for lo, hi in runs:
            run([self.whatif, "--model", model, "--ranks", str(ranks), "--coll", coll, "--algos", "auto",
                 "-b", str(lo), "-e", str(hi), "-f", "8", "--csv", path])
            with open(path, newline="") as f:
                got.update({int(r["bytes"]): float(r["time_us"]) for r in csv.DictReader(f)})
        return {n: got[row_size(coll, ranks, n)] for n in sizes}


def fit_alpha_beta(points):
    """t = alpha + beta * n for the one-way times, least squares in relative error."""
    rows = [([1.0, float(n)], t) for n, t in points.items()]
    alpha, beta = nnls(rows, 2)
    return alpha, beta  # us, us per byte


def solve(a, b):
    """a x = b by Gaussian elimination (a small and square), or None if singular (a pivot that is rounding noise
    against a's largest entry: a term whose unit costs nothing, as a head of 0 B, gives a row and column of 0)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    tiny = 1e-12 * max((abs(x) for row in a for x in row), default=0.0)
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) <= tiny:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def nnls(rows, k):
    """Non-negative x minimising sum(((coef . x) - t) / t)^2 over rows of (coef, t): every subset of the
    k parameters solved by least squares, the best one whose solution is >= 0 kept. A parameter whose coefficient is
    0 in every row stays 0."""
    best, best_x = None, [0.0] * k
    gram = [[sum(c[i] * c[j] / (t * t) for c, t in rows) for j in range(k)] for i in range(k)]
    rhs = [sum(c[i] / t for c, t in rows) for i in range(k)]
    live = [i for i in range(k) if gram[i][i] > 0]
    for mask in range(1, 1 << len(live)):
        free = [i for n, i in enumerate(live) if mask >> n & 1]
        a = [[gram[i][j] for j in free] for i in free]
        b = [rhs[i] for i in free]
        sol = solve(a, b)
        if sol is None or min(sol) < 0:
            continue
        x = [0.0] * k
        for i, v in zip(free, sol):
            x[i] = v
        err = sum(((sum(ci * xi for ci, xi in zip(c, x)) - t) / t) ** 2 for c, t in rows)
        if best is None or err < best:
            best, best_x = err, x
    return best_x


# How each transport waits for a message with more ranks than cores: tcp yields the core between looks
# (plugins/tcp/plugin.c spin_yield), shm spins first.
YIELDING_WAITS = {"tcp": "true", "shm": "false"}
# shm runs allreduce and allgather as its own native collectives (plugins/shm/coll.c), which the model prices by
# their schedule; tcp runs the core's generic algorithms, which the model runs over its messages.
NATIVE = {"tcp": "none", "shm": "shm"}
# Bytes above which a message waits for its receiver's ready notice (tcp's TCP_EAGER_MAX, plugins/tcp/tcp.h).
EAGER_LIMIT = {"tcp": 64 << 10}


def shape_keys(transport, cores, cache, head, native, serial, eager, private=0, host_cache=0):
    """The [sim] keys a fit does not set: the machine's cores, the cache, a copy's head, each core's own cache, the
    host's cache, and how the transport behaves (its waits, its own collectives, its copies, its eager limit;
    eager=False: none, as the previous model had)."""
    return (f"model_cores_per_host = {cores}\n"
            f"model_host_cache = {host_cache}\n"
            f"model_intra_private_cache = {private}\n"
            f"model_yielding_waits = {YIELDING_WAITS.get(transport, 'false')}\n"
            f"model_intra_cache = {cache}\n"
            f"model_intra_head = {head}\n"
            f"model_intra_native = {native}\n"
            f"model_intra_serial_copies = {'true' if serial else 'false'}\n"
            f"model_eager_limit = {EAGER_LIMIT.get(transport, 0) if eager else 0}\n")


def write_model(path, transport, alpha_us, beta_ns, gamma_ns, wake_us, mem_ns, head_ns, cache, head, note, cores,
                native, serial=False, eager=True, private_ns=0.0, private=0, ack_us=0.0, rdv_us=0.0, host_ns=0.0,
                host_cache=0, wake_cpu_us=0.0):
    """The [sim] drop-in; a bandwidth of 0 is the key's 'infinite' (beta, gamma, the memory's, the head's, the
    private cache's or the host's memory's 0)."""
    alpha_ns, wake_ns = round(alpha_us * 1e3), round(wake_us * 1e3)
    bandwidth = round(1e9 / beta_ns) if beta_ns > 0 else 0
    reduce_bw = round(1e9 / gamma_ns) if gamma_ns > 0 else 0
    memory_bw = round(1e9 / mem_ns) if mem_ns > 0 else 0
    head_bw = round(1e9 / head_ns) if head_ns > 0 else 0
    private_bw = round(1e9 / private_ns) if private_ns > 0 else 0
    host_bw = round(1e9 / host_ns) if host_ns > 0 else 0
    # The config reader takes lines of up to 198 characters, comments too: each part wrapped within that.
    parts = [f"sim's network model of {transport} on {socket.gethostname()}, written by bench/calibrate.py", note,
             f"alpha {alpha_us:.3f} us, beta {beta_ns:.4f} ns/B, gamma {gamma_ns:.4f} ns/B, wake-up {wake_us:.3f} us, "
             f"memory {mem_ns:.4f} ns/B beyond {cache} B, head {head_ns:.4f} ns/B of a copy's first {head} B",
             f"another core's cache {private_ns:.4f} ns/B of {private} B, an unanswered message's ACK {ack_us:.3f} us, "
             f"a rendezvous message's overhead {rdv_us:.3f} us, "
             f"the host's memory {host_ns:.4f} ns/B beyond {host_cache} B, a wake-up's core time {wake_cpu_us:.3f} us"]
    with open(path, "w") as f:
        f.write("".join(f"# {line}\n" for part in parts for line in textwrap.wrap(part, 150))
                + "[sim]\n"
                "model = true\n"
                "model_ranks_per_host = 0\n"
                f"model_wake_latency = {wake_ns}ns\n"
                f"model_wake_cpu = {round(wake_cpu_us * 1e3)}ns\n"
                f"model_intra_latency = {alpha_ns}ns\n"
                f"model_intra_bandwidth = {bandwidth}\n"
                f"model_reduce_bandwidth = {reduce_bw}\n"
                f"model_intra_memory_bandwidth = {memory_bw}\n"
                f"model_intra_head_bandwidth = {head_bw}\n"
                f"model_intra_private_bandwidth = {private_bw}\n"
                f"model_intra_ack = {round(ack_us * 1e3)}ns\n"
                f"model_rendezvous_overhead = {round(rdv_us * 1e3)}ns\n"
                f"model_host_memory_bandwidth = {host_bw}\n"
                + shape_keys(transport, cores, cache, head, native, serial, eager, private, host_cache))


def unit_coefficients(b, tmp, colls, rank_counts, sizes, cores, transport, cache, head, native, serial=False,
                      eager=True, only=range(UNITS), private=0, host_cache=0):
    """The model's time is alpha, beta, gamma, the wake-up, the memory's cost per byte beyond the cache, a copy's
    head's cost per byte, that of a byte read from another core's own cache, an unanswered message's
    acknowledgement, a rendezvous message's overhead, the host's memory's cost per byte beyond the host's cache and
    a wake-up's core time times what each alone costs on the critical path (exactly so without contention;
    time-sharing stretches each by the same factor in every run): per (coll, ranks, size), plexus-whatif's time
    with each at one unit (1 us; 1 ns/B), the cache at cache bytes, the head at head bytes, each core's own cache at
    private bytes, the host's at host_cache bytes, allreduce and allgather native as native says
    (model_intra_native). Units not in only are left at 0: the cache matters to the memory's unit alone, the head
    to the head's, the private cache to its own, the host's cache to the host's memory's."""
    one = {0: ("intra_latency", "1000ns"), 1: ("intra_bandwidth", "1000000000"),
           2: ("reduce_bandwidth", "1000000000"),
           3: ("wake_latency", "1000ns"), 4: ("intra_memory_bandwidth", "1000000000"),
           5: ("intra_head_bandwidth", "1000000000"), 6: ("intra_private_bandwidth", "1000000000"),
           7: ("intra_ack", "1000ns"), 8: ("rendezvous_overhead", "1000ns"), 9: ("host_memory_bandwidth", "1000000000"),
           10: ("wake_cpu", "1000ns")}
    coef = {}
    for u in range(UNITS):
        if u not in only:
            continue
        model = os.path.join(tmp, f"unit{u}.ini")
        with open(model, "w") as f:
            # Each term at 0 but this one: a bandwidth of 0 is free, a duration of 0 is none.
            f.write("[sim]\nmodel = true\n" + "".join(f"model_{k} = {v if i == u else '0'}\n"
                                                      for i, (k, v) in one.items())
                    + shape_keys(transport, cores, cache, head, native, serial, eager, private, host_cache))
        for coll in colls:
            for P in rank_counts:
                for n, us in b.predict_us(model, coll, P, sizes_for(coll, P, sizes)).items():
                    coef.setdefault((coll, P, n), [0.0] * UNITS)[u] = us
    return coef


def row_size(coll, P, n):
    """The bytes a row of nominal size n moves: an allgather's, whole floats from each of P ranks (as plexus-bench
    and plexus-whatif round it)."""
    return n // (4 * P) * 4 * P if coll == "allgather" else n


def sizes_for(coll, P, sizes):
    """An allgather row's size is what each rank receives: at least one float from each rank."""
    return [n for n in sizes if coll != "allgather" or n >= 4 * P]


def cpu_times():
    """All CPUs' (busy, total) jiffies so far, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def wait_quiet(max_busy, max_wait_s, look_s=0.2):
    """Wait, between samples, until the machine's CPUs were busy at most max_busy of the time over look_s (nothing
    of ours runs then: what is busy is foreign), at most max_wait_s (one look at 0); True if it got quiet."""
    end = time.monotonic() + max_wait_s
    while True:
        b0, t0 = cpu_times()
        time.sleep(look_s)
        b1, t1 = cpu_times()
        if t1 > t0 and (b1 - b0) / (t1 - t0) <= max_busy:
            return True
        if time.monotonic() >= end:
            return False


def measure(b, transports, colls, rank_counts, sizes, reps, sample_ms, quiet_wait_s, quiet_budget_s):
    """reps interleaved repetitions: one-way times and collective times, every sample; each sample waits up to
    quiet_wait_s for the machine's foreign work to pause (under a quarter of its CPUs busy), all of them together
    at most quiet_budget_s. Also returns, per collective sample, whether it began after such a pause."""
    pp, meas, calm = {t: {} for t in transports}, {}, {}
    loud = total = 0
    budget_end = time.monotonic() + quiet_budget_s
    for rep in range(reps):
        for t in transports:
            for n, us in b.pingpong_us(t, sizes).items():
                pp[t].setdefault(n, []).append(us)
            for coll in colls:
                for P in rank_counts:
                    for n in sizes_for(coll, P, sizes):
                        got = meas.setdefault((t, coll, P, n), [])
                        iters = iters_after(n, got[-1], sample_ms) if got else iters_for(n)
                        quiet = quiet_wait_s <= 0 or wait_quiet(
                            0.25, max(0.0, min(quiet_wait_s, budget_end - time.monotonic())))
                        loud += not quiet
                        total += 1
                        got.append(b.coll_us(t, coll, P, n, iters))
                        calm.setdefault((t, coll, P, n), []).append(quiet)
        print(f"# repetition {rep + 1} done, load average {os.getloadavg()[0]:.1f}; {loud} of {total} samples so far "
              f"began while the CPUs were busier than 25% after {quiet_wait_s:g} s of waiting", flush=True)
    return pp, meas, calm


def within_iqr(p, samples):
    """Whether p lies between the samples' quartiles."""
    if len(samples) < 2:
        return abs(p - samples[0]) <= 0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1 <= p <= q3


def fit_model(coef, med, t, fitted, k):
    """The first k of alpha (us), beta (ns/B), gamma (ns/B), wake-up (us), memory (ns/B beyond the cache), head
    (ns/B of a copy's first bytes), another core's cache (ns/B), an unanswered message's acknowledgement (us), a
    rendezvous message's overhead (us), the host's memory (ns/B beyond the host's cache), a wake-up's core time (us)
    fitted to the fitted rows of transport t (the rest 0), and the fit's sum of squared relative errors."""
    rows = [(coef[(coll, P, n)][:k], m) for (tt, coll, P, n), m in med.items() if tt == t and fitted(P, n)]
    x = nnls(rows, k)
    err = sum(((sum(ci * xi for ci, xi in zip(c, x)) - m) / m) ** 2 for c, m in rows)
    return x + [0.0] * (UNITS - k), err


# The cache sizes the fit tries for model_intra_cache: it keeps the smallest whose fit rows' error is within
# CACHE_TIE of the best's.
CACHE_TIE = 0.05
# The head sizes it tries for model_intra_head, with each cache, where a transport's copies have one (HEADS_OF).
HEADS = [4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20]
# None is fitted one now. shm's mid sizes are the private cache's (below): its size read off the machine, it fits
# as many rows as a head and the private cache together or more, on each of six measured sets, with one term less
# fitted and no size to guess (the fit sizes cannot tell heads from 32 KiB to 2 MiB apart). tcp's mid sizes vary
# with whether its wait spins or sleeps, not with their bytes, and a head fitted to that prices every 4 KiB message.
HEADS_OF = {}
# shm's copies read what another core wrote: from that core's own cache while the working set fits it (and only
# then: beyond it the lines were evicted to the cache the cores share, which serves them faster). The size is read
# off the machine (private_cache_bytes), so only its cost is fitted. tcp's kernel copies are not fitted one (as
# the head).
PRIVATE_OF = {"shm"}
# Loopback tcp acknowledges a message its receiver does not answer with a segment of its own (a ring's, a tree's, a
# fold's), CPU work at both ends: about two segments per message then, one in an exchange (Tcp OutSegs in
# /proc/net/snmp). shm has no such thing.
ACK_OF = {"tcp"}
# Above its eager limit (EAGER_LIMIT) tcp's sender waits for its receiver's ready notice, a small message of its own
# that both ends handle in their progress loops, once per message: a 2-rank allreduce costs more the smaller its
# segments, by more than their bytes, where the model's pipeline paid the latency once.
RENDEZVOUS_OF = {"tcp"}
# A tcp rank that waits yields its core, then sleeps, so with more ranks than cores most messages wake their
# receiver: the kernel's wake-up and the switches are core time the ranks share, and a round of P ranks on C cores
# costs P/C of it a message. Only measurements beyond the default 2-4 ranks tell it from the wake-up's latency
# (bench/cluster_predict.py's cluster runs 8 a core); without them the fit leaves it at 0 or near it. shm spins
# first, and its ranks rarely sleep.
WAKE_CPU_OF = {"tcp"}

CACHES = [32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20]
# The sizes it tries for model_host_cache, the cache the host's ranks share for their operation's buffers.
HOST_CACHES = [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20]
# Transports whose fit rows tell the host's cache: shm's working sets (every rank's buffers and its slots) at 2 MiB
# span 6 to 16 MiB over 2 to 4 ranks, and its copies pay by the share beyond the cache. tcp's 2 MiB rows span 4 to
# 8 MiB and their messages pay a cache of their own, so every host's cache from 2 to 64 MiB fits them within the
# tie, and the 16 MiB rows it decides are held out: tcp takes shm's.
HOST_CACHE_FROM = {"shm"}


def private_cache_bytes(cpu=0):
    """The largest data or unified cache that cpu's core has to itself (sysfs; L2 on most x86 parts): shared by no
    CPU beyond the core's own hardware threads. 0 if none is listed."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None
    base = f"/sys/devices/system/cpu/cpu{cpu}"
    core = read(f"{base}/topology/thread_siblings_list") or str(cpu)  # "0", or "0,64" with SMT
    try:
        entries = [e for e in os.listdir(f"{base}/cache") if e.startswith("index")]
    except OSError:
        return 0
    best = 0
    for e in entries:
        kind, shared, size = (read(f"{base}/cache/{e}/{k}") for k in ("type", "shared_cpu_list", "size"))
        if not size or kind == "Instruction" or shared not in (core, str(cpu)):
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        best = max(best, int(size.rstrip("KMG")) * mult)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--transports", default="tcp,shm")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("REPS", "5")),
                    help="repetitions (default: REPS from the environment, else 5)")
    ap.add_argument("--sample-ms", type=float, default=50.0,
                    help="a sample's length after the first (its operations from the row's last time)")
    ap.add_argument("--quiet-wait", type=float, default=0.0,
                    help="seconds each sample waits at most for the machine's other work to pause (default 0)")
    ap.add_argument("--quiet-budget", type=float, default=600.0, help="seconds all samples wait at most together")
    ap.add_argument("--quiet-only", action="store_true",
                    help="medians over the samples begun after a pause in the others' work, where a row has 3")
    ap.add_argument("--out", default=".", help="folder for calib-<transport>.ini")
    ap.add_argument("--ranks", default="2,3,4", help="rank counts measured")
    ap.add_argument("--fit-ranks", default="2,3,4",
                    help="rank counts whose collectives the fit uses, every other size (the rest: held out); "
                         "2,4 holds out every row at 3 ranks too")
    ap.add_argument("--quick", action="store_true", help="one repetition, 2 ranks, allreduce, 8 B .. 32 KiB")
    ap.add_argument("--measured", help="fit and predict from this calib-measured.json instead of measuring")
    ap.add_argument("--serial-copies", action="store_true",
                    help="fit and write model_intra_serial_copies = true: a rank's copies in and out within the host "
                         "share its core (an exchange pays both; the fit, linear, counts both copies where the model "
                         "takes the later of latency + one copy and two copies); the previous model never has it")
    ap.add_argument("--cores", type=int, default=os.cpu_count(),
                    help="this machine's cores, written to the model (default: os.cpu_count())")
    a = ap.parse_args()
    transports = [t for t in a.transports.split(",") if t]
    sizes = QUICK_SIZES if a.quick else SIZES
    reps = 1 if a.quick else a.reps
    rank_counts = [2] if a.quick else sorted({int(x) for x in a.ranks.split(",")})
    fit_ranks = {int(x) for x in a.fit_ranks.split(",")}
    colls = ["allreduce"] if a.quick else ["allreduce", "allgather"]
    os.environ.setdefault("PLEXUS_CONFIG_PATH", os.path.join(os.path.abspath(a.build), "devconfig"))
    load = os.getloadavg()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            b = Bench(a.build, tmp)
        except RuntimeError as e:
            sys.exit(f"calibrate: {e}")
        print(f"# calibrate: {reps} repetition(s) of {len(sizes)} sizes at {rank_counts} ranks; load average at "
              f"start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
        saved = os.path.join(a.out, "calib-measured.json")
        if a.measured:
            with open(a.measured) as f:
                doc = json.load(f)
            load, reps = doc["load"], doc["reps"]
            print(f"# the measurements of {a.measured}: {reps} repetition(s), load average {load[0]:.1f} at their start")
            raw_pp = {t: {int(n): v for n, v in d.items()} for t, d in doc["one_way"].items()}
            raw = {(k.split("/")[0], k.split("/")[1], int(k.split("/")[2]), int(k.split("/")[3])): v
                   for k, v in doc["collectives"].items()}
            calm = {(k.split("/")[0], k.split("/")[1], int(k.split("/")[2]), int(k.split("/")[3])): v
                    for k, v in doc.get("quiet", {}).items()}
            rank_counts = sorted({P for _, _, P, _ in raw})
            sizes = sorted({n for _, _, _, n in raw})  # an older file may lack 64 MiB
        else:
            raw_pp, raw, calm = measure(b, transports, colls, rank_counts, sizes, reps, a.sample_ms, a.quiet_wait,
                                        a.quiet_budget)
            with open(saved, "w") as f:
                json.dump({"load": load, "reps": reps, "private_cache": private_cache_bytes(), "one_way": raw_pp,
                           "collectives": {"/".join(map(str, k)): v for k, v in raw.items()},
                           "quiet": {"/".join(map(str, k)): v for k, v in calm.items()}}, f, indent=1)
        if a.quiet_only:
            # Rows with at least 3 samples begun after a pause in the others' work keep those alone.
            kept = {k: [x for x, q in zip(v, calm.get(k, [])) if q] for k, v in raw.items()}
            print(f"# --quiet-only: {sum(len(kept[k]) >= 3 for k in raw)} of {len(raw)} rows keep only their samples "
                  "begun after a pause (at least 3); the others keep all")
            raw = {k: kept[k] if len(kept[k]) >= 3 else v for k, v in raw.items()}
        pp = {t: {n: statistics.median(v) for n, v in d.items()} for t, d in raw_pp.items()}
        med = {k: statistics.median(v) for k, v in raw.items()}
        print(f"# cores: {a.cores} (os.cpu_count() {os.cpu_count()}); ranks beyond them time-share them in the model")
        private_cache = doc.get("private_cache", private_cache_bytes()) if a.measured else private_cache_bytes()
        print(f"# each core's own cache: {private_cache} B (0: none listed, the term is left out)")
        # Every other size at the fit's rank counts; all of them in --quick, which has too few.
        fit_sizes = set(sizes if a.quick else sizes[0::2])
        fit_at = [P for P in rank_counts if P in fit_ranks]
        held_at = [P for P in rank_counts if P not in fit_ranks]
        print(f"# fit: every other size ({', '.join(str(n) for n in sorted(fit_sizes))} B) at {fit_at} ranks; "
              f"held out: the sizes between at {fit_at} ranks, and every size at {held_at or 'no other'} ranks")

        def fitted(P, n):
            return P in fit_ranks and n in fit_sizes

        # count[(model, P, fit or held)] = [rows, within 20%, in the IQR]
        count, worst, spreads = {}, {}, []
        # The host's cache is the machine's, whichever transport runs: the first transport of HOST_CACHE_FROM fitted
        # sets it for the others, whose fit rows cannot tell it (see HOST_CACHE_FROM); they keep their own otherwise.
        host_cache_of = None
        for t in sorted(transports, key=lambda t: t not in HOST_CACHE_FROM):
            p_alpha, p_beta = fit_alpha_beta(pp[t])
            fits = []
            native = NATIVE.get(t, "none")

            def unit(u, cache, head, host_cache=0):
                return unit_coefficients(b, tmp, colls, rank_counts, sizes, a.cores, t, cache, head, native,
                                         a.serial_copies, only=[u], host_cache=host_cache)

            # Only the memory's unit depends on the cache, and only the head's on the head: the others once.
            base = unit_coefficients(b, tmp, colls, rank_counts, sizes, a.cores, t, 0, 0, native, a.serial_copies,
                                     only=range(4))
            # The transport's own terms (another core's cache, the acknowledgement, the rendezvous overhead) in one
            # more run; a term left out has a column of 0, which the fit leaves at 0, as has a head of 0 B.
            private = private_cache if t in PRIVATE_OF else 0
            rendezvous = t in RENDEZVOUS_OF and t in EAGER_LIMIT
            own = [u for u, on in ((6, private), (7, t in ACK_OF), (8, rendezvous), (10, t in WAKE_CPU_OF)) if on]
            extra = unit_coefficients(b, tmp, colls, rank_counts, sizes, a.cores, t, 0, 0, native, a.serial_copies,
                                      only=own, private=private) if own else {k: [0.0] * UNITS for k in base}
            mem_of = {cache: unit(4, cache, 0) for cache in CACHES}
            heads = HEADS_OF.get(t, [0])
            head_of = {head: unit(5, 0, head) if head else {k: [0.0] * UNITS for k in base} for head in heads}
            host_caches = [host_cache_of] if host_cache_of is not None else HOST_CACHES
            host_of = {hc: unit(9, 0, 0, hc) for hc in host_caches}
            for cache in CACHES:
                for head in heads:
                    for hc in host_caches:
                        coef = {k: v[:4] + [mem_of[cache][k][4], head_of[head][k][5]] + extra[k][6:9]
                                + [host_of[hc][k][9], extra[k][10]] for k, v in base.items()}
                        x, err = fit_model(coef, med, t, fitted, UNITS)
                        fits.append((err, cache, head, hc, x))
                best_c = min(f for f in fits if f[1] == cache)
                print(f"# {t}: cache {cache} B: fit rows' squared relative error {best_c[0]:.4f} "
                      f"(head {best_c[2]} B, host's cache {best_c[3]} B)", flush=True)
            # The fit sizes jump 32-fold from 2 MiB to 64 MiB, so caches between fit them about equally well:
            # of those within CACHE_TIE of the best, keep the smallest (a message's copies outgrow a core's
            # own cache first), then the smallest host's cache among its fits within the tie, with its best head.
            best = min(f[0] for f in fits)
            near = [f for f in fits if f[0] <= best * (1 + CACHE_TIE)]
            cache = min(f[1] for f in near)
            host_cache = min(f[3] for f in near if f[1] == cache)
            for hc in host_caches:
                best_h = min(f for f in fits if f[3] == hc)
                print(f"# {t}: host's cache {hc} B: fit rows' squared relative error {best_h[0]:.4f} "
                      f"(cache {best_h[1]} B)" + (" (the host's cache of the transport fitted first)"
                                                  if host_cache_of is not None else ""), flush=True)
            if t in HOST_CACHE_FROM and host_cache_of is None:
                host_cache_of = host_cache
            _, _, head, _, (alpha, beta_ns, gamma_ns, wake, mem_ns, head_ns, private_ns, ack_us, rdv_us, host_ns,
                            wake_cpu_us) = min(
                (f for f in fits if f[1] == cache and f[3] == host_cache), key=lambda f: f[0])
            # The previous model: the core's generic algorithms over messages, no memory term.
            old, _ = fit_model(unit_coefficients(b, tmp, colls, rank_counts, sizes, a.cores, t, CACHES[0], 0, "none",
                                                 eager=False, only=range(4)), med, t, fitted, 4)
            model = os.path.join(a.out, f"calib-{t}.ini")
            note = (f"fitted to plexus-bench {'/'.join(colls)} at {'/'.join(map(str, fit_at))} ranks, medians of "
                    f"{reps} interleaved repetition(s), sizes {', '.join(str(n) for n in sorted(fit_sizes))}; "
                    f"load average {load[0]:.1f} at the start; "
                    f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
            write_model(model, t, alpha, beta_ns, gamma_ns, wake, mem_ns, head_ns, cache, head, note, a.cores, native,
                        a.serial_copies, private_ns=private_ns, private=private, ack_us=ack_us, rdv_us=rdv_us,
                        host_ns=host_ns, host_cache=host_cache, wake_cpu_us=wake_cpu_us)
            prev = os.path.join(tmp, f"prev-{t}.ini")
            write_model(prev, t, *old[:4], 0.0, 0.0, 0, 0, "the previous fit: generic algorithms, no memory term",
                        a.cores, "none", eager=False)
            tuning = os.path.join(a.out, f"tuning-{t}.txt")
            # The tuner picks among the core's generic algorithms: time them as such, even where the transport's
            # own collectives run instead (shm).
            generic = os.path.join(tmp, f"generic-{t}.ini")
            write_model(generic, t, alpha, beta_ns, gamma_ns, wake, mem_ns, head_ns, cache, head, note, a.cores,
                        "none", a.serial_copies, private_ns=private_ns, private=private, ack_us=ack_us, rdv_us=rdv_us,
                        host_ns=host_ns, host_cache=host_cache, wake_cpu_us=wake_cpu_us)
            b.emit_tuning(generic, rank_counts, sizes, tuning)
            print(f"\n## {t}: alpha {alpha:.2f} us, beta {beta_ns:.4f} ns/B "
                  f"({1 / beta_ns if beta_ns else float('inf'):.2f} GB/s), gamma {gamma_ns:.4f} ns/B, "
                  f"wake-up {wake:.2f} us, memory {mem_ns:.4f} ns/B beyond {cache} B, head {head_ns:.4f} ns/B of a "
                  f"copy's first {head} B, another core's cache {private_ns:.4f} ns/B of {private} B, an unanswered "
                  f"message's ACK {ack_us:.3f} us, a rendezvous message's overhead {rdv_us:.3f} us, the host's memory "
                  f"{host_ns:.4f} ns/B beyond {host_cache} B, a wake-up's core time {wake_cpu_us:.3f} us -> {model}, "
                  f"tuner table {tuning}")
            print(f"(previous model, generic algorithms, no memory term: alpha {old[0]:.2f} us, beta {old[1]:.4f} ns/B, gamma {old[2]:.4f} ns/B, "
                  f"wake-up {old[3]:.2f} us)")
            print(f"(point-to-point alone, calib_pingpong: alpha {p_alpha:.2f} us, beta {p_beta * 1e3:.4f} ns/B)")
            print("\n| one-way, 2 ranks | size (B) | measured (us) | samples min..max (us) | ping-pong fit (us) | error |\n"
                  "|---|---|---|---|---|---|")
            for n in sorted(pp[t]):
                f, v = p_alpha + p_beta * n, raw_pp[t][n]
                print(f"| {t} | {n} | {pp[t][n]:.2f} | {min(v):.2f}..{max(v):.2f} | {f:.2f} | "
                      f"{100 * (f - pp[t][n]) / pp[t][n]:+.1f}% |")
            print("\n| collective | ranks | size (B) | measured median (us) | samples q1..q3, min..max (us) | "
                  "predicted (us) | error | in IQR | | previous model (us) | error | |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|---|")
            for coll in colls:
                for P in rank_counts:
                    pred = b.predict_us(model, coll, P, sizes_for(coll, P, sizes))
                    prev_pred = b.predict_us(prev, coll, P, sizes_for(coll, P, sizes))
                    for n in sizes_for(coll, P, sizes):
                        m, p, q, v = med[(t, coll, P, n)], pred[n], prev_pred[n], raw[(t, coll, P, n)]
                        err, qerr = (p - m) / m, (q - m) / m
                        spreads.append((max(v) - min(v)) / m)
                        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else (m, m, m)
                        role = "fit" if fitted(P, n) else "held out"
                        prev_role = role
                        for name, r, e, pr in (("new", role, err, p), ("prev", prev_role, qerr, q)):
                            c = count.setdefault((name, t, P, r), [0, 0, 0])
                            c[0] += 1
                            c[1] += abs(e) <= 0.2
                            c[2] += within_iqr(pr, v)
                            worst[(name, t, P, r)] = max(worst.get((name, t, P, r), 0.0), abs(e))
                        print(f"| {coll} | {P} | {row_size(coll, P, n)} | {m:.2f} | {q1:.2f}..{q3:.2f}, {min(v):.2f}..{max(v):.2f} | "
                              f"{p:.2f} | {100 * err:+.1f}% | {'yes' if within_iqr(p, v) else 'no'} | {role} | "
                              f"{q:.2f} | {100 * qerr:+.1f}% | {prev_role} |")
        if not a.quick:
            print("\n| model | transport | ranks | rows | within 20% | in the samples' IQR | worst error |\n"
                  "|---|---|---|---|---|---|---|")
            for name, label in (("new", "fitted at " + "+".join(map(str, fit_at)) + " ranks, memory term, shm native"),
                                ("prev", "the previous model (generic algorithms, no memory term)")):
                for t in transports:
                    for P in rank_counts:
                        for r in ("fit", "held out"):
                            c = count.get((name, t, P, r))
                            if c:
                                print(f"| {label} | {t} | {P}, {r} | {c[0]} | {c[1]} | {c[2]} | "
                                      f"{100 * worst[(name, t, P, r)]:.0f}% |")
            for name in ("new", "prev"):
                for r in ("held out", "fit"):
                    tot = [sum(c[i] for (nm, _, _, rr), c in count.items() if nm == name and rr == r) for i in range(3)]
                    print(f"# {name} model, {r} rows: {tot[1]} of {tot[0]} within 20%, {tot[2]} in the IQR")
            print(f"# the samples' spread, (max - min) / median, over all collective rows: median "
                  f"{100 * statistics.median(spreads):.0f}%, largest {100 * max(spreads):.0f}%")


if __name__ == "__main__":
    main()
