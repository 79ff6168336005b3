"""One run of PyTorch's own distributed suite (DistributedTest._DistTestBase)
on one backend, as upstream test/distributed/test_distributed_spawn.py runs
it; driven by torch_dist_suite.py, which reads the outcomes it writes.

    PLEXUS_SUITE_MODE=gloo        torch's gloo (BACKEND=gloo)
    PLEXUS_SUITE_MODE=plugin      "plexus" as a plugin backend (BACKEND=plexus;
                                  plexus added to backend_feature plugin, ddp, subgroup)
    PLEXUS_SUITE_MODE=gloo-place  BACKEND=gloo, every group asking for gloo made on plexus

argv: OUT.json [TEST_NAME ...] (none: the whole class). Spawned ranks
re-import this module, so the setup below runs at import in each of them.
"""
import json
import os
import sys
import unittest

try:
    import expecttest  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

MODE = os.environ["PLEXUS_SUITE_MODE"]
if MODE != "gloo":
    import plexus.torch  # noqa: E402
if MODE == "plugin":
    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("plexus")
elif MODE == "gloo-place":
    import torch.distributed.distributed_c10d as c10d

    class _IsPlexus(type):
        # torch 2.x asserts isinstance(backend, ProcessGroupGloo) on what it made.
        def __instancecheck__(cls, obj):
            return isinstance(obj, plexus.torch.ProcessGroupPlexus)

    class _GlooOnPlexus(metaclass=_IsPlexus):
        """What distributed_c10d constructs for a "gloo" group: a plexus one."""

        def __new__(cls, store, rank, size, timeout, **_):  # torch 2.14 adds enable_reconfigure=...
            # name: the profiler's events say "gloo:all_reduce", as torch's tests expect of a gloo group.
            return plexus.torch.ProcessGroupPlexus(store, rank, size, timeout, name="gloo")

    # TORCH_DISTRIBUTED_DEBUG=DETAIL (the *_subgroup object tests) wraps a group
    # in torch's _ProcessGroupWrapper with a helper group of gloo's own class,
    # which checks that the ranks call the same collectives: that checker is
    # torch's, not a group the test asks for, so it stays gloo.
    _real_gloo = c10d.ProcessGroupGloo
    _make_wrapper = c10d._create_process_group_wrapper

    def _wrapper_with_real_gloo(*args, **kwargs):
        c10d.ProcessGroupGloo = _real_gloo
        try:
            return _make_wrapper(*args, **kwargs)
        finally:
            c10d.ProcessGroupGloo = _GlooOnPlexus

    c10d.ProcessGroupGloo = _GlooOnPlexus
    c10d._create_process_group_wrapper = _wrapper_with_real_gloo

    # torch 2.x files a "gloo" group's backend under the type GLOO, and DDP's
    # logger takes a GLOO backend for gloo's own class (a static_cast: the
    # rank dies). Filed as CUSTOM too, as torch files every plugin, the group
    # still says "gloo" wherever the tests look (dist.get_backend).
    _helper = c10d._new_process_group_helper

    def _helper_filed_custom(*args, **kwargs):
        made = _helper(*args, **kwargs)
        pg = made[0] if isinstance(made, tuple) else made
        get = getattr(pg, "_get_backend", None)
        if get is not None and hasattr(dist.ProcessGroup, "BackendType"):
            try:
                b = get(torch.device("cpu"))
            except RuntimeError:
                b = None
            if isinstance(b, plexus.torch.ProcessGroupPlexus):
                custom = dist.ProcessGroup.BackendType.CUSTOM
                pg._register_backend(torch.device("cpu"), custom, b)
                pg._set_default_backend(custom)
        return made

    c10d._new_process_group_helper = _helper_filed_custom

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


# PLEXUS_SUITE_START=fork: ranks forked from this process, as upstream's
# test_distributed_fork.py ran gloo (no fresh interpreter and torch import
# per rank and test: the whole class in a fraction of the time); default
# spawn, as test_distributed_spawn.py.
FORK = os.environ.get("PLEXUS_SUITE_START", "spawn") == "fork"


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if FORK:  # _fork_processes is gone from torch 2.x; _start_processes is in both
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()


class _Record(unittest.TextTestResult):
    outcomes = {}

    def _put(self, test, what):
        self.outcomes[test.id().rsplit(".", 1)[-1]] = what

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "FAIL")

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "ERROR")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._put(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._put(test, "FAIL")


if __name__ == "__main__":
    out, names = sys.argv[1], sys.argv[2:]
    loader = unittest.TestLoader()
    if not names:
        names = loader.getTestCaseNames(TestDistBackendWithSpawn)
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    unittest.TextTestRunner(resultclass=_Record, verbosity=2, stream=sys.stderr).run(suite)
    with open(out, "w") as f:
        json.dump(_Record.outcomes, f)
