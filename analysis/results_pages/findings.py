"""README.md's findings: one bullet per study, each rendered from its results file."""
import os
import textwrap
from .common import _load, _rel
from .findings_cells import E2E_NOTE, PAPER_SPEEDUP, _absent_line, _best_e2e, _vs_e2e, _where
from .findings_runs import (_finding_delay, _finding_elastic, _finding_gpu, _finding_step_time, _finding_ties,
    _finding_wins)
from .findings_torchft import _finding_torchft
from .regime_map import _goal
from .sim_validation import _SUPERSEDED
from .simulator import _sim_rows_by


def _finding_sim(results):
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_validation_") and f.endswith(".json")
                   and f != "simulate_validation_bp_run.json" and not _SUPERSEDED.search(f))
    named = [(f[len("simulate_validation_"):-len(".json")], _load(results, f)) for f in files]
    named = [(c, d) for c, d in named if d]
    docs = [d for _, d in named]
    rows = [r for d in docs for r in d["rows"]]
    if not rows:
        return _absent_line("The simulator against measured runs", "simulator.md")
    ratios = [r["ratio"] for r in rows]
    by = {c: [r["ratio"] for r in d["rows"]] for c, d in named}  # the cell furthest off
    worst = max(by, key=lambda c: max(abs(x - 1) for x in by[c]))
    side = ("never slower than measured" if max(ratios) <= 1.005 else
            "faster than measured in %d of them" % sum(1 for x in ratios if x < 1))
    return ("**The simulator against measured runs.** Simulated / measured step time is %.2f–%.2fx over %d runs of "
            "%d regime-map cells, within 10%% in %d and within 15%% in %d; it is %s. Furthest off: the %s cell, %.2f–%.2fx "
            "([simulator](%s))." % (
                min(ratios), max(ratios), len(ratios), len(docs),
                sum(1 for x in ratios if abs(x - 1) <= 0.10), sum(1 for x in ratios if abs(x - 1) <= 0.15), side,
                worst, min(by[worst]), max(by[worst]), _rel("simulator.md")))


def _finding_paper(results):
    a = _load(results, "simulate_artifact.json")
    b = _load(results, "beyond_convergence.json")
    text = []
    if a:
        by = _sim_rows_by(a, lambda r: (r["profile"], r["world"], r["bandwidth"]))
        vs = []
        for (p, w, bw), row in by.items():
            dd, ls, ddp = row.get("dreamddp:h=10"), row.get("localsgd:k=10"), row.get("ddp")
            if dd and ls and ddp:
                vs.append("%s %.2fx Local SGD and %.1fx DDP" % (p, ls["simulated_s"] / dd["simulated_s"],
                                                              ddp["simulated_s"] / dd["simulated_s"]))
        text.append("**The paper's claims against this replication.** The paper reports %s over its baselines on "
                    "GPT-2. Simulated on the artifact's own profiles with GPT-2's bytes as ring all-reduces, dreamddp:h=10 runs at, "
                    "per profile: %s "
                    "([simulator](%s))." % (PAPER_SPEEDUP, "; ".join(vs), _rel("simulator.md")))
    else:
        text.append(_absent_line("The paper's claims against this replication", "simulator.md"))
    sch = _load(results, "schedule_solver.json")
    if sch:
        text.append("Under the paper's own time model the solver's schedule is %s Local SGD (%s), %s ([schedule](%s))." % (
            "–".join(dict.fromkeys("%.2fx" % (r["localsgd"] / r["dreamddp"]) for r in (
                min(sch["rows"], key=lambda r: r["localsgd"] / r["dreamddp"]),
                max(sch["rows"], key=lambda r: r["localsgd"] / r["dreamddp"])))),
            "proven optimal on every profile" if all(r["gap"] < 1e-9 for r in sch["rows"]) else "not all proven optimal",
            "and the authors' own schedule models within %.1f%% of it" % (100 * max(
                r["authors_modelled"] / r["dreamddp"] - 1 for r in sch["rows"] if r.get("authors_modelled"))),
            _rel("schedule.md")))
    ps = _load(results, "simulate_paper_scale.json")
    if ps:
        cells = {}
        for r in ps["rows"]:
            cells.setdefault((r["model"], r["bandwidth"], r["world"]), {})[r["policy"].split(":")[0]] = r["simulated_s"]
        n = max(w for (_, _, w) in cells)
        sp = [(c["localsgd"] / c["dreamddp"], c["plsgd"] / c["dreamddp"]) for (_, _, w), c in cells.items()
              if w == n and all(k in c for k in ("localsgd", "plsgd", "dreamddp"))]
        if sp:
            text.append("At the paper's scale, %d workers simulated from the artifact's GPT-2 and Llama-2 profiles at 1 "
                        "and 10 Gbit/s without latency, dreamddp:h=10 is %.2f–%.2fx Local SGD and %.2f–%.2fx PLSGD "
                        "([paper scale](%s))." % (n, min(x for x, _ in sp), max(x for x, _ in sp),
                                                  min(y for _, y in sp), max(y for _, y in sp),
                                                  _rel("paper-scale.md")))
    if b:
        r = next((r for r in b["runs"] if r["policy"] == "localsgd:k=32,outer=nesterov"), None)
        if r:
            text.append("DiLoCo's outer Nesterov step at H = 32: %+.2f points against plain averaging, on one seed "
                        "only, so not established here." % r["gap_to_baseline_points"])
    return " ".join(text)


def _finding_paper_models(results):
    docs = [d for d in (_load(results, n) for n in ("throughput_gpt2.json", "throughput_resnet50.json")) if d]
    cells = [(d["H"], c) for d in docs for c in d["cells"] if c["verdict"].get("dreamddp_vs_localsgd")]
    if not cells:
        return _absent_line("The paper's models on the emulated cluster", "regime-map.md")
    H = cells[0][0]
    ls = [c["verdict"]["dreamddp_vs_localsgd"] for _, c in cells]
    pl = [c["verdict"]["dreamddp_vs_plsgd"] for _, c in cells if c["verdict"].get("dreamddp_vs_plsgd")]
    best = max((c for _, c in cells), key=lambda c: c["verdict"]["dreamddp_vs_localsgd"])
    v = best["verdict"]
    met = [c for h, c in cells if _goal(c, h, c["verdict"]).startswith("**met**")]
    ct = best.get("contention") or {}
    dd, lsn, pln = "dreamddp:h=%d" % H, "localsgd:k=%d" % H, "plsgd:h=%d" % H
    els = [_vs_e2e(c, dd, lsn) for _, c in cells]
    epl = [_vs_e2e(c, dd, pln) for _, c in cells]
    e2e = all(els) and all(epl)
    text = "**The paper's models on the emulated cluster.** Over %d cells of %s on 2 ranks, dreamddp:h=%d runs at " % (
        len(cells), " and ".join(dict.fromkeys(c["model"] for _, c in cells)), H)
    if e2e:
        text += ("%.2f–%.2fx localsgd:k=%d and %.2f–%.2fx plsgd:h=%d %s (%.2f–%.2fx and %.2f–%.2fx in the "
                 "trainer's timed window, which leaves out the start). In the timed window its best cell is %s: %.2fx "
                 "Local SGD and %.2fx PLSGD (from launch to exit %.2fx and %.2fx), " % (
                     min(els), max(els), H, min(epl), max(epl), H,
                     E2E_NOTE.replace(", with the trainer's timed window in brackets", ""), min(ls), max(ls),
                     min(pl), max(pl), _where(best), v["dreamddp_vs_localsgd"], v["dreamddp_vs_plsgd"],
                     _vs_e2e(best, dd, lsn), _vs_e2e(best, dd, pln)))
    else:
        text += ("%.2f–%.2fx localsgd:k=%d and %.2f–%.2fx plsgd:h=%d in the trainer's timed window (it leaves out "
                 "the start). Its best cell is %s: %.2fx Local SGD and %.2fx PLSGD, " % (
                     min(ls), max(ls), H, min(pl), max(pl), H, _where(best), v["dreamddp_vs_localsgd"],
                     v["dreamddp_vs_plsgd"]))
    if met:
        text += "and the goal of 1.2x Local SGD with at least PLSGD's speed is met in %s." % (
            ", ".join(_where(c) for c in met))
    else:
        text += ("short of the goal of 1.2x Local SGD: a perfect overlap of all communication with backward would "
                 "give at most %.2fx there, and overlapped compute and communication slow each other by %+.0f%% and "
                 "%+.0f%% on these shared cores." % (v["overlap_bound_vs_localsgd"],
                                                    100 * ct.get("compute_slowdown", 0), 100 * ct.get("comm_slowdown", 0)))
    dl = [(c["verdict"]["best_delay_vs_localsgd"], c) for _, c in cells if c["verdict"].get("best_delay_vs_localsgd")]
    if dl:
        x, c = max(dl, key=lambda t: t[0])
        e = _vs_e2e(c, c["verdict"]["best_delay_config"], lsn)
        text += " A delayed merge reaches %.2fx Local SGD%s (%s at %s)." % (
            e if e else x, " from launch to exit (%.2fx in the timed window)" % x if e else " in the timed window",
            c["verdict"]["best_delay_config"], _where(c))
    selfp = [(d["H"], c) for d in (_load(results, n) for n in ("throughput_paper_e2e.json",
                                                              "throughput_paper_e2e_resnet50.json"))
             if d and d.get("dreamddp_profile") == "self" for c in d["cells"]]
    best_e2e = [(c, _best_e2e(c, h)) for h, c in selfp]
    if best_e2e and all(x for _, x in best_e2e):
        xs = [x for _, x in best_e2e]
        text += (" Timed as a user runs it, dreamddp profiling itself inside the launch and every run a whole number "
                 "of periods, dreamddp:h=%d runs at %.2f–%.2fx the better of localsgd:k=%d and plsgd:h=%d from launch "
                 "to exit over %d cells of %s (%s)." % (
                     selfp[0][0], min(xs), max(xs), selfp[0][0], selfp[0][0], len(xs),
                     " and ".join(dict.fromkeys(c["model"] for _, c in selfp)),
                     "; ".join("%s at %s: %.2fx" % (c["model"].split(":")[0], c["rate"], x) for c, x in best_e2e)))
    return text + _below_goal_again(results) + " ([regime map](%s#the-papers-models))" % _rel("regime-map.md")


def _below_goal_again(results):
    """' Measured again with N repeats, ...' from regime_below_goal.json: the cells that fell below the goal line."""
    d = _load(results, "regime_below_goal.json")
    xs = [(c, _best_e2e(c, d["H"])) for c in d["cells"]] if d else []
    if not xs or not all(x for _, x in xs):
        return ""
    return (" Measured again in one sitting with %d alternating repeats per policy, the cells below the goal line of "
            "0.98x read from launch to exit: %s." % (d["repeats"], "; ".join(
                "%s at %s, %d ranks: %.2fx" % (c["model"].split(":")[0], c["rate"], c["ranks"], x) for c, x in xs)))


def _finding_artifact(results):
    d = _load(results, "artifact.json")
    if not d:
        return _absent_line("The authors' artifact", "artifact.md")
    holds = d.get("per_hold") or []
    ratios = [h["ratio_of_medians"] for h in holds if h.get("ratio_of_medians")]
    loads = [x for h in holds for x in h.get("load_1m_range", [])]
    a = d["artifact"]
    text = ("**The authors' artifact.** Their PyTorch code (%s at %s) ran on the CPU with Gloo beside dreamddp:h=%s, "
            "resnet20 on 2 ranks of the emulated cluster, with %d local changes listed on its page." % (
                a["repository"], a["commit"][:7], d["setup"].get("H", 8), len(a.get("local_changes") or [])))
    if ratios:
        text += (" Ours had the higher median samples/s in %d of %d alternating comparisons (ratio of medians %.2f–%.2fx), but the "
                 "load average moved between %.1f and %.1f during them: not a figure to quote." % (
                     sum(r > 1 for r in ratios), len(ratios), min(ratios), max(ratios), min(loads), max(loads)))
    return text + (" Its GPT-2 path did not run: it needs packages and downloads from the Hugging Face hub. "
                   "([artifact](%s))" % _rel("artifact.md"))


def render_findings(results):
    """The README's bullets, wrapped at 116 characters so that no line of the README runs long."""
    return "\n".join(textwrap.fill(f(results), 116, initial_indent="* ", subsequent_indent="  ",
                                   break_on_hyphens=False, break_long_words=False)
                     for f in (_finding_step_time, _finding_ties, _finding_wins, _finding_paper_models,
                               _finding_delay, _finding_sim, _finding_paper, _finding_artifact, _finding_torchft,
                               _finding_elastic, _finding_gpu)) + "\n"
