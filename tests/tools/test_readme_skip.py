#!/usr/bin/env python3
"""Without torch, every README command (the README's and its documents') that runs a script
importing torch is skipped with the reason (a fresh machine after the set-up command has no
torch), never run to fail.

usage: test_readme_skip.py SOURCE_ROOT BUILD_DIR
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readme_commands as rc  # noqa: E402


def main():
    src, build = sys.argv[1], sys.argv[2]
    failures, checked = [], 0
    for where, cmd in rc.all_commands(src):
        scripts = [w for w in cmd.split() if w.endswith(".py") and os.path.isfile(os.path.join(src, w))]
        needs = [w for w in scripts if re.search(r"^\s*(import|from) torch\b", open(os.path.join(src, w)).read(), re.M)]
        if not needs:
            continue
        checked += 1
        why = rc.missing_part(cmd, src, build, torch_installed=lambda: False)
        if why is None or "torch" not in why:
            failures.append(f"{where}: `{cmd}` runs {needs[0]} (imports torch) but is not skipped without torch")
        else:
            print(f"{where}: skipped without torch ({why}): {cmd}")
    if checked == 0:
        print("FAIL: no README command runs a script importing torch (the check found nothing to check)")
        return 1
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
