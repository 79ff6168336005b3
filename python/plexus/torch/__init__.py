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
import atexit as _atexit
import inspect as _inspect

import torch.distributed as _dist

from . import _C  # noqa: E402 - needs torch.distributed's classes registered first

BACKEND = "plexus"


def _create(store, rank, size, timeout):
    return _C.ProcessGroupPlexus(store, rank, size, timeout)


def _create_extended(opts, backend_options):
    """torch's extended creator: what init_process_group was given, among it
    enable_reconfigure (the group waits for reconfigure to make its
    communicator, as gloo's and NCCL's do)."""
    return _C.ProcessGroupPlexus(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                                 enable_reconfigure=bool(getattr(opts, "enable_reconfigure", False)))


def _register():
    kwargs = {}
    params = _inspect.signature(_dist.Backend.register_backend).parameters
    # torch 2.x asks which devices a backend serves (it warns without them);
    # plexus.torch takes CPU tensors.
    if "devices" in params:
        kwargs["devices"] = ["cpu"]
    # Only the extended creator hears enable_reconfigure; taken only where
    # torch's options carry it, so older torch keeps the plain creator.
    opts_class = getattr(_dist.distributed_c10d, "_DistributedBackendOptions", None)
    if "extended_api" in params and opts_class is not None and hasattr(opts_class(), "enable_reconfigure"):
        _dist.Backend.register_backend(BACKEND, _create_extended, extended_api=True, **kwargs)
    else:
        _dist.Backend.register_backend(BACKEND, _create, **kwargs)


if not hasattr(_dist.Backend, BACKEND.upper()):
    _register()

# Before the interpreter finalizes: an operation still in flight at exit
# finishes, its future's callbacks with it, while they can still run Python.
_atexit.register(_C._drain_at_exit)

ProcessGroupPlexus = _C.ProcessGroupPlexus


def _plexus_of(group, what="plexus.torch.alloc"):
    """The ProcessGroupPlexus behind group (the default group if None)."""
    if group is None:
        group = _dist.distributed_c10d._get_default_group()
    if isinstance(group, ProcessGroupPlexus):  # torch 1.x: the group is the backend
        return group
    get = getattr(group, "_get_backend", None)  # torch 2.x: a ProcessGroup dispatching to backends
    if get is not None:
        import torch
        try:
            backend = get(torch.device("cpu"))
        except RuntimeError:
            backend = None
        if isinstance(backend, ProcessGroupPlexus):
            return backend
    raise ValueError("%s: the group does not run on the backend \"plexus\"" % what)


def alloc(size, dtype=None, group=None):
    """A zeroed CPU tensor of shape size in memory that every rank of this
    host maps (plx_mem_alloc on the group's communicator): collectives on
    tensors that live there may run in one pass, without staging copies
    (shm's allreduce). Collective over group (default: the default group):
    every rank calls it with the same shape and dtype, in the same order as
    its other operations on the group. The memory is freed when the tensor
    is, and stays valid after the group is destroyed."""
    import torch
    return _plexus_of(group).alloc([int(d) for d in size], dtype or torch.get_default_dtype())


def revoke(group=None):
    """Revoke group (default: the default group) for every rank: each
    pending and later operation on it fails with a RuntimeError naming
    PLX_ERR_REVOKED, on every rank, promptly (within the backend's failure
    detection, not the group's timeout), including ranks blocked inside a
    collective. Any rank, any thread, no matching call on the other ranks:
    a rank that gives up (a lost peer, a failed step) calls it so that no
    other rank stays blocked waiting for it. The way on is re-creation:
    destroy_process_group() and init_process_group() with the survivors
    (torch has no in-process shrink of a group; plx_comm_shrink is the C
    API's). Backends without revoke (mpi without ULFM, nccl) raise."""
    _plexus_of(group, "plexus.torch.revoke").revoke()


def _label_shrunk_groups():
    """torch 2.14's shrink_group registers the new group's CPU backend as
    GLOO whatever it is, and DDP's logger then takes it for gloo's own class
    (a static_cast: the process dies in DistributedDataParallel()). A group
    shrunk on plexus is relabelled CUSTOM, as torch labels every plugin."""
    c10d = _dist.distributed_c10d
    finalize = getattr(c10d, "_finalize_shrunk_group", None)
    if finalize is None or getattr(finalize, "_plexus", False):
        return

    def _finalize_shrunk_group(info, excluded, new_backend, *args, **kwargs):
        pg = finalize(info, excluded, new_backend, *args, **kwargs)
        if isinstance(new_backend, ProcessGroupPlexus):
            import torch
            custom = _dist.ProcessGroup.BackendType.CUSTOM
            pg._register_backend(torch.device("cpu"), custom, new_backend)
            pg._set_default_backend(custom)
        return pg

    _finalize_shrunk_group._plexus = True
    c10d._finalize_shrunk_group = _finalize_shrunk_group


_label_shrunk_groups()


def _reconfigure_through_backend():
    """The relabelling above leaves a shrunk group with two backend types
    (gloo's, as torch filed it, and CUSTOM), and torch's ProcessGroup refuses
    reconfigure on such a group ("multiple backends"); the one plexus backend
    behind both serves it. dist._get_reconfigure_handle and dist._reconfigure
    go straight to it for a group on plexus, as torch's own would."""
    c10d = _dist.distributed_c10d
    if not hasattr(c10d, "_reconfigure") or getattr(c10d._reconfigure, "_plexus", False):
        return
    torch_handle, torch_reconfigure = c10d._get_reconfigure_handle, c10d._reconfigure

    def plexus_backend(group):
        import torch
        try:
            b = (group or c10d._get_default_group())._get_backend(torch.device("cpu"))
        except (RuntimeError, ValueError):
            return None
        return b if isinstance(b, ProcessGroupPlexus) else None

    def _get_reconfigure_handle(group=None):
        b = plexus_backend(group)
        return torch_handle(group) if b is None else b.get_reconfigure_handle()

    def _reconfigure(uuid, handles, group=None, timeout=None, hints=None):
        b = plexus_backend(group)
        if b is None:
            return torch_reconfigure(uuid, handles, group=group, timeout=timeout, hints=hints)
        opts = c10d.ReconfigureOptions()
        opts.uuid = uuid
        opts.handles = handles
        if timeout is not None:
            opts.timeout = timeout
        if hints is not None:
            opts.hints = hints
        return b.reconfigure(opts)

    _get_reconfigure_handle.__doc__, _reconfigure.__doc__ = torch_handle.__doc__, torch_reconfigure.__doc__
    _reconfigure._plexus = True
    for where in (c10d, _dist):
        if hasattr(where, "_reconfigure"):
            where._get_reconfigure_handle, where._reconfigure = _get_reconfigure_handle, _reconfigure


_reconfigure_through_backend()
