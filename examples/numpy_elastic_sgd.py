#!/usr/bin/python3
"""numpy_elastic_sgd.py - data-parallel SGD on numpy with plexus, without
torch, that survives a rank dying: the survivors shrink the communicator
and redo the step on their smaller group.

A small MLP (16 -> 32 -> 1, tanh, float64) learns a fixed random teacher.
Every step draws one global batch (the same on every rank); each rank takes
its share (np.array_split by its rank), sums its gradients, and one
allreduce adds them across ranks (the batch's loss travels in the same
buffer). The update divides by the global batch size, so it is the same
whatever the membership, up to the rounding of the sum.

    python3 numpy_elastic_sgd.py --procs 4 --kill 2:10   # rank 2 is SIGKILLed at step 10
    python3 numpy_elastic_sgd.py --procs 4 --leave 2:10  # rank 2 leaves there (split)
    plexus-run -n 4 python3 numpy_elastic_sgd.py         # a job nobody leaves

With --procs the script starts the ranks itself, as torchrun would (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT): plexus-run stops a job when one of
its ranks dies, and here the point is that the others carry on. The job's
store lives in rank 0, which must survive. --out FILE saves the final
weights (rank 0), so two runs with the same membership schedule can be
compared: they are bitwise equal.
"""
import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys

import numpy as np

import plexus

D_IN, D_HID, BATCH = 16, 32, 96


def init_params(seed):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 1 / np.sqrt(D_IN), (D_IN, D_HID)), np.zeros(D_HID),
            rng.normal(0, 1 / np.sqrt(D_HID), (D_HID, 1)), np.zeros(1)]


def batch(step):
    """The step's global batch: inputs and the teacher's targets."""
    x = np.random.default_rng(1000 + step).normal(size=(BATCH, D_IN))
    teacher = init_params(7)
    return x, np.tanh(x @ teacher[0] + teacher[1]) @ teacher[2] + teacher[3]


def grad_sum(params, x, y):
    """Gradients of 0.5 * sum of squared errors over the shard, flattened,
    with the shard's loss appended."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    err = h @ w2 + b2 - y
    dh = (err @ w2.T) * (1 - h * h)
    grads = [x.T @ dh, dh.sum(axis=0), h.T @ err, err.sum(axis=0)]
    return np.concatenate([g.reshape(-1) for g in grads] + [[0.5 * float((err * err).sum())]])


def apply(params, flat, lr):
    off = 0
    for p in params:
        p -= lr * flat[off:off + p.size].reshape(p.shape) / BATCH
        off += p.size


def parse_at(text):
    """"RANK:STEP" -> (rank, step); None -> (-1, -1)."""
    if not text:
        return -1, -1
    rank, step = text.split(":")
    return int(rank), int(step)


def train(args):
    comm = plexus.init(timeout=30)
    world_rank = comm.rank
    kill, leave = parse_at(args.kill), parse_at(args.leave)
    params = init_params(args.seed)
    step, left = 0, False
    while step < args.steps:
        if (world_rank, step) == kill:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == leave[1] and not left:
            sub = comm.split(None if world_rank == leave[0] else 0)
            comm.destroy()
            if sub is None:
                return 0
            comm, left = sub, True
        x, y = batch(step)
        g = grad_sum(params, np.array_split(x, comm.size)[comm.rank], np.array_split(y, comm.size)[comm.rank])
        try:
            comm.allreduce(g)
        except plexus.PlexusError as e:
            print("step %d: %s: %s; shrinking" % (step, type(e).__name__, e), flush=True)
            new = comm.shrink()
            comm.destroy()
            comm = new
            print("step %d: going on as rank %d of %d" % (step, comm.rank, comm.size), flush=True)
            continue  # the same step again, on the survivors
        apply(params, g[:-1], args.lr)
        if comm.rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print("step %d: loss %.6f on %d ranks" % (step, g[-1] / BATCH, comm.size), flush=True)
        step += 1
    if comm.rank == 0 and args.out:
        np.save(args.out, np.concatenate([p.reshape(-1) for p in params]))
    comm.destroy()
    return 0


def launch(args):
    """Start args.procs ranks of this script as torchrun would; a rank killed
    by --kill is expected, every other must exit 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE=str(args.procs), LOCAL_WORLD_SIZE=str(args.procs), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), PLEXUS_JOB_SECRET=secrets.token_hex(32))
    argv = [sys.executable] + sys.argv  # with RANK set, the copies train
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(args.procs)]
    victim = parse_at(args.kill)[0]
    bad = 0
    try:
        for r, p in enumerate(procs):
            rc = p.wait(timeout=args.timeout)
            want = -signal.SIGKILL if r == victim else 0
            if rc != want:
                print("rank %d ended with %d, expected %d" % (r, rc, want), file=sys.stderr)
                bad += 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, help="start this many ranks here (else: be one rank of a launched job)")
    ap.add_argument("--kill", help="RANK:STEP - that rank SIGKILLs itself when it reaches that step")
    ap.add_argument("--leave", help="RANK:STEP - that rank leaves there (a split), the others go on")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="save the final weights (rank 0) to this .npy file")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a launched rank may run")
    args = ap.parse_args()
    if args.procs and "RANK" not in os.environ:
        return launch(args)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
