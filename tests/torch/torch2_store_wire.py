#!/usr/bin/python3
"""torch2_store_wire.py PLEXUS_BENCH - plexus's own store client joining a
store server that speaks torch 2.x's TCPStore wire, without torch.

torchrun's agent on torch 2.x hosts a TCPStore whose server closes a
connection whose first query is not VALIDATE with torch's magic number, and
numbers its queries one higher than torch 1.x did (VALIDATE is 0, WATCH_KEY
is gone). This script hosts such a server (the rules of torch 2.6's
TCPStoreBackend.cpp) and starts 2 ranks of plexus-bench --check on tcp the
way torchrun starts workers, so the Debian 12 host checks what the Debian 13
chroot checks with torch 2.6 itself (torchrun_agent_store). Passes when both
ranks pass and plexus's keys are in the store under /worker/attempt_0/.
"""
import os
import socket
import struct
import subprocess
import sys
import threading

VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY = range(9)
MAGIC = 0x3C85F7CE


class Torch2Store:
    def __init__(self):
        self.kv, self.cv = {}, threading.Condition()
        self.refused = 0  # connections closed for not opening with VALIDATE
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    @staticmethod
    def take(c, n):
        b = b""
        while len(b) < n:
            k = c.recv(n - len(b))
            if not k:
                raise EOFError
            b += k
        return b

    def string(self, c):
        return self.take(c, struct.unpack("<Q", self.take(c, 8))[0])

    def keys(self, c):
        return [self.string(c) for _ in range(struct.unpack("<Q", self.take(c, 8))[0])]

    def serve(self, c):
        try:
            with c:
                q = self.take(c, 1)[0]
                if q != VALIDATE or struct.unpack("<I", self.take(c, 4))[0] != MAGIC:
                    with self.cv:
                        self.refused += 1
                    return  # as torch 2.x: "Miscellaneous client without VALIDATE query"
                while True:
                    self.query(c, self.take(c, 1)[0])
        except (EOFError, ConnectionError):
            pass

    def query(self, c, q):
        with self.cv:
            if q == SET:
                k, v = self.string(c), self.string(c)
                self.kv[k] = v
                self.cv.notify_all()
            elif q == COMPARE_SET:
                k, old, new = self.string(c), self.string(c), self.string(c)
                if (k not in self.kv and not old) or self.kv.get(k) == old:
                    self.kv[k] = new
                    self.cv.notify_all()
                v = self.kv.get(k, old)
                c.sendall(struct.pack("<Q", len(v)) + v)
            elif q == GET:
                v = self.kv[self.string(c)]
                c.sendall(struct.pack("<Q", len(v)) + v)
            elif q == ADD:
                k, d = self.string(c), struct.unpack("<q", self.take(c, 8))[0]
                n = int(self.kv.get(k, b"0")) + d  # torch keeps counters as decimal text
                self.kv[k] = str(n).encode()
                self.cv.notify_all()
                c.sendall(struct.pack("<q", n))
            elif q == CHECK:
                ks = self.keys(c)
                c.sendall(bytes([0 if all(k in self.kv for k in ks) else 1]))
            elif q == WAIT:
                ks = self.keys(c)
                self.cv.wait_for(lambda: all(k in self.kv for k in ks))
                c.sendall(bytes([0]))
            elif q == GETNUMKEYS:
                c.sendall(struct.pack("<q", len(self.kv)))
            elif q == DELETE_KEY:
                c.sendall(struct.pack("<q", 1 if self.kv.pop(self.string(c), None) is not None else 0))
            else:
                raise EOFError  # a code torch 2.x does not know: it drops the client


def main(bench):
    store = Torch2Store()
    P, procs = 2, []
    for r in range(P):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(P), LOCAL_WORLD_SIZE=str(P),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
                   TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
                   TORCHELASTIC_RUN_ID="plexus-test", PLEXUS_BACKEND="tcp")
        env.pop("PLEXUS_INIT", None)
        procs.append(subprocess.Popen([bench, "--coll", "allreduce,allgather", "--check", "-b", "8", "-e", "64K",
                                       "-f", "8", "-n", "2", "-w", "1", "-d", "f32"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    codes = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        codes.append(p.returncode)
        print("--- rank %d (exit %s)\n%s" % (r, p.returncode, out.decode(errors="replace")[-3000:]), flush=True)
    with store.cv:
        # On the wire a torch TCPStore client puts "/" before every key (PrefixStore's "/worker/attempt_0/" too).
        mine = sorted(k.decode(errors="replace") for k in store.kv if k.startswith(b"//worker/attempt_0/"))
        print("exit codes %s; keys under /worker/attempt_0/: %d (e.g. %s); connections refused for not "
              "opening with VALIDATE: %d" % (codes, len(mine), mine[:3], store.refused))
    if any(codes) or not mine:
        print("FAIL: plexus's store client did not work with a torch 2.x TCPStore server")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
