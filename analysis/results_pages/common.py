"""Provenance and formatting shared by every results page: loading a results file, its provenance line,
numbers and links.
"""
import json
import os
import re


MACHINE_FIELDS = ("date", "cpu", "cpu_flags", "cores", "load_1m", "load_1m_end", "commit", "tree_clean")
HISTORY = "history.md"          # docs/results page that takes incomplete records
_lenient = [False]              # True while a history_ section renders


def missing_fields(d):
    """The provenance fields a results document lacks (empty: complete)."""
    if not isinstance(d, dict):
        return ["command", "machine", "peer"]
    out = [] if isinstance(d.get("command"), str) and d["command"] else ["command"]
    m = d.get("machine")
    if not isinstance(m, dict):
        out.append("machine")
    else:
        out += ["machine." + k for k in MACHINE_FIELDS if m.get(k) is None]
    if "peer" not in d or not (d["peer"] is None or isinstance(d["peer"], dict)):
        out.append("peer")
    return out


def _read(results, name):
    p = os.path.join(results, name)
    return json.load(open(p)) if os.path.exists(p) else None


def _load(results, name):
    """A results file, or None when it is absent or (outside the history page) its provenance is incomplete."""
    d = _read(results, name)
    if d is None or (missing_fields(d) and not _lenient[0]):
        return None
    return d


_PATH = re.compile(r"(?<![\w:/.])/(?:work|root|home|tmp)/[^\s,;'\"`)]*")


_RUN_DIRS = re.compile(r"(?:\s+\S+/[^\s/]+\.r\d+)+")


def short_command(cmd):
    """A recorded command as a provenance line shows it: scrubbed of machine paths, and a list of run directories
    (DIR/NAME.rK ...) folded into DIR/* and their count, so that the line names the command, not every run."""
    def fold(m):
        dirs = m.group(0).split()
        if len(dirs) < 2:
            return m.group(0)
        return " %s/* (%d runs)" % (os.path.commonpath([os.path.dirname(x) for x in dirs]), len(dirs))
    return _RUN_DIRS.sub(fold, scrub(cmd))


def scrub(text):
    """A machine's own absolute paths in recorded commands become their last component (`…/dreamddp`)."""
    return _PATH.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def _machine(m):
    load = "load %s" % _f(m.get("load_1m"))
    if m.get("load_1m_end") is not None:
        load += " at the start, %s at the end" % _f(m["load_1m_end"])
    tree = {True: "clean tree", False: "uncommitted changes"}.get(m.get("tree_clean"), "tree state not recorded")
    return "%s, %s (%s), %s cores, %s; commit %s (%s)" % (
        m.get("date", "?"), m.get("cpu", "?"), "/".join(m.get("cpu_flags") or []) or "no AVX2",
        m.get("cores", "?"), load, m.get("commit", "?"), tree)


def _peer(d):
    if "peer" not in d:
        return "peer not recorded"
    p = d["peer"]
    if p is None:
        return "no peer"
    return "peer: " + ", ".join("%s %s" % (k, v) for k, v in sorted(p.items()) if v not in ("", None))


def _prov(d):
    """The provenance line of a rendered table: command, machine, commit and tree, peer."""
    return "`%s` — %s; %s." % (short_command(d.get("command", "?")), _machine(d.get("machine") or {}), _peer(d))


def _f(x, fmt="%.2f", none="-"):
    return none if x is None else fmt % x


def _rel(page):
    """A link to a results page from the page being rendered (README.md or a page of docs/results)."""
    return ("docs/results/" if _target[0] == "README.md" else "") + page


def _fmt_sps(x):
    """Samples/s: whole numbers from 100 up, three significant digits below (gpt2 at one sequence per rank)."""
    return "%.0f" % x if x >= 100 else "%.3g" % x


def _absent(name, how):
    return ("_No complete record of %s yet (%s); an earlier one, if any, is on the [history page](%s)._\n"
            % (name, how, _rel(HISTORY)))


_target = ["README.md"]


def _median(xs):
    xs = sorted(xs)
    return None if not xs else xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
