"""A stand-in for the PyPI package expecttest, which Debian 12 does not ship.

torch 1.13's test utilities (torch.testing._internal.common_utils) import
it for two names only: the ACCEPT flag and the TestCase base class, whose
assertExpectedInline the distributed suite never calls. The torch suite
driver puts this folder on sys.path only when the real module is missing
(Debian 13 ships python3-expecttest).
"""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
