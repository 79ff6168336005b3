"""launch.py - start ranks the way torchrun does (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, a job secret) for
the tests where a rank dies on purpose: plexus-run stops a job when one of
its ranks fails, these tests need the others to go on. Every process is
killed when the test ends (stop()), whatever happened."""
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from loopback_port import free_port  # noqa: E402 - tests/tools, through the path above


class Job:
    def __init__(self, n, argv, backend=None, env=None):
        self.n, self.argv = n, argv
        self.dir = tempfile.mkdtemp(prefix="plexus-py-")
        self.env = dict(os.environ, WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=str(free_port()), PLEXUS_JOB_SECRET=secrets.token_hex(32), **(env or {}))
        if backend:
            self.env["PLEXUS_BACKEND"] = backend
        self.procs = [self._spawn(r) for r in range(n)]

    def _spawn(self, rank, extra_args=()):
        env = dict(self.env)
        if rank is None:  # a newcomer: the store's address, no rank
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
                env.pop(k, None)
            name = "joiner%d" % len(os.listdir(self.dir))
        else:
            env.update(RANK=str(rank), LOCAL_RANK=str(rank))
            name = "rank%d" % rank
        out = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen([sys.executable, "-B"] + self.argv + list(extra_args), env=env, stdout=out,
                             stderr=subprocess.STDOUT)
        p.log, p.name = out.name, name
        return p

    def spawn_joiner(self, extra_args=()):
        p = self._spawn(None, extra_args)
        self.procs.append(p)
        return p

    def output(self, p):
        with open(p.log) as f:
            return f.read()

    def wait_for(self, p, text, deadline):
        """Wait until p's output holds text (False at the deadline or if p ended without it)."""
        while time.monotonic() < deadline:
            if text in self.output(p):
                return True
            if p.poll() is not None:
                return text in self.output(p)
            time.sleep(0.02)
        return False

    def wait(self, deadline):
        """Wait for every process until deadline; returns the exit codes
        (None for one still running, which stop() kills)."""
        for p in self.procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        return [p.poll() for p in self.procs]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()

    def report(self):
        return "\n".join("--- %s (exit %s)\n%s" % (p.name, p.poll(), self.output(p)[-4000:]) for p in self.procs)

    def remove(self):
        """Delete the output files (after stop() and report())."""
        shutil.rmtree(self.dir, ignore_errors=True)
