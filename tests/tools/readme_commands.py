#!/usr/bin/env python3
"""Run every command of the README's ```sh blocks, as written, from the source root: the README's
own and those of the documents under docs/ it links (in the order it first links them).

usage: readme_commands.py SOURCE_ROOT BUILD_DIR [--list]

The README's commands name ./build, so this runs only when BUILD_DIR is
SOURCE_ROOT/build (anything else skips with exit 77). Each command runs with
`sh -c` in the source root after the setup command, in the order written, with
the benchmark scripts' own size knobs turned down (REPS=1, SIZES=8, NP=2,
SOAK_SECONDS=5, SECONDS_SAMPLED=1, FREQ=500, CKPT_MIB=8, ITERS=5, ROUNDS=3, BLOCK_SIZES=8, HOSTS=2, one torch suite
test with forked ranks: the knobs the
scripts document), and must exit 0 unless
EXPECT below says otherwise. A command that is a CI stage itself (the test
command, the sanitizer and fuzz runs, the peers' install) is not run here but
must still be in .ci/run; `meson test -C build --suite X` must name a suite
that exists; a command of SYNTAX_ONLY (an hour long) is checked with sh -n.
A command that needs something absent here (torch, perf) is skipped with
the reason, and so is one that exits 77 itself, saying why (a script
that checks for its own parts). Prose that spells a command outside a block fails:
a command is written where this test runs it, so none can drift.
"""
import os
import re
import shutil
import subprocess
import sys
import time

QUICK_ENV = {"REPS": "1", "SIZES": "8", "NP": "2", "SOAK_SECONDS": "5", "SECONDS_SAMPLED": "1", "FREQ": "500",
             "PLEXUS_TORCH_TESTS": "test_all_reduce_sum", "PLEXUS_SUITE_START": "fork", "CKPT_MIB": "8",
             "ITERS": "5", "ROUNDS": "3", "BLOCK_SIZES": "8", "HOSTS": "2"}
PER_COMMAND_TIMEOUT_S = 600

# Words a README command uses as a placeholder for something of the reader's.
PLACEHOLDERS = {"OLD/build": "build"}

# Commands too long for a test run (these words, then any arguments), with why: only their syntax is
# checked (sh -n).
SYNTAX_ONLY = {
    "sh scripts/chroot.sh": "debootstraps Debian 13 or sid and builds this tree in it (an hour, 2 GB)",
    "sh bench/plot_compare.sh": "benchmarks on a quiet machine for the README's plot (minutes; refuses a busy one)",
}

# Commands whose output must say something: (status predicate, pattern).
EXPECT = {
    # the injected failure reaches every rank, which then stops cleanly
    "--fail-at 1:2": (lambda rc: rc == 0, r"(?s)(pipeline stage 1 failed.*){8}"),
}

# Prose code spans that start like this and contain a space are commands.
COMMAND_START = re.compile(r"^(sh |build/|meson (devenv|test) |cd |python3 |/usr/bin/python3 |PLEXUS_\w+=\S* )")


def strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def readme_blocks(text):
    """Yield (line number, command) for every command of every ```sh block."""
    lines = text.split("\n")
    in_block = False
    pending, start = "", 0
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_block = line.strip() == "```sh" if not in_block else False
            continue
        if not in_block:
            continue
        body = strip_comment(line) if not pending else line.rstrip()
        if not body.strip():
            continue
        if not pending:
            start = n
        if body.endswith("\\"):
            pending += body[:-1].strip() + " "
            continue
        yield start, (pending + strip_comment(body).strip()).strip()
        pending = ""


def documents(src):
    """(name, text) of README.md, then of each docs/*.md it links, in the order of the first links."""
    readme = open(os.path.join(src, "README.md")).read()
    out, seen = [("README.md", readme)], set()
    for doc in re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme):
        if doc not in seen:
            seen.add(doc)
            with open(os.path.join(src, doc)) as f:
                out.append((doc, f.read()))
    return out


def all_commands(src):
    """("FILE:LINE", command) for every command of the README and its documents, in order."""
    return [(f"{name}:{n}", c) for name, text in documents(src) for n, c in readme_blocks(text)]


def prose_commands(text):
    """Code spans outside blocks that spell a command."""
    out = []
    in_block = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            continue
        for span in re.findall(r"`([^`]+)`", line):
            if re.fullmatch(r"\w+=(\"[^\"]*\"|'[^']*')", span):
                continue  # a variable's value, not a command
            if " " in span and COMMAND_START.match(span):
                out.append((n, span))
    return out


def named_scripts(cmd, src):
    """The text of the Python scripts this command runs (its words that are .py files of the tree)."""
    out = []
    for word in cmd.split():
        path = os.path.join(src, word)
        if word.endswith(".py") and os.path.isfile(path):
            with open(path) as f:
                out.append(f.read())
    return "\n".join(out)


def have_torch():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


def missing_part(cmd, src, build, torch_installed=have_torch):
    """Why this command cannot run here, or None. A command needs torch when it says so or when a
    script it runs imports it (bench/ddp_busy.py): the set-up installs no torch (only the test peers do)."""
    if "torch" in cmd or re.search(r"^\s*(import|from) torch\b", named_scripts(cmd, src), re.M):
        if not torch_installed():
            return "torch is not installed (python3-torch: sh scripts/deps.sh --test-peers)"
        if not any(f.startswith("_C") or f.endswith(".so")
                   for _, _, fs in os.walk(os.path.join(build, "python")) for f in fs):
            return "plexus.torch is not built in this tree (-Dtorch)"
    if "profile" in cmd and not shutil.which("perf"):
        return "perf is not installed (linux-perf)"
    return None


def suites(build):
    r = subprocess.run(["meson", "test", "-C", build, "--list"], capture_output=True, text=True)
    found = set()
    for line in r.stdout.splitlines():
        m = re.match(r"^[^:]+:(\S+) / ", line)
        if m:
            found.update(m.group(1).split("+"))
    return found


def main():
    src, build = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
    if build != os.path.join(src, "build"):
        print(f"SKIP: the README's commands name ./build; this build is {build}")
        return 77
    ci = open(os.path.join(src, ".ci", "run")).read()
    commands = all_commands(src)
    if "--list" in sys.argv:
        for where, c in commands:
            print(f"{where}: {c}")
        return 0

    failures = []
    block_text = "\n".join(c for _, c in commands)
    for name, text in documents(src):
        for n, span in prose_commands(text):
            if span not in block_text:
                failures.append(f"{name}:{n}: `{span}` is a command outside a ```sh block (nothing runs it)")

    env = dict(os.environ)
    env.pop("PLEXUS_CONFIG_PATH", None)  # a reader's shell has none: the commands must find plugins themselves
    env.update(QUICK_ENV)
    env["PLEXUS_SETUP_NO_WIPE"] = "1"  # the setup command must not configure anew the build this test runs in
    known_suites = None
    ran = skipped = 0
    for where, cmd in commands:
        if cmd.startswith("meson test -C build"):
            m = re.search(r"--suite (\S+)", cmd)
            if m:
                known_suites = known_suites if known_suites is not None else suites(build)
                if m.group(1) not in known_suites:
                    failures.append(f"{where}: `{cmd}`: no suite '{m.group(1)}' in this build")
                else:
                    print(f"{where}: suite '{m.group(1)}' exists (the test command runs it): {cmd}")
                continue
            if cmd in ci:
                print(f"{where}: .ci/run runs it: {cmd}")
            else:
                failures.append(f"{where}: `{cmd}` is not in .ci/run")
            continue
        if cmd.startswith(("sh scripts/tsan.sh", "sh scripts/fuzz-ci.sh", "sh scripts/deps.sh --test-peers")):
            if cmd in ci:
                print(f"{where}: a CI stage, .ci/run runs it: {cmd}")
            else:
                failures.append(f"{where}: `{cmd}` is not in .ci/run")
            continue
        long_one = next((k for k in SYNTAX_ONLY if cmd == k or cmd.startswith(k + " ")), None)
        if long_one:
            script = cmd.split()[1]
            r = subprocess.run(["sh", "-n", os.path.join(src, script)], capture_output=True, text=True)
            if r.returncode:
                failures.append(f"{where}: `{cmd}`: sh -n: {r.stderr.strip()}")
            else:
                print(f"{where}: syntax only ({SYNTAX_ONLY[long_one]}): {cmd}")
            continue
        why = missing_part(cmd, src, build)
        if why:
            print(f"{where}: SKIP ({why}): {cmd}")
            skipped += 1
            continue
        run = cmd
        for word, real in PLACEHOLDERS.items():
            run = run.replace(word, real)
        t0 = time.monotonic()
        try:
            r = subprocess.run(["sh", "-c", run], cwd=src, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=PER_COMMAND_TIMEOUT_S)
            rc, out = r.returncode, r.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        took = time.monotonic() - t0
        expect = next((v for k, v in EXPECT.items() if k in cmd), None)
        if rc == 77 and expect is None and out.strip():  # the project's skip: the command said why
            print(f"{where}: SKIP (exit 77: {out.strip().splitlines()[-1]}): {cmd}")
            skipped += 1
            continue
        ran += 1
        ok_status = (lambda c: c == 0) if expect is None else expect[0]
        ok = rc is not None and ok_status(rc) and (expect is None or re.search(expect[1], out))
        status = "timed out" if rc is None else f"exit {rc}"
        print(f"{where}: {'ok' if ok else 'FAILED'} ({status}, {took:.1f} s): {cmd}")
        if not ok:
            tail = "\n".join(out.splitlines()[-25:])
            failures.append(f"{where}: `{cmd}`: {status}" +
                            (f", output lacks /{expect[1]}/" if expect and rc is not None else "") +
                            f"\n{tail}")
    print(f"{ran} README commands ran, {skipped} skipped, {len(failures)} failed")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
