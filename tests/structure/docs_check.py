"""The documents match the code they describe: every heading a document or a source comment cites (a markdown link
`file.md#anchor`, or `file.md "Heading"`) exists, and every type (a CamelCase name) and function (`name(`) that
docs/design.md and the folder READMEs name in backticks exists in the sources.

usage: docs_check.py REPO_ROOT     exit 0 when every name is found, 1 with one line per missing name"""
import os
import re
import sys

SKIP_DIRS = {"build", "build-san", "runs", ".git", ".venv-peer", "node_modules"}
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".inc", ".py", ".sh")
TEXT_SUFFIXES = (".md",) + SOURCE_SUFFIXES
LINK = re.compile(r"\]\(([^)#\s]*\.md)?#([^)\s]+)\)")
# docs/x.md "Heading", "Another heading" (the first after the file name, then any that follow with a comma)
QUOTED = re.compile(r"([\w./-]+\.md)((?:,?\s+\"[^\"\n]+\")+)")
TYPE = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
CALL = re.compile(r"^([a-z_][a-z0-9_]*)\(")


def walk(root, suffixes):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(".")]
        if os.path.normpath(d).endswith(os.path.join("tests", "structure")):
            continue  # the checks and their fixtures of breaches
        for f in sorted(files):
            if f.endswith(suffixes):
                yield os.path.join(d, f)


def slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(path):
    out = set()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = re.match(r"^#+\s+(.*)", line)
            if m:
                out.add(m.group(1).strip())
    return out


def resolve(root, here, name):
    """A cited .md: relative to the citing file, else to the repository root."""
    for base in (os.path.dirname(here), root):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def citation_errors(root):
    errors = []
    for path in walk(root, TEXT_SUFFIXES):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in LINK.finditer(text):
            target = resolve(root, path, m.group(1)) if m.group(1) else path
            if target is None:
                errors.append(f"{rel}: links to {m.group(1)}, which does not exist")
            elif m.group(2) not in {slug(h) for h in headings(target)}:
                errors.append(f"{rel}: links to {os.path.relpath(target, root)}#{m.group(2)}: no such heading")
        for m in QUOTED.finditer(text):
            target = resolve(root, path, m.group(1))
            if target is None:
                continue  # a file name in prose, not a citation of this tree
            have = headings(target)
            for h in re.findall(r"\"([^\"\n]+)\"", m.group(2)):
                # A heading may be cited by what comes before its colon ("Rejoin" for "Rejoin: a lost rank ...").
                if h not in have and not any(x.startswith(h + ":") for x in have):
                    errors.append(f"{rel}: cites {os.path.relpath(target, root)} \"{h}\": no such heading")
    return errors


def source_identifiers(root):
    idents = set()
    for top in ("base", "backends", "core", "app", "tests", "analysis", "experiments", "peers"):
        for path in walk(os.path.join(root, top), SOURCE_SUFFIXES):
            with open(path, encoding="utf-8", errors="replace") as fh:
                idents.update(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", fh.read()))
    return idents


def name_errors(root):
    docs = [os.path.join(root, "docs", "design.md")]
    for top in ("base", "backends", "core", "app"):
        docs += [p for p in walk(os.path.join(root, top), (".md",))]
    idents = source_identifiers(root)
    errors = []
    for path in docs:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for span in re.findall(r"`([^`\n]+)`", text):
            for word in re.split(r"[\s,;]+", span):
                word = word.strip(".:")
                if not word.isascii():
                    continue  # notation (mean_ranks(θ_l)), not a name of the code
                name = word.split("::")[-1]
                call = CALL.match(name)
                if call:
                    name = call.group(1)
                elif not TYPE.match(name):
                    continue
                if name not in idents:
                    errors.append(f"{os.path.relpath(path, root)}: names `{word}`, found in no source")
    return sorted(set(errors))


def main(argv):
    if len(argv) != 2 or not os.path.isdir(os.path.join(argv[1], "docs")):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    errors = citation_errors(argv[1]) + name_errors(argv[1])
    for e in errors:
        print(e)
    if errors:
        return 1
    print("docs_check: every cited heading exists; every type and function the design and the READMEs name is "
          "in the sources")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
