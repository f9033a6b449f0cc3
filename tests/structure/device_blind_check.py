"""The training loop and the sync engine never ask which device they run on (docs/gpu.md "What exists", one training state):
no source file of core/train or core/sync names a device or branches on one, outside the places whose job that is:
the device factory (core/train/device_state.*), the CUDA implementations (core/train/cuda/, core/sync/cuda/) and
the data path interface (core/sync/types/data_path.h), and the option itself (core/train/config.*; recording its
name is not a branch). What the engine may ask a data path is what it can do
(host_memory(): may host code touch the arenas), not where it is.

usage: device_blind_check.py REPO_ROOT     exit 0 when no file breaks the rule, 1 with one line per breach
"""
import os
import re
import sys

ROOTS = ["core/train", "core/sync"]
ALLOWED = ["core/train/device_state.h", "core/train/device_state.cpp", "core/train/cuda/", "core/sync/cuda/",
           "core/sync/types/data_path.h", "core/train/config.h", "core/train/config.cpp"]
SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".inc")
# A device named or asked for: any enumerator of Device, any comparison with a device (a member, an accessor, a
# name string), the kernel table's host test, CUDA headers, types, constants and the compiler's CUDA macros.
BRANCH = re.compile(r"\bDevice::\w+|\bdevice\s*(?:\(\s*\))?\s*[=!]=|[=!]=\s*(?:\w+(?:\.|->))*\w*[Dd]evice\b"
                    r"|[=!]=\s*\"(?:cuda|cpu|gpu)\"|\"(?:cuda|cpu|gpu)\"\s*[=!]="
                    r"|__CUDACC__|__CUDA_ARCH__|\bkCuda\b|\bkCpu\b"
                    r"|\bis_host\s*\(|\bon_device\s*\(|DREAMDDP_HAVE_CUDA|#\s*include\s*[<\"]cuda"
                    r"|\bcuops::|\bcuda[A-Z]\w*")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def check(root):
    bad = []
    for top in ROOTS:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SUFFIXES):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                if any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED):
                    continue
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    lines = strip_comments(fh.read()).split("\n")
                for n, line in enumerate(lines, 1):
                    m = BRANCH.search(line)
                    if m:
                        bad.append(f"{rel}:{n}: names a device ({m.group(0)}): {line.strip()}")
    return bad


def main():
    if len(sys.argv) != 2 or not os.path.isdir(os.path.join(sys.argv[1], "core")):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = check(sys.argv[1])
    for b in bad:
        print(b)
    if bad:
        return 1
    print("device_blind_check: core/train and core/sync name no device outside the factory, the CUDA folders and "
          "the data path interface")
    return 0


if __name__ == "__main__":
    sys.exit(main())
