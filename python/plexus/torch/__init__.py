"""plexus.torch - the torch.distributed backend "plexus".

Importing this module registers the backend, so that

    import plexus.torch
    torch.distributed.init_process_group("plexus", init_method=..., rank=r, world_size=n)

works with every init method torch offers (env://, tcp://, file://):
torch hands the backend its store, plexus rendezvous through it and then
picks its transport as configured (PLEXUS_BACKEND, the configuration
files; tcp by default between processes). The process group itself is a
C++ extension (_C) built against torch 1.13's c10d::ProcessGroup API; it
only maps tensors to plexus calls.
"""
import torch.distributed as _dist

from . import _C  # noqa: E402 - needs torch.distributed's classes registered first

BACKEND = "plexus"


def _create(store, rank, size, timeout):
    return _C.ProcessGroupPlexus(store, rank, size, timeout)


if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, _create)

ProcessGroupPlexus = _C.ProcessGroupPlexus
