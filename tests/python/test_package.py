#!/usr/bin/python3
"""test_package.py VERSION PLEXUS_INFO - the Python package plexus, as
`meson devenv` presents the build tree: plexus.version() is the project's
version and libplexus's, plexus.backends() is exactly what
`plexus-info --json` lists (as Python objects), and plexus.info() carries
the same document. Run under `meson devenv -C BUILD` by meson.build."""
import json
import subprocess
import sys

import plexus

version, info_tool = sys.argv[1], sys.argv[2]
fails = []
if plexus.version() != version:
    fails.append("plexus.version() = %r, want %r" % (plexus.version(), version))
doc = json.loads(subprocess.run([info_tool, "--json"], check=True, stdout=subprocess.PIPE, text=True).stdout)
got = plexus.backends()
if got != doc["backends"]:
    fails.append("plexus.backends() differs from plexus-info --json:\n%s\n%s" % (got, doc["backends"]))
if plexus.info()["plexus"] != version:
    fails.append("plexus.info()['plexus'] = %r" % plexus.info()["plexus"])
usable = [b["name"] for b in got if b["usable"]]
if "sim" not in usable:
    fails.append("sim is not listed as usable: %s" % usable)
print("plexus %s from %s; usable backends: %s" % (plexus.version(), plexus.__file__, usable))
for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)
