"""docs/results/torchft.md: dreamddp against torchft, with and without faults."""
import re
from .common import _absent, _f, _fmt_sps, _load, _median, _prov


def _torchft_e2e(run_s, r, t):
    """Samples/s from launch to exit, ours over its torchft twin: both run the same steps of the same batch, so the
    ratio of their median launch-to-exit seconds (None where either has none)."""
    a = _median(run_s.get((r["network"], r["system"], r["method"]), []))
    b = _median(run_s.get((t["network"], t["system"], t["method"]), []))
    return b / a if a and b else None


def _torchft_twin(method):
    if method.startswith("localsgd"):
        return "localsgd"
    return "streaming" if "delay=" in method else "localsgd"


def render_torchft(results, name="torchft.json"):
    """experiments/torchft_study.py: ours against torchft's LocalSGD / DiLoCo / Streaming DiLoCo, per network."""
    d = _load(results, name)
    if not d:
        return _absent("the torchft comparison", "run `experiments/torchft_study.sh --out runs/torchft "
                       "--results experiments/results/torchft.json`")
    su = d["set_up"]
    out = ["| network | system | method | samples/s (runs) | step ms | launch to exit, s (runs) | final loss (runs) | "
           "vs its torchft twin, timed steps | vs its twin, launch to exit |", "|---|---|---|---|---|---|---|---|---|"]
    rows = d["results"]
    run_s = {}
    for x in d.get("runs", []):
        run_s.setdefault((x["network"], x["system"], x["method"]), []).append(x["run_s"])
    val = {(r["network"], r["system"], r["method"]): r for r in rows}
    for r in rows:
        ratio, e2e = "-", "-"
        if r["system"] == "dreamddp":
            t = val.get((r["network"], "torchft", _torchft_twin(r["method"])))
            if t and t.get("peer_ok", True):  # the peer rules withhold both ratios alike
                ratio = "%.2fx %s" % (r["samples_per_s"] / t["samples_per_s"], t["method"])
                e = _torchft_e2e(run_s, r, t)
                e2e = "%.2fx %s" % (e, t["method"]) if e else "-"
        method = r["method"] if r["system"] == "dreamddp" else "`%s`" % r["class"]
        out.append("| %s | %s | %s | %s (%s) | %.0f | %s | %s | %s | %s |" % (
            r["network"], "ours" if r["system"] == "dreamddp" else "torchft", method if r["system"] == "torchft"
            else "`%s`" % method, _fmt_sps(r["samples_per_s"]),
            ", ".join(_fmt_sps(x) for x in r["samples_per_s_runs"]), r["step_ms"],
            ", ".join("%.0f" % x for x in run_s.get((r["network"], r["system"], r["method"]), [])) or "-",
            ", ".join("%.2f" % x for x in r["final_loss_runs"]), ratio + (" (noisy)" if r.get("noisy") else ""),
            e2e))
    g = [x for r in rows if r["system"] == "torchft" for x in r.get("peer_gemm_gflops_runs", [])]
    low = [x for x in g if x < 0.7 * su["our_gemm_gflops"]]
    notes = ["in-run GEMM %.1f to %.1f GFLOP/s over %d runs, %d of them below 0.7x ours (its ratios withheld, "
             "experiments/lib/peer_rules.py)" % (min(g), max(g), len(g), len(low))] if g else []
    out += ["", "%s, batch %d per rank, %s (lr %g, constant), %d ranks, synthetic data, H=%d; %d untimed steps then "
                "%d timed (ours: its summary's whole periods after the first); repeats %s, alternating; median. "
                "Our GEMM %.1f GFLOP/s; torchft peer: %s. %s%s" % (
                    su["model"], su["batch"], su["optimizer"], su["lr"], su["ranks"], su["h"], su["warmup_steps"],
                    su["timed_steps"], ", ".join("%s %d" % kv for kv in (su.get("repeats_done") or {}).items())
                    or su["repeats"], su["our_gemm_gflops"], "; ".join(notes) or "-",
                    (d["note"] + " ") if d.get("note") else "", _prov(d)), ""]
    return "\n".join(out)


def _tf_recovery(r):
    """torchft's recovery, with all replicas again counted from after its first commit without the lost one (a
    sync in flight at the fault may commit with every replica; results files before this fix counted that one)."""
    v = dict(r.get("recovery") or {})
    commits, down_s = r.get("commits") or [], v.get("to_first_commit_without_lost_s")
    ranks = max((c[2] for c in commits), default=0)
    down = next((c for c in commits if c[3] and c[2] < ranks), None)
    if down and down_s is not None:
        back = next((c for c in commits if c[3] and c[2] == ranks and c[0] > down[0]), None)
        v["to_first_commit_with_all_again_s"] = round(back[0] - down[0] + down_s, 2) if back else None
    return v


def _faults_medians(runs, faults):
    """Per fault, each system's median goodput over the repeats, and its time to a full world again."""
    def full(r):
        if r["system"] == "ours":
            m = [float(x.group(1)) for _, _, dt in r.get("events", [])
                 for x in [re.search(r"full world again ([0-9.]+) s after the loss", dt)] if x]
            return m[0] if m else None
        return _tf_recovery(r).get("to_first_commit_with_all_again_s")

    out = ["| fault | ours: goodput, median (each repeat) | torchft: goodput, median (each repeat) | ours: full world "
           "again, from the step that found the loss, median | torchft: all replicas committing again, from the "
           "fault, median |", "|---|---|---|---|---|"]
    for f in faults:
        cells = []
        for system in ("ours", "torchft"):
            rs = [r for r in runs if r["system"] == system and (r["fault"] or "").startswith(f + " ")]
            g = [r["goodput"] for r in rs if r.get("goodput") is not None]
            cells.append("**%s** (%s)" % (_f(_median(g), "%.3f"), ", ".join("%.3f" % x for x in g)) if g else "-")
        for system in ("ours", "torchft"):
            t = [x for x in (full(r) for r in runs if r["system"] == system and (r["fault"] or "").startswith(f + " "))
                 if x is not None]
            cells.append("%s s" % _f(_median(t), "%.1f") if t else "-")
        out.append("| %s | %s |" % (f, " | ".join(cells)))
    return out


def render_torchft_faults(results, name="torchft_faults.json"):
    """experiments/torchft_faults.py: one kill and restart, ours (shrink + rejoin) against torchft's Manager."""
    d = _load(results, name)
    if not d:
        return _absent("the torchft fault comparison", "run `experiments/torchft_faults.py --out runs/torchft-faults "
                       "--results experiments/results/torchft_faults.json`")
    out = ["| system | fault | rc | wall s | samples in the model | goodput | final loss | recovery |",
           "|---|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        if r["system"] == "ours":
            rec = "; ".join("%s at step %d: %s%s" % (
                k, s, re.sub(r"^.*?\): ", "", dt).split(";")[0],
                "".join(", " + m.group(1) for m in re.finditer(r"(full world again [0-9.]+ s after the loss)", dt)))
                            for s, k, dt in r.get("events", [])) or "-"
        else:
            v = _tf_recovery(r)
            rec = "-" if not v else ("first sync without the lost replica %s s after the fault, with all again %s s "
                                     "after; syncs not committed: %d" % (
                                         _f(v.get("to_first_commit_without_lost_s"), "%.1f"),
                                         _f(v.get("to_first_commit_with_all_again_s"), "%.1f"),
                                         v.get("failed_commits", 0)))
        out.append("| %s | %s | %d | %.1f | %d | %s | %s | %s |" % (
            "ours" if r["system"] == "ours" else "torchft", r["fault"] or "none", r["rc"], r["wall_s"], r["samples"],
            _f(r.get("goodput"), "%.3f"), _f(r.get("final_loss"), "%.4f"), rec))
    su = d["set_up"]
    faults = su.get("faults", "kill").split(",")
    if su.get("repeats", 1) > 1:
        out += [""] + _faults_medians(d["runs"], faults)
    says = {"kill": "killed (SIGKILL, then started again)",
            "stop": "stopped (SIGSTOP for twice the collectives' timeout, then SIGCONT)",
            "partition": "cut off (its link down for %g s)" % su.get("partition_s", 0)}
    what = ", or ".join(says[f] for f in faults)
    out += ["", "%s, batch %d, %d ranks on %s, Local SGD H=%d, %d steps; %g s after the launch rank 1 is %s (one "
            "fault per run). %s" % (su["model"], su["batch"], su["ranks"], su["netem"], su["h"], su["steps"],
                                    su["kill_at"], what, _prov(d)), ""]
    return "\n".join(out)
