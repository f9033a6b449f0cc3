"""The layers of the house point downwards: app/ -> core/ -> backends/ -> base/. No source file includes a header
of a layer above its own (backends/ nothing of core/ or app/, core/ nothing of app/, base/ nothing but the standard
library). Usage: layers_check.py SOURCE_DIR; exit 1 naming every offending include."""
import os
import re
import sys

ORDER = ["base", "backends", "core", "app"]  # bottom to top
# Every include form: quoted, angle-bracketed (the project's root is on the include path, so <core/x.h> works too).
INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')


def main(root):
    bad = []
    for layer in ORDER:
        above = ORDER[ORDER.index(layer) + 1:]
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in files:
                if not f.endswith((".h", ".hpp", ".cpp", ".cu", ".cuh", ".inc")):
                    continue
                path = os.path.join(d, f)
                with open(path, encoding="utf-8", errors="replace") as src:
                    for n, line in enumerate(src, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        top = m.group(1).split("/")[0]
                        if top in above or (layer == "base" and top in ORDER and top != "base"):
                            bad.append("%s:%d includes %s (%s/ is above %s/)" % (
                                os.path.relpath(path, root), n, m.group(1), top, layer))
    for b in bad:
        print(b)
    if bad:
        return 1
    print("layers_check: %s, every include points downwards" % " -> ".join(reversed(ORDER)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
