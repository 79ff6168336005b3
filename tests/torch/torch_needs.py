"""torch_needs.py - what the torch tests that start their own ranks share:
skipping (exit 77, with the reason) where torch or plexus.torch cannot be
imported, and a free loopback port for the rendezvous."""
import socket
import sys


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def require_plexus_torch():
    """Skip the test unless torch.distributed and plexus.torch import."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError as e:
        skip("torch not importable by %s: %s" % (sys.executable, e))
    try:
        import plexus.torch  # noqa: F401
    except ImportError as e:
        skip("plexus.torch is not built or not on PYTHONPATH: %s" % e)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
