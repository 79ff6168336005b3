"""plexus.torch - the torch.distributed backend "plexus".

Importing this module registers the backend, so that

    import plexus.torch
    torch.distributed.init_process_group("plexus", init_method=..., rank=r, world_size=n)

works with every init method torch offers (env://, tcp://, file://):
torch hands the backend its store, plexus rendezvous through it and then
picks its transport as configured (PLEXUS_BACKEND, the configuration
files; tcp by default between processes). The process group itself is a
C++ extension (_C): on torch 1.x a c10d::ProcessGroup, on torch 2.x a
c10d::Backend that torch's ProcessGroup dispatches CPU tensors to; it
only maps tensors to plexus calls.
"""
import inspect as _inspect

import torch.distributed as _dist

from . import _C  # noqa: E402 - needs torch.distributed's classes registered first

BACKEND = "plexus"


def _create(store, rank, size, timeout):
    return _C.ProcessGroupPlexus(store, rank, size, timeout)


if not hasattr(_dist.Backend, BACKEND.upper()):
    # torch 2.x asks which devices a backend serves (it warns without them);
    # plexus.torch takes CPU tensors.
    if "devices" in _inspect.signature(_dist.Backend.register_backend).parameters:
        _dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
    else:
        _dist.Backend.register_backend(BACKEND, _create)

ProcessGroupPlexus = _C.ProcessGroupPlexus
