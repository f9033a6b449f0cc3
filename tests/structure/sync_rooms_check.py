"""The sync engine's shape (core/sync/README.md): its parts live in subfolders, no source file of the engine is
longer than MAX_LINES (the schedule solver aside), Policy's core interface declares at most MAX_VIRTUALS
virtual functions (everything else a policy may do is an optional capability, core/sync/policy/capabilities.h),
the engine's step interface (SyncEngine) at most MAX_ENGINE_VIRTUALS with the backward hook's,
what the trainer sees of the engine outside the step at most MAX_PART_VIRTUALS virtual functions per part
(SESSION_HEADER's interfaces) and at most MAX_SESSION_PARTS parts, held by a SyncSession with no virtual function of
its own, the concrete engine (LayerSync) named nowhere in core/train or app,
the rooms include each other without a cycle (room A includes a header of room B: an edge A -> B; every edge that
lies on a cycle is named with the includes that make it), and the leaf rooms (LEAF_ROOMS) include no other room.

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
ENGINE_HEADER = "engine/sync_engine.h"
MAX_ENGINE_VIRTUALS = 6
SESSION_HEADER = "engine/sync_session.h"
MAX_PART_VIRTUALS = 3
MAX_SESSION_PARTS = 5
TRAINER_DIRS = ("core/train", "app")
# The types every other room shares: they include no other room of core/sync.
LEAF_ROOMS = {"types"}
INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')  # both include forms


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


def sources(sync):
    """(dirpath, path, rel) of every source file under core/sync, rel relative to it with '/'."""
    for dirpath, _, files in os.walk(sync):
        for f in sorted(files):
            if f.endswith(SOURCE_SUFFIXES):
                path = os.path.join(dirpath, f)
                yield dirpath, path, os.path.relpath(path, sync).replace(os.sep, "/")


def room_includes(sync):
    """{(from_room, to_room): ["core/sync/FILE:LINE", ...]} over every include of one room's header by another."""
    rooms = {e for e in os.listdir(sync) if os.path.isdir(os.path.join(sync, e))}
    edges = {}
    for dirpath, path, rel in sources(sync):
        src_room = rel.split("/")[0]
        if src_room not in rooms:
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if inc.startswith("core/sync/"):
                    target = inc[len("core/sync/"):]
                else:  # relative to the including file, when it names one there
                    local = os.path.normpath(os.path.join(dirpath, inc))
                    if not os.path.isfile(local):
                        continue
                    target = os.path.relpath(local, sync).replace(os.sep, "/")
                dst_room = target.split("/")[0]
                if dst_room in rooms and dst_room != src_room:
                    edges.setdefault((src_room, dst_room), []).append(f"core/sync/{rel}:{n}")
    return edges


def strongly_connected(nodes, edges):
    """{node: component id} (Tarjan): two rooms share a component when each reaches the other."""
    succ = {v: sorted(b for a, b in edges if a == v) for v in nodes}
    index, low, comp, stack, on_stack = {}, {}, {}, [], set()

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp[w] = v
                if w == v:
                    break

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comp


def path_back(edges, comp, start, goal):
    """The shortest room path start -> ... -> goal inside one component (breadth first)."""
    prev, queue = {start: None}, [start]
    for v in queue:
        if v == goal:
            break
        for a, b in sorted(edges):
            if a == v and b not in prev and comp[b] == comp[start]:
                prev[b] = v
                queue.append(b)
    path, v = [], goal
    while v is not None:
        path.append(v)
        v = prev[v]
    return list(reversed(path))


def include_errors(sync):
    edges = room_includes(sync)
    nodes = {r for e in edges for r in e}
    comp = strongly_connected(nodes, edges)
    errors = []
    for (a, b), sites in sorted(edges.items()):
        if a in LEAF_ROOMS:
            errors.append(f"{a} -> {b}: {a}/ is a leaf room and includes no other room ({', '.join(sites)})")
        if comp[a] == comp[b]:
            cycle = " -> ".join([a] + path_back(edges, comp, b, a))
            errors.append(f"{a} -> {b} lies on the include cycle {cycle}: {', '.join(sites)}")
    return errors


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
    for _, path, rel in sources(sync):
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
    errors.extend(engine_errors(sync))
    errors.extend(session_errors(sync))
    errors.extend(concrete_engine_errors(root))
    if rooms:
        errors.extend(include_errors(sync))
    return errors


def engine_errors(sync):
    """The step as a protocol: class SyncEngine declares at most MAX_ENGINE_VIRTUALS virtual functions, counting
    the backward hook's on_layer_ready it inherits and not its destructor."""
    header = os.path.join(sync, ENGINE_HEADER)
    if not os.path.isfile(header):
        return [f"core/sync/{ENGINE_HEADER}: missing (the engine's interface)"]
    with open(header, encoding="utf-8") as fh:
        body = class_body(strip_comments(fh.read()), "SyncEngine")
    if body is None:
        return [f"core/sync/{ENGINE_HEADER}: no class SyncEngine"]
    n = len(re.findall(r"\bvirtual\s+(?!~)", body)) + 1  # + nn::BackwardHook::on_layer_ready
    if n > MAX_ENGINE_VIRTUALS:
        return [f"core/sync/{ENGINE_HEADER}: class SyncEngine has {n} virtual functions with the hook's "
                f"(at most {MAX_ENGINE_VIRTUALS}; what lies outside the step belongs to SyncSession)"]
    return []


def session_errors(sync):
    """What the trainer sees outside the step: every class of SESSION_HEADER but SyncSession is a part of at most
    MAX_PART_VIRTUALS virtual functions (not counting its destructor); SyncSession declares none and holds at most
    MAX_SESSION_PARTS parts (reference members)."""
    header = os.path.join(sync, SESSION_HEADER)
    where = f"core/sync/{SESSION_HEADER}"
    if not os.path.isfile(header):
        return [f"{where}: missing (the engine's parts outside the step)"]
    with open(header, encoding="utf-8") as fh:
        text = strip_comments(fh.read())
    errors = []
    names = re.findall(r"\bclass\s+(\w+)\b[^;{]*\{", text)
    if "SyncSession" not in names:
        return [f"{where}: no class SyncSession"]
    for name in names:
        body = class_body(text, name)
        n = len(re.findall(r"\bvirtual\s+(?!~)", body))
        if name == "SyncSession":
            parts = len(re.findall(r"^\s*[\w:]+&\s+\w+\s*;", body, flags=re.M))
            if n:
                errors.append(f"{where}: class SyncSession declares {n} virtual functions (it holds the parts by name, "
                              "it is no interface of its own)")
            if parts > MAX_SESSION_PARTS:
                errors.append(f"{where}: class SyncSession hands out {parts} parts (at most {MAX_SESSION_PARTS})")
        elif n > MAX_PART_VIRTUALS:
            errors.append(f"{where}: class {name} declares {n} virtual functions (at most {MAX_PART_VIRTUALS}: split "
                          "the part, or move what the step needs into SyncEngine)")
    return errors


def concrete_engine_errors(root):
    """The trainer and the app hold the engine by its interfaces: no source of TRAINER_DIRS names LayerSync."""
    errors = []
    for top in TRAINER_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    if re.search(r"\bLayerSync\b", strip_comments(fh.read())):
                        rel = os.path.relpath(path, root).replace(os.sep, "/")
                        errors.append(f"{rel}: names LayerSync (hold the engine by SyncSession's parts)")
    return errors


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(sys.argv[1], "core", "sync")):
        print(f"sync_rooms_check: {sys.argv[1]} has no core/sync folder (not the repository root?)", file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
