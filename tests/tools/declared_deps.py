#!/usr/bin/env python3
"""Every built file a test names on its command line or in its environment is
built for it: its target is among the test's `depends`.

usage: declared_deps.py BUILD_ROOT

`meson test NAME` (and `meson test --suite S`) builds only the selected
tests' dependencies, as CI's chroot stages do on a fresh build folder; a
test that hands a script `exe.full_path()` without `depends : [exe]` passes
after a full build and fails there ("No such file"). Exit 1 naming each
such test and file.
"""
import json
import os
import sys


def main():
    info = os.path.join(sys.argv[1], "meson-info")
    built = {}
    for t in json.load(open(os.path.join(info, "intro-targets.json"))):
        for f in t["filename"]:
            built[f] = t["id"]
    missing = []
    tests = json.load(open(os.path.join(info, "intro-tests.json")))
    for t in tests:
        words = set()
        for a in t["cmd"][1:]:
            words.update((a, a.split("=", 1)[-1]))  # --opt=PATH too
        for v in (t["env"] or {}).values():
            words.update(v.split(":"))  # PATH-like variables
        for w in sorted(words):
            if w in built and built[w] not in t["depends"]:
                missing.append(f"{t['name']}: names {os.path.relpath(w, sys.argv[1])}, not in its depends")
    for m in missing:
        print("FAIL", m)
    print(f"{len(tests)} tests: {len(missing)} built files named but not depended on")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
