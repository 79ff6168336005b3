#!/usr/bin/python3
"""Our tcp:// store client against a TCPStore hosted by torch.

torch.distributed.TCPStore(host, port, world_size=2, is_master=True) hosts
the server and, as torch's master does, waits until a second worker has
joined (our client's ADD of "init/"). Then torch writes keys our client
reads, our client writes keys torch reads back here, and our client runs
every query type it has, including a WAIT that times out (store_client.c).

Usage: torch_store_master.py STORE_CLIENT   (exit 77 without torch)
"""
import os
import subprocess
import sys
from datetime import timedelta

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from loopback_port import free_port  # noqa: E402 - tests/tools, through the path above


def skip(reason):
    print("skip: " + reason)
    sys.exit(77)


def main(client_bin):
    try:
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        skip("torch is not importable by %s: %s" % (sys.executable, e))
    if not dist.is_available():
        skip("this torch has no torch.distributed")
    port = free_port()
    client = subprocess.Popen([client_bin, str(port)])
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("CHECK failed: " + what, flush=True)

    try:
        # Blocks until our client has added itself to "init/".
        # torch 2.x asks for libuv by default, which Debian's torch lacks.
        no_libuv = {"use_libuv": False} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}
        store = dist.TCPStore("127.0.0.1", port, 2, True, timedelta(seconds=30), **no_libuv)
        print("torch hosts a TCPStore on 127.0.0.1:%d; our client joined" % port, flush=True)
        store.set("py_str", "from torch")
        store.set("py_bin", bytes(range(256)) * 4096)
        check(store.add("py_ctr", 7) == 7, "torch add")
        store.set("py_del", "x")
        store.wait(["c_done"], timedelta(seconds=60))
        check(store.get("c_done") == b"ok", "our client's own checks passed")
        check(store.get("c_str") == b"from plexus", "a string our client set")
        check(store.get("c_bin") == b"a\0b\xff", "bytes our client set")
        check(store.get("c_empty") == b"", "an empty value our client set")
        check(store.get("c_ctr") == b"10", "a counter our client added to")
        check(store.get("py_ctr") == b"10", "our client's add on torch's counter")
        check(store.add("c_ctr", 1) == 11, "torch adds to our client's counter")
        # compare_set from "" creates a key only if it is missing.
        check(store.compare_set("py_del", "", "gone") == b"gone", "our client's delete")
        store.set("py_ack", "checked")
        try:
            rc = client.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        check(rc == 0, "store_client exit status %s" % rc)
    except RuntimeError as e:
        failures.append(str(e))
        print("torch side: %s" % e, flush=True)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    print("FAILED: %d" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
