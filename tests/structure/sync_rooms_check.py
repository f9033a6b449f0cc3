"""The sync engine's shape (core/sync/README.md): its parts live in subfolders, no source file of the engine is
longer than MAX_LINES (the schedule solver aside), and Policy's core interface declares at most MAX_VIRTUALS
virtual functions (everything else a policy may do is an optional capability, core/sync/policy/capabilities.h).

usage: sync_rooms_check.py REPO_ROOT     exit 0 when every rule holds, 1 with one line per breach
"""
import os
import re
import sys

MAX_LINES = 300
MAX_VIRTUALS = 8
TOP_LEVEL_ALLOWED = {"README.md", "CMakeLists.txt"}
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
# The exhaustive search over phase assignments is one algorithm, kept whole.
EXEMPT = {"schedule/schedule_solver.cpp", "schedule/schedule_solver.h"}
POLICY_HEADER = "policy/policy.h"


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def class_body(text, name):
    m = re.search(r"\bclass\s+" + re.escape(name) + r"\b[^;{]*\{", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def check(root):
    sync = os.path.join(root, "core", "sync")
    errors = []
    entries = sorted(os.listdir(sync))
    rooms = [e for e in entries if os.path.isdir(os.path.join(sync, e))]
    if not rooms:
        errors.append("core/sync has no subfolders: its parts belong in rooms of their own")
    for e in entries:
        if os.path.isfile(os.path.join(sync, e)) and e not in TOP_LEVEL_ALLOWED:
            errors.append(f"core/sync/{e}: only {', '.join(sorted(TOP_LEVEL_ALLOWED))} sit directly in core/sync")
    for dirpath, _, files in os.walk(sync):
        for f in sorted(files):
            if not f.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, sync).replace(os.sep, "/")
            if rel in EXEMPT:
                continue
            with open(path, encoding="utf-8") as fh:
                n = sum(1 for _ in fh)
            if n > MAX_LINES:
                errors.append(f"core/sync/{rel}: {n} lines (at most {MAX_LINES})")
    header = os.path.join(sync, POLICY_HEADER)
    if not os.path.isfile(header):
        errors.append(f"core/sync/{POLICY_HEADER}: missing (Policy's core interface)")
    else:
        with open(header, encoding="utf-8") as fh:
            body = class_body(strip_comments(fh.read()), "Policy")
        if body is None:
            errors.append(f"core/sync/{POLICY_HEADER}: no class Policy")
        else:
            n = len(re.findall(r"\bvirtual\b", body))
            if n > MAX_VIRTUALS:
                errors.append(f"core/sync/{POLICY_HEADER}: class Policy declares {n} virtual functions "
                              f"(at most {MAX_VIRTUALS}; move the rest into a capability)")
    return errors


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
