"""torch_needs.py - what the torch tests that start their own ranks share:
skipping (exit 77, with the reason) where torch or plexus.torch cannot be
imported, and free loopback ports for the rendezvous (tests/tools/loopback_port.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import loopback_port  # noqa: E402 - found through the path above


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
    return loopback_port.free_port()


def free_ports(n):
    return loopback_port.free_ports(n)
