"""torch_built: where /usr/bin/python3 imports torch, the build made plexus.torch
for it (a build that skipped it, say because torch's headers want a newer C++
than the one asked for, fails here instead of skipping every torch test), and
the extension loads in that torch: built against the same major.minor.

argv: "built" or "not built", then the build's reason (meson's summary line).
"""
import os
import re
import sys

built, reason = sys.argv[1] == "built", sys.argv[2]
try:
    import torch
except Exception as e:  # noqa: BLE001 - any failure means no usable torch here
    print("SKIP: /usr/bin/python3 cannot import torch: %s" % e)
    sys.exit(77)
if not torch.distributed.is_available():
    print("SKIP: torch %s is built without torch.distributed" % torch.__version__)
    sys.exit(77)
if not built and reason == "disabled":
    print("SKIP: plexus.torch was disabled by -Dtorch=disabled")
    sys.exit(77)
if not built:
    print("FAIL: torch %s is installed but the build skipped plexus.torch: %s" % (torch.__version__, reason))
    sys.exit(1)
sys.path.insert(0, os.path.join(os.environ["PLEXUS_BUILD_ROOT"], "python"))
import plexus.torch  # noqa: E402

m = re.search(r"torch (\d+\.\d+)", plexus.torch._C.__doc__ or "")
have = ".".join(torch.__version__.split(".")[:2])
if not m or m.group(1) != have:
    print("FAIL: plexus.torch._C says %r, but the torch here is %s" % (plexus.torch._C.__doc__, torch.__version__))
    sys.exit(1)
print("plexus.torch %s; torch %s" % (reason, torch.__version__))
