#!/usr/bin/env python3
"""No function in core/, plugins/, strategy/ or tools/ is longer than the limit.

A long function is one that does several things a reader has to hold at
once; the house rule is that each is split where a reader would want it
split. This lists every C function whose body (from its opening brace to
its closing brace, both counted) is over the limit and fails naming them.

usage: function_length.py SOURCE_ROOT [--limit N] [--allow FILE] [DIR...]

--allow FILE names functions that may stay long for now, one
"path:function  reason" a line; an entry that no longer matches a long
function is an error too, so the list only shrinks.
"""
import argparse, os, re, sys

SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cu")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def code_only(text):
    """The text with comments, string and character literals and
    preprocessor lines blanked, newlines kept (so line numbers hold)."""
    out, i, n = [], 0, len(text)
    at_line_start = True
    while i < n:
        ch = text[i]
        if at_line_start and ch in " \t":
            out.append(ch)
            i += 1
            continue
        if at_line_start and ch == "#":
            # a directive, with its backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        at_line_start = False
        if ch == "\n":
            out.append(ch)
            at_line_start = True
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end) or " ")
            i = end
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(ch + ch)
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line of the name, brace line, closing line) of every
    function defined at file scope."""
    code = code_only(text)
    found = []
    depth = 0
    transparent = []  # depths of extern "C" { / namespace { blocks
    head_start = 0
    open_at = None    # (name, name line, brace line, depth) of the function we are in
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == "{":
            if open_at is None and depth == 0:
                head = code[head_start:i]
                flat = " ".join(head.split())
                if re.search(r'(^|\s)(extern\s*""|namespace\b)', flat) and not flat.endswith(")"):
                    transparent.append(depth)
                    head_start = i + 1
                    continue
                name = function_name(flat)
                if name:
                    name_at = head_start + re.search(r"\b%s\s*\(" % name, head).start()
                    open_at = (name, code.count("\n", 0, name_at) + 1, line, depth)
            depth += 1
        elif ch == "}":
            if transparent and transparent[-1] == depth:
                transparent.pop()
                head_start = i + 1
                continue
            depth -= 1
            if open_at and depth == open_at[3]:
                found.append((open_at[0], open_at[1], open_at[2], line))
                open_at = None
            if open_at is None:
                head_start = i + 1
        elif ch == ";" and depth == 0:
            head_start = i + 1
    return found


def function_name(head):
    """The function's name if HEAD (the text from the last statement end
    to an opening brace) is a function definition's head, else None."""
    if not head.endswith(")") or "=" in strip_parens(head):
        return None
    # the identifier right before the first top-level parenthesis
    level = 0
    for k, ch in enumerate(head):
        if ch == "(":
            if level == 0:
                before = head[:k].rstrip()
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)$", before)
                if not m or m.group(1) in ("if", "while", "for", "switch", "return", "sizeof"):
                    return None
                return m.group(1)
            level += 1
        elif ch == ")":
            level -= 1
    return None


def strip_parens(s):
    out, level = [], 0
    for ch in s:
        if ch == "(":
            level += 1
        elif ch == ")":
            level -= 1
        elif level == 0:
            out.append(ch)
    return "".join(out)


def long_functions(root, dirs, limit, seen):
    for d in dirs:
        top = os.path.join(root, d)
        if not os.path.isdir(top):
            sys.exit(f"{top}: no such folder (a check of nothing passes nothing)")
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for f in sorted(filenames):
                if not f.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for name, name_line, brace, close in functions(text):
                    seen[d] = seen.get(d, 0) + 1
                    lines = close - brace + 1
                    if lines > limit:
                        yield rel, name, name_line, lines


def read_allow(path):
    allowed = {}
    if not path:
        return allowed
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            entry = raw.split("#", 1)[0].strip()
            if not entry:
                continue
            key, _, reason = entry.partition(" ")
            if not reason.strip():
                sys.exit(f"{path}: '{key}' gives no reason")
            allowed[key] = reason.strip()
    return allowed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("dirs", nargs="*", default=["core", "plugins", "strategy", "tools"])
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--allow")
    args = ap.parse_args()
    allowed = read_allow(args.allow)
    used, bad, seen = set(), [], {}
    for rel, name, at, lines in long_functions(args.root, args.dirs, args.limit, seen):
        key = f"{rel}:{name}"
        if key in allowed:
            used.add(key)
            print(f"allowed: {rel}:{at} {name} {lines} lines ({allowed[key]})")
        else:
            bad.append(f"{rel}:{at} {name} {lines} lines")
    stale = sorted(set(allowed) - used)
    for d in args.dirs:
        if not seen.get(d):
            bad.append(f"{d}: no function found (the scanner no longer reads this tree)")
    for line in bad:
        print(f"too long: {line}")
    for key in stale:
        print(f"stale allow-list entry (no longer over {args.limit} lines): {key}")
    if bad or stale:
        print(f"FAIL: {len(bad)} function(s) over {args.limit} lines, {len(stale)} stale allow-list entries")
        return 1
    counted = ", ".join(f"{d} {seen[d]}" for d in args.dirs)
    print(f"ok: no function over {args.limit} lines (functions read: {counted})"
          + (f" ({len(used)} allowed)" if used else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
