"""Each structure check fails when fed the breach it is for. The tree (sources, docs, tests, scripts) is copied to a scratch directory, one breach is written into the copy, and the check must exit 1 naming the file; the
unchanged copy must pass. A check that cannot fail would pass this test's first half only.

usage: checks_fail_test.py REPO_ROOT"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOPS = ("base", "backends", "core", "app", "docs", "tests", "analysis", "experiments", "peers")


def run(check, root):
    p = subprocess.run([sys.executable, os.path.join(HERE, check), root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def append(path, text):
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def long_function(lines):
    return "int f() {\n" + "  int x = 0;\n" * lines + "  return 0;\n}\n"


def long_python_function(lines):
    return "def f():\n" + "    x = 0\n" * lines + "    return x\n"


# (check, breach, file it names relative to the copy, how to write it)
CASES = [
    ("layers_check.py", "quoted include of a layer above", "backends/common/bad.h",
     lambda r: write(os.path.join(r, "backends/common/bad.h"), '#include "core/sync/types/layer_meta.h"\n')),
    ("layers_check.py", "angle-bracket include of a layer above", "core/ops/bad.cpp",
     lambda r: write(os.path.join(r, "core/ops/bad.cpp"), "#include <app/commands.h>\n")),
    ("layers_check.py", "an include in a .inc file", "base/bad.inc",
     lambda r: write(os.path.join(r, "base/bad.inc"), '#include "backends/backend.h"\n')),
    ("device_blind_check.py", "an enumerator of Device", "core/train/bad.cpp",
     lambda r: write(os.path.join(r, "core/train/bad.cpp"), "bool f(const C& c) { return c.kind == Device::Gpu; }\n")),
    ("device_blind_check.py", "an accessor compared", "core/sync/engine/bad.cpp",
     lambda r: write(os.path.join(r, "core/sync/engine/bad.cpp"), "bool f(const A& a) { return a.device() == b; }\n")),
    ("device_blind_check.py", "a device's name compared", "core/train/bad2.cpp",
     lambda r: write(os.path.join(r, "core/train/bad2.cpp"), 'bool f(const O& o) { return o.dev != "cuda"; }\n')),
    ("device_blind_check.py", "the compiler's CUDA macro", "core/sync/merge/bad.h",
     lambda r: write(os.path.join(r, "core/sync/merge/bad.h"), "#ifdef __CUDACC__\nint x;\n#endif\n")),
    ("size_check.py", "a file too long", "core/ops/bad_long.cpp",
     lambda r: write(os.path.join(r, "core/ops/bad_long.cpp"), "int x;\n" * 401)),
    ("size_check.py", "a function too long", "app/cli/bad_fn.cpp",
     lambda r: write(os.path.join(r, "app/cli/bad_fn.cpp"), long_function(85))),
    ("size_check.py", "a Python file too long", "analysis/bad_long.py",
     lambda r: write(os.path.join(r, "analysis/bad_long.py"), "x = 0\n" * 401)),
    ("size_check.py", "a Python function too long", "experiments/bad_fn.py",
     lambda r: write(os.path.join(r, "experiments/bad_fn.py"), long_python_function(85))),
    ("size_check.py", "a Python method too long, its length in a nested function", "peers/bad_method.py",
     lambda r: write(os.path.join(r, "peers/bad_method.py"), "class C:\n    def m(self):\n        def inner():\n" +
                     "            x = 0\n" * 85 + "        return inner\n")),
    ("sync_rooms_check.py", "a file directly in core/sync", "core/sync/bad.h",
     lambda r: write(os.path.join(r, "core/sync/bad.h"), "int x;\n")),
    ("sync_rooms_check.py", "the leaf room including another room", "core/sync/types/bad.h",
     lambda r: write(os.path.join(r, "core/sync/types/bad.h"), "#include <core/sync/policy/policy.h>\n")),
    ("docs_check.py", "a citation of a heading that does not exist", "core/ops/cites.h",
     lambda r: write(os.path.join(r, "core/ops/cites.h"), '// as docs/design.md "No such heading" says\n')),
    ("docs_check.py", "a link to an anchor that does not exist", "docs/linked.md",
     lambda r: write(os.path.join(r, "docs/linked.md"), "See [the step](design.md#no-such-anchor).\n")),
    ("docs_check.py", "a type the code does not have", "docs/design.md",
     lambda r: append(os.path.join(r, "docs/design.md"), "\nThe `GradientCourier` carries it.\n")),
    ("docs_check.py", "a function the code does not have", "core/sync/README.md",
     lambda r: append(os.path.join(r, "core/sync/README.md"), "\nCall `launch_everything_now()` first.\n")),
    ("sync_rooms_check.py", "a ninth virtual in Policy", "core/sync/policy/policy.h",
     lambda r: add_virtual(os.path.join(r, "core/sync/policy/policy.h"), "Policy", 9)),
    ("sync_rooms_check.py", "a part outside the step grown into a bag", "core/sync/engine/sync_session.h",
     lambda r: add_virtual(os.path.join(r, "core/sync/engine/sync_session.h"), "RunControl", 4)),
    ("sync_rooms_check.py", "a virtual in the session that holds the parts", "core/sync/engine/sync_session.h",
     lambda r: add_virtual(os.path.join(r, "core/sync/engine/sync_session.h"), "SyncSession", 1)),
    ("sync_rooms_check.py", "a seventh call in the step protocol", "core/sync/engine/sync_engine.h",
     lambda r: add_virtual(os.path.join(r, "core/sync/engine/sync_engine.h"), "SyncEngine", 2)),
    ("sync_rooms_check.py", "the trainer naming the concrete engine", "core/train/bad_engine.cpp",
     lambda r: write(os.path.join(r, "core/train/bad_engine.cpp"), "void f(dd::sync::LayerSync& e);\n")),
]


def add_virtual(path, cls, n):
    """Adds n virtual functions at the top of class `cls` (enough to pass any limit)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    key = "class " + cls
    i = text.index("{", text.index(key)) + 1
    extra = "".join(f"\n public:\n  virtual void extra_{k}() {{}}" for k in range(n))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text[:i] + extra + text[i:])


def main(root):
    failures = []
    with tempfile.TemporaryDirectory(prefix="dd-structure-") as tmp:
        clean = os.path.join(tmp, "clean")
        for top in TOPS:
            shutil.copytree(os.path.join(root, top), os.path.join(clean, top))
        for check in sorted({c[0] for c in CASES}):
            rc, out = run(check, clean)
            if rc != 0:
                failures.append(f"{check} fails on the unchanged tree (exit {rc}): {out.strip()[:300]}")
        for k, (check, what, names, breach) in enumerate(CASES):
            tree = os.path.join(tmp, f"case{k}")
            shutil.copytree(clean, tree)
            breach(tree)
            rc, out = run(check, tree)
            if rc != 1 or names not in out:
                failures.append(f"{check} given {what} ({names}): exit {rc}, output: {out.strip()[:300]!r}")
            else:
                print(f"ok: {check} refuses {what}")
            shutil.rmtree(tree)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
