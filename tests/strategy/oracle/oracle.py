"""oracle.py PLEXUS_RUN ORACLE_RANK - PyTorch as the oracle of plexus's
strategies. From one set of initial weights and data (written here as raw
f32 files), the same models are trained

  by plexus: oracle_rank.c on 4 tcp ranks under plexus-run: DDP (sync;
    overlap with gradients as bucket views; NO_SYNC accumulation; fp16 and
    bf16 compress hooks), FSDP (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD,
    HYBRID_SHARD on 2 nodes x 2) and SyncBatchNorm (1d and 2d, uneven
    batches, one rank empty);
  by torch 1.13: DistributedDataParallel over gloo on 4 processes (file
    rendezvous; torchrun is broken on Debian's python 3.11) for the MLP,
    and one process on the whole batch with BatchNorm1d / BatchNorm2d.

f32 runs must agree with torch within REL (per-step losses; final weights
and running statistics, as max |a - b| / max |b| per tensor), and every
rank must end with bit-identical weights. The 16-bit compress hooks are
(and FSDP bf16 mixed precision, where strategy.h has param_dtype) are
held to the f32 run within the bounds explained at BOUND16. Exit 0 on
agreement, 1 if not, 77 (skip) without torch, numpy or gloo."""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True

try:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch import nn
except ImportError as e:
    print("SKIP: torch/numpy not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)
if not dist.is_available() or not dist.is_gloo_available():
    print("SKIP: torch %s has no gloo process group" % torch.__version__)
    sys.exit(77)

import shapes as S  # noqa: E402

REL = 1e-5
TIMEOUT = 150
MLP = ("W1", "b1", "W2", "b2")
BN1 = ("W1", "b1", "bnw", "bnb", "W2", "b2", "running_mean", "running_var")
BN2 = ("bn2w", "bn2b", "W3", "b3", "running_mean", "running_var")
# BOUND16: a 16-bit hook rounds each rank's g/P once and each partial sum of
# the reduction once: at most P roundings of relative u (2^-11 f16, 2^-8
# bf16) of sum |g_r| / P, so each step's averaged gradient moves by at most
# (P + 1) u |g| and the final weights by (P + 1) u sum_s lr |g_s|. With
# |sum_s g_s| >= sum_s |g_s| / 2 (kappa 2, true of these few steps, which go
# one way), the weights' distance from the f32 run is at most 2 (P + 1) u
# times their total movement |w - w0|. Losses use the same relative bound.
U16 = {"ddp-fp16": 2.0 ** -11, "ddp-bf16": 2.0 ** -8}
# FSDP bf16 (param_dtype = reduce_dtype = bf16 over f32 masters) adds to
# that the forward and backward on parameters rounded to bf16 (relative
# 2^-9 each): for this smooth model with O(1) weights a relative weight
# perturbation moves the gradient by about as much relative to |g| as the
# reduction's rounding does, so the budget doubles: 4 (P + 1) 2^-8.
BOUND_FSDP16 = 4 * (S.P + 1) * 2.0 ** -8


def write(d, name, a):
    np.asarray(a, dtype="<f4").tofile(os.path.join(d, name + ".bin"))


def read(d, name):
    return np.fromfile(os.path.join(d, name + ".bin"), dtype="<f4")


def make_inputs(d):
    rng = np.random.RandomState(20261125)
    N = S.NB * S.P
    X = rng.randn(N, S.D)
    Y = np.tanh(X @ rng.randn(S.D) * 0.5) + 0.1 * rng.randn(N)
    write(d, "X", X)
    write(d, "Y", Y)
    write(d, "W1", rng.uniform(-0.4, 0.4, (S.H, S.D)))
    write(d, "b1", rng.uniform(-0.1, 0.1, S.H))
    write(d, "W2", rng.uniform(-0.4, 0.4, (1, S.H)))
    write(d, "b2", rng.uniform(-0.1, 0.1, 1))
    Xbn = rng.randn(S.BN_N, S.D) * 2 + 3  # off-centre, so normalising matters
    write(d, "Xbn", Xbn)
    write(d, "Ybn", np.tanh(Xbn[:, 0] - Xbn[:, 1]) + 0.1 * rng.randn(S.BN_N))
    write(d, "bnw", 1 + 0.2 * rng.randn(S.H))
    write(d, "bnb", 0.1 * rng.randn(S.H))
    X2 = rng.randn(S.BN_N, S.C2, 2, 2) * np.array([1, 3, 0.5]).reshape(1, 3, 1, 1) + 5
    write(d, "X2", X2)
    write(d, "Y2", np.sin(X2[:, 0, 0, 0]) + 0.1 * rng.randn(S.BN_N))
    write(d, "bn2w", 1 + 0.2 * rng.randn(S.C2))
    write(d, "bn2b", 0.1 * rng.randn(S.C2))
    write(d, "W3", rng.uniform(-0.4, 0.4, (1, S.C2 * S.S2)))
    write(d, "b3", rng.uniform(-0.1, 0.1, 1))


def run_plexus(d, plexus_run, oracle_rank):
    t = time.monotonic()
    p = subprocess.run([plexus_run, "-n", str(S.P), "--timeout", str(TIMEOUT - 20), oracle_rank, "--backend", "tcp", d],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
    print("plexus: %d ranks, every run, %.1f s (exit %d)" % (S.P, time.monotonic() - t, p.returncode))
    if p.returncode:
        print(p.stdout)
    else:
        print("  " + p.stdout.strip().replace("\n", "\n  "))
    return p.returncode


def run_torch_ddp(d):
    t = time.monotonic()
    init = os.path.join(d, "torch-init")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-B", os.path.join(HERE, "torch_ddp.py"), d, str(r), str(S.P), init],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for r in range(S.P)]
    deadline, status = time.monotonic() + TIMEOUT, 0
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n(killed after %d s)" % TIMEOUT
        if p.returncode:
            status = 1
            print("torch rank %d exited with %s:\n%s" % (r, p.returncode, out))
    print("torch: DDP over gloo, %d processes, %.1f s" % (S.P, time.monotonic() - t))
    return status


def load_t(d, name, shape):
    return torch.from_numpy(read(d, name).reshape(shape).copy())


def run_torch_bn(d):
    """One process, the whole batch, torch.nn.BatchNorm1d / BatchNorm2d."""
    torch.set_num_threads(1)
    for run in ("bn1d", "bn2d"):
        if run == "bn1d":
            m = nn.Sequential(nn.Linear(S.D, S.H), nn.BatchNorm1d(S.H), nn.Tanh(), nn.Linear(S.H, 1))
            X, Y = load_t(d, "Xbn", (S.BN_N, S.D)), load_t(d, "Ybn", (S.BN_N,))
            named = (("W1", m[0].weight), ("b1", m[0].bias), ("bnw", m[1].weight), ("bnb", m[1].bias),
                     ("W2", m[3].weight), ("b2", m[3].bias))
            bn = m[1]
        else:
            m = nn.Sequential(nn.BatchNorm2d(S.C2), nn.Flatten(), nn.Linear(S.C2 * S.S2, 1))
            X, Y = load_t(d, "X2", (S.BN_N, S.C2, 2, 2)), load_t(d, "Y2", (S.BN_N,))
            named = (("bn2w", m[0].weight), ("bn2b", m[0].bias), ("W3", m[2].weight), ("b3", m[2].bias))
            bn = m[0]
        with torch.no_grad():
            for name, t in named:
                t.copy_(load_t(d, name, tuple(t.shape)))
        opt = torch.optim.SGD(m.parameters(), lr=S.LR)
        losses = np.zeros((S.STEPS, 2), dtype="<f4")
        m.train()
        for s in range(S.STEPS):
            opt.zero_grad()
            loss = ((m(X).squeeze(1) - Y) ** 2).mean()
            loss.backward()
            losses[s, 0] = loss.item()
            opt.step()
        losses.tofile(os.path.join(d, "torch-%s-loss-r0.bin" % run))
        for name, t in named + (("running_mean", bn.running_mean), ("running_var", bn.running_var)):
            t.detach().numpy().astype("<f4").tofile(os.path.join(d, "torch-%s-%s-r0.bin" % (run, name)))


def rel(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b.astype(np.float64))), 1e-30))


def compare(d):
    fails = 0

    def plx(run, name, r=0):
        return read(d, "plx-%s-%s-r%d" % (run, name, r))

    def tch(run, name, r=0):
        return read(d, "torch-%s-%s-r%d" % (run, name, r))

    def same_on_ranks(run, names):
        return all(np.array_equal(plx(run, n, 0), plx(run, n, r)) for n in names for r in range(1, S.P))

    print("%-17s %-9s %12s %12s %s" % ("plexus run", "oracle", "max rel loss", "max rel w", "ranks equal"))
    f32_runs = [("ddp-sync", "ddp"), ("ddp-overlap-view", "ddp"), ("ddp-accum", "accum"), ("fsdp-full", "ddp"),
                ("fsdp-grad-op", "ddp"), ("no-shard", "ddp"), ("fsdp-hybrid", "ddp"), ("bn1d", "bn1d"),
                ("bn2d", "bn2d")]
    for run, ref in f32_runs:
        names = BN1 if run == "bn1d" else BN2 if run == "bn2d" else MLP
        if run.startswith("bn"):  # ranks' sums of squared errors -> the whole batch's mean
            lp = sum(plx(run, "loss", r) for r in range(S.P)) / S.BN_N
            lt = [tch(ref, "loss")]
            lp = [lp]
        else:
            lp = [plx(run, "loss", r) for r in range(S.P)]
            lt = [tch(ref, "loss", r) for r in range(S.P)]
        rl = max(rel(a, b) for a, b in zip(lp, lt))
        rw = max(rel(plx(run, n), tch(ref, n)) for n in names)
        eq = same_on_ranks(run, names)
        ok = rl <= REL and rw <= REL and eq
        fails += not ok
        print("%-17s %-9s %12.3g %12.3g %-6s %s" % (run, "torch-" + ref, rl, rw, "yes" if eq else "NO",
                                                    "ok" if ok else "FAIL (limit %g)" % REL))
    runs16 = list(U16.items())
    if os.path.exists(os.path.join(d, "plx-fsdp-bf16-loss-r0.bin")):
        runs16.append(("fsdp-bf16", 2.0 ** -8))
    else:
        print("fsdp-bf16: not run (this build's strategy.h has no FSDP param_dtype)")
    for run, u in runs16:
        bound = 2 * (S.P + 1) * u if run != "fsdp-bf16" else BOUND_FSDP16
        w0 = {n: read(d, n) for n in MLP}
        rw = max(float(np.max(np.abs(plx(run, n).astype(np.float64) - plx("ddp-sync", n))) /
                       np.max(np.abs(plx("ddp-sync", n).astype(np.float64) - w0[n]))) for n in MLP)
        rl = max(rel(plx(run, "loss", r), plx("ddp-sync", "loss", r)) for r in range(S.P))
        eq = same_on_ranks(run, MLP)
        ok = rw <= bound and rl <= bound and rw > 1e-6 and eq
        fails += not ok
        print("%-17s %-9s %12.3g %12.3g %-6s %s" % (run, "ddp-sync", rl, rw, "yes" if eq else "NO",
                                                    "ok (bound %.3g; rel w vs |w - w0|)" % bound if ok else
                                                    "FAIL (bound %.3g, and must differ from f32)" % bound))
    return fails


def main():
    if len(sys.argv) != 3:
        print("usage: oracle.py PLEXUS_RUN ORACLE_RANK")
        return 2
    with tempfile.TemporaryDirectory(prefix="plexus-oracle-") as d:
        make_inputs(d)
        if run_plexus(d, sys.argv[1], sys.argv[2]) or run_torch_ddp(d):
            return 1
        run_torch_bn(d)
        fails = compare(d)
    print("oracle: %s" % ("every run agrees with torch" if not fails else "%d runs disagree" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
