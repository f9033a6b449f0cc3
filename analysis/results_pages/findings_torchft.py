"""The README's finding on torchft as a peer: throughput and launch to exit against its twins, and its faults."""
import re

from .common import _load, _median, _rel
from .findings_cells import _absent_line
from .torchft import _torchft_e2e, _torchft_twin


def _torchft_fault_goodputs(cells):
    """One sentence: a torchft_faults study's median goodput per fault, ours and torchft's."""
    su, per = cells["set_up"], []
    for fault in su.get("faults", "kill").split(","):
        g = {s: _median([r["goodput"] for r in cells["runs"] if r["system"] == s and r.get("goodput") is not None
                         and (r.get("fault") or "").startswith(fault + " ")]) for s in ("ours", "torchft")}
        if None not in g.values():
            per.append("%s %.3f ours, %.3f torchft" % (fault, g["ours"], g["torchft"]))
    if not per:
        return ""
    return (" One fault of one rank (%s, %d ranks; median of %d alternating repeats), goodput: %s." % (
        su["model"], su["ranks"], su.get("repeats", 1), "; ".join(per)))


def _torchft_why_behind(method, measured_again, closes_on_merge, plain_step_ms=None, step_ms=None):
    """Why a run of ours ends after its torchft twin (docs/results/torchft.md "Throughput and loss"); the merge-key
    rows of the first study ran before their start from ordinary steps, those measured again after it, and those of
    the closing-merge study after their last period left its sync to one outer step after the last step.
    plain_step_ms, step_ms: a compressed row's step and that of the same method without compression, same link."""
    if ("delay=" in method or "outer=" in method or "compress=" in method) and not measured_again:
        return "it profiles its first steps in lock-step, each a whole-model all-reduce"
    if "compress=" in method and plain_step_ms and step_ms and step_ms > plain_step_ms:
        return ("on this link the encoding costs more than the bytes it saves: its steps are slower than the same "
                "method's without compression")
    if method.startswith(("dreamddp", "plsgd")) and "outer=nesterov" in method and closes_on_merge:
        return ("its last period's sync is one outer step of the whole model after the last step, which no compute "
                "hides, and leaves every rank the same model; Streaming DiLoCo's replicas end as they are, on models "
                "that differ")
    if method.startswith(("dreamddp", "plsgd")) and "outer=nesterov" in method:
        return ("an outer step is not a plain average, so its last period keeps its averages and its consensus model "
                "needs one whole-model average after the last step; Streaming DiLoCo's replicas end as they are")
    if method.startswith(("dreamddp", "plsgd")):
        return ("its consensus model needs one whole-model average after the last step; torchft's run makes none "
                "after its last step")
    return "not taken apart"


# Later studies of some of the torchft study's methods, oldest first, each with what changed before it: their rows
# (and their twins') take the place of the earlier ones.
TORCHFT_LATER = (("torchft_merge_keys.json", "after their start changed"),
                 ("torchft_last_period.json", "after the last period left its averages to the closing one"),
                 ("torchft_closing_merge.json", "after the last period under an outer step closed on that step"))


def _torchft_rows(d, laters):
    """The torchft study's rows and each row's launch-to-exit times, with the rows of later studies of some of the
    same methods (TORCHFT_LATER, loaded; None where absent) in place of the earlier ones. Returns the rows, the
    launch-to-exit times per row and, per later study, the keys of the rows it gave."""
    key = lambda r: (r["network"], r["system"], r["method"])
    rows, runs, newer = list(d["results"]), list(d.get("runs", [])), []
    for later in laters:
        mine = {key(r) for r in (later or {}).get("results", [])}
        newer.append(mine)
        rows = [r for r in rows if key(r) not in mine] + list((later or {}).get("results", []))
        runs = [x for x in runs if key(x) not in mine] + list((later or {}).get("runs", []))
    run_s = {}
    for x in runs:
        run_s.setdefault(key(x), []).append(x["run_s"])
    return rows, run_s, newer


def _finding_torchft(results):
    d, f = _load(results, "torchft.json"), _load(results, "torchft_faults.json")
    if not d:
        return _absent_line("torchft as a peer", "torchft.md")
    laters = [_load(results, name) for name, _ in TORCHFT_LATER]
    rows, run_s, newer = _torchft_rows(d, laters)
    measured_again = set().union(*newer)
    closed_on_merge = newer[-1]
    val = {(r["network"], r["system"], r["method"]): r for r in rows}
    per_net, behind = {}, []
    for r in rows:
        if r["system"] != "dreamddp":
            continue
        t = val.get((r["network"], "torchft", _torchft_twin(r["method"])))
        if t and t.get("peer_ok", True):
            e = _torchft_e2e(run_s, r, t)
            per_net.setdefault(r["network"], []).append("%s %s[%.2fx]" % (
                r["method"], "%.2fx " % e if e else "", r["samples_per_s"] / t["samples_per_s"]))
            if e and e < 1:
                k = (r["network"], r["system"], r["method"])
                behind.append((r["network"], r["method"], k in measured_again, k in closed_on_merge))
    withheld = sorted({r["network"] for r in rows if r["system"] == "torchft" and not r.get("peer_ok", True)})
    su = d["set_up"]
    text = ("**torchft as a peer.** torchft %s's own LocalSGD, DiLoCo and Streaming DiLoCo on %s, %d ranks, H=%d, "
            "against our policies (samples/s over the torchft twin from launch to exit, with the timed steps' "
            "ratio in brackets): %s." % (
                (d.get("peer") or {}).get("torchft", "?"), su["model"], su["ranks"], su["h"],
                "; ".join("%s: %s" % (n, ", ".join(v)) for n, v in per_net.items()) or "no ratio"))
    if withheld:
        text += (" At %s the ratios are withheld: some torchft runs measured their GEMM below the rules' floor on "
                 "the loaded machine." % ", ".join(withheld))
    reps = su.get("repeats_done") or {}
    if reps:
        text += " Repeats per link: %s." % ", ".join("%s %d" % kv for kv in reps.items())
    for (_, what), later, mine in zip(TORCHFT_LATER, laters, newer):
        # a row a still later study measured again is that study's
        mine = {k for k in mine if k in {(r["network"], r["system"], r["method"]) for r in rows if r in later["results"]}} \
            if later else set()
        if mine:
            text += " The rows of %s and their twin are from a later study of their own (%s), %s." % (
                ", ".join(sorted({m for _, s, m in mine if s == "dreamddp"})),
                ", ".join("%s %d" % kv for kv in (later["set_up"].get("repeats_done") or {}).items())
                or "repeats as above", what)
    text += (" compress=int8 is set against unquantized Streaming DiLoCo: torchft's quantized all-reduce runs on CUDA "
             "only.")
    if behind:
        why = {}
        for n, m, again, closed in behind:
            plain = val.get((n, "dreamddp", re.sub(r",compress=[^,]*", "", m)))
            reason = _torchft_why_behind(m, again, closed, plain and plain["step_ms"], val[(n, "dreamddp", m)]["step_ms"])
            why.setdefault(reason, []).append("%s at %s" % (m, n))
        text += " Where we lose from launch to exit: %s." % "; ".join(
            "%s (%s)" % (", ".join(runs), w) for w, runs in why.items())
    cells = _load(results, "torchft_faults_cells.json")
    if cells:
        text += _torchft_fault_goodputs(cells)
        gpt = _load(results, "torchft_faults_gpt2.json")
        if gpt:
            text += _torchft_fault_goodputs(gpt)
    elif f:
        g = {r["system"]: r for r in f["runs"] if r.get("fault") and r.get("goodput") is not None}
        if "ours" in g and "torchft" in g:
            text += (" One killed and restarted rank (%s, %d ranks): goodput %.3f ours, %.3f torchft, one repeat." % (
                f["set_up"]["model"], f["set_up"]["ranks"], g["ours"]["goodput"], g["torchft"]["goodput"]))
    return text + " ([torchft](%s))" % _rel("torchft.md")
