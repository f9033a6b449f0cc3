#!/usr/bin/python3
"""Result tables and figures of speech rendered from experiments/results/*.json, so text cannot drift from data.

  render_results.py [--readme README.md] [--docs docs/results] [--results experiments/results]   rewrite sections
  render_results.py --check                                                   exit 1 if any section is stale

A section is the text between `<!-- results:NAME -->` and `<!-- /results:NAME -->` in README.md or in a page of
docs/results/; NAME picks the renderer below and the results file(s) it reads. `history_NAME` renders NAME from
records that lack part of their provenance (docs/results/history.md only).

A results file is rendered only when it records its provenance in full: a top-level "command" (string), a
"machine" object with "date" (UTC), "cpu", "cpu_flags", "cores", "load_1m", "load_1m_end", "commit" and
"tree_clean", and a top-level "peer" (object, or null without a peer). Every rendered table ends with that
provenance. A file without it is listed on the history page as an incomplete record, with what it lacks.

--check also refuses measurement-like numbers (decimals, percentages, ratios such as 1.5x, times and rates with
units) in the prose of those pages outside the rendered sections and outside code: a number a reader may quote
must come from a results file.
"""
import argparse
import json
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

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
    return "`%s` — %s; %s." % (scrub(d.get("command", "?")), _machine(d.get("machine") or {}), _peer(d))


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
def render_bench_step(results, names=("bench_step_t1.json", "bench_step_t2.json")):
    docs = [d for d in (_load(results, n) for n in names) if d]
    if not docs:
        return _absent("step time against the peer", "run `SAVE=experiments/results/%s "
                       "experiments/bench_step.sh`" % names[0])
    out = ["| model | threads | ours ms | torch ms | ours / torch | ours forward / backward / update ms | "
           "peer BLAS, GEMM GFLOP/s | note |", "|---|---|---|---|---|---|---|---|"]
    for d in docs:
        for r in d["results"]:
            b = r["ours_breakdown_ms"]
            p = r.get("peer", {})
            peer = "%s, %s" % (p.get("blas", "-").split(",")[-1].strip(), _f(p.get("gemm_gflops"), "%.1f"))
            note = ("" if r["peer_ok"] else "no ratio: " + r["peer_note"]) + (" noisy (load %.1f)" % r["max_load"]
                                                                              if r["noisy"] else "")
            out.append("| %s (batch %d) | %d | %.2f | %s | **%s** | %.1f / %.1f / %.1f | %s | %s |" % (
                r["model"], r["batch"], d["threads"], r["ours_step_ms"], _f(r["torch_step_ms"]), _f(r["ratio"]),
                b["forward"], b["backward"], b["update"], peer, note.strip()))
    out.append("")
    for d in docs:
        g = d["ours_gemm_gflops"]
        out.append("%d thread(s): our GEMM %.1f / %.1f GFLOP/s (start / end of the run). %s" % (
            d["threads"], g["start"], g["end"], _prov(d)))
        out.append("")
    return "\n".join(out)


def render_bench_step_ab(results, name="bench_step_gpt2_init.json"):
    """experiments/bench_step_ab.sh: two builds' step against their peers, alternating rounds in one sitting."""
    d = _load(results, name)
    if not d:
        return _absent("the before/after step time", "run `BEFORE_COMMIT=... BEFORE_BIN=... SAVE=experiments/results/"
                       "%s experiments/bench_step_ab.sh gpt2`" % name)
    out = ["| model | build | ours ms (best) | torch ms (best) | ours / torch | highest load | our rounds, ms | "
           "peer rounds, ms |", "|---|---|---|---|---|---|---|---|"]
    for row in d["summary"]:
        for which in ("before", "after"):
            b = row[which]
            ours = [v for run in d["rounds"] if run["build"] == which for x in run["results"]
                    if x["model"] == row["model"] for v in x["ours_runs_ms"]]
            peer = [v for run in d["rounds"] if run["build"] == which for x in run["results"]
                    if x["model"] == row["model"] for v in x["torch_runs_ms"] if v]
            ratio = ("**%.2f**" % b["ratio"] if b.get("ratio") is not None else
                     "%s (the peer rules withheld it)" % _f(b.get("ratio_unchecked")))
            out.append("| %s | %s (%s) | %.0f | %s | %s | %.1f | %s | %s |" % (
                row["model"], which, d["before_commit"] if which == "before" else d["machine"]["commit"],
                b["ours_step_ms"], _f(b["torch_step_ms"], "%.0f"), ratio, b["max_load"],
                ", ".join("%.0f" % v for v in ours), ", ".join("%.0f" % v for v in peer)))
    out += ["", "Ours after / before (best step of each): %s. %d rounds, alternating; our GEMM per round %s GFLOP/s "
                "(start / end). %s" % (
                    "; ".join("%s %.2fx" % (r["model"], r["ours_after_over_before"]) for r in d["summary"]),
                    len({r["round"] for r in d["rounds"]}),
                    ", ".join("%.0f/%.0f" % (r["ours_gemm_gflops"]["start"], r["ours_gemm_gflops"]["end"])
                              for r in d["rounds"]), _prov(d)), ""]
    return "\n".join(out)


def render_bench_step_stem(results, name="bench_step_stem.json"):
    """bench_step.sh resnet18 resnet18:stem=cifar: the table, then what the CIFAR stem costs on each side."""
    out = render_bench_step(results, (name,))
    d = _load(results, name)
    rows = {r["model"]: r for r in d["results"]} if d else {}
    for fam in ("resnet18", "resnet50"):
        i, c = rows.get(fam), rows.get(fam + ":stem=cifar")
        if i and c:
            peer = (_f(c["torch_step_ms"] / i["torch_step_ms"], "%.1fx") if c["torch_step_ms"] and i["torch_step_ms"]
                    else "-")
            out += ("\n%s step time, CIFAR stem over ImageNet stem: ours %.1fx, the peer %s (best runs).\n"
                    % (fam, c["ours_step_ms"] / i["ours_step_ms"], peer))
    return out


def _gpu_rounds(d):
    r = d.get("repeats", 1)
    return ("each side's median of %d alternating rounds (ours, then the peer)" % r if r > 1 else
            "each side once, ours first: not the alternating repeats the rules ask for")


def render_gpu_step(results, name="gpu_step.json"):
    d = _load(results, name)
    if not d:
        return _absent("a GPU step time", "run `tests/gpu/device_check.sh` on a machine with an NVIDIA GPU")
    out = ["| model (batch %d) | ours ms | torch ms | ours / torch |" % d["batch"], "|---|---|---|---|"]
    for r in d["results"]:
        out.append("| %s | %.3f | %s | %s |" % (r["model"], r["ours_ms"], _f(r.get("pytorch_ms"), "%.3f"),
                                               _f(r.get("ratio"), "%.2f")))
    gemm = d.get("ours_gemm_gflops"), d.get("peer_gemm_gflops")
    out += ["", "%s. FP32 GEMM (4096^3, no TF32): ours %s GFLOP/s, the peer's %s GFLOP/s (%s of ours). "
                "Median of %d CUDA-event-timed steps after %d warm-ups; %s. %s" % (
                    d["gpu"], _f(gemm[0], "%.0f"), _f(gemm[1], "%.0f"),
                    _f(gemm[1] / gemm[0] if gemm[0] and gemm[1] else None, "%.2fx"), d["iters"], d["warmup"],
                    _gpu_rounds(d), _prov(d)), ""]
    return "\n".join(out)


def render_backward_shares(results):
    d = _load(results, "backward_shares_gpt2.json")
    if not d:
        return _absent("GPT-2's backward shares", "run `analysis/fig_backward_shares.py --json ...`")
    out = ["| kind of layer | ours, share of backward | artifact (%s), share of backward |" %
           os.path.basename(d["artifact_profile"].rstrip("/")), "|---|---|---|"]
    for r in d["kinds"]:
        out.append("| %s | %.1f%% | %.1f%% |" % (r["kind"], 100 * r["ours"], 100 * r["artifact"]))
    big = max(d["layers"], key=lambda r: abs(r["ours"] - r["artifact"]))
    out += ["", "Backward per step: ours %.1f ms, the artifact's %.1f ms. The layer whose share differs most: %s "
                "(ours %.1f%%, the artifact's %.1f%%). ![shares](../figures/%s) %s" % (
                    1e3 * d["ours_backward_s"], 1e3 * d["artifact_backward_s"], big["layer"], 100 * big["ours"],
                    100 * big["artifact"], os.path.basename(d["figure"]), _prov(d)), ""]
    return "\n".join(out)


def render_peak_rss(results):
    d = _load(results, "peak_rss.json")
    if not d:
        return _absent("peak memory", "run `experiments/memory.py --results experiments/results/peak_rss.json`")
    pols = list(dict.fromkeys(r["policy"] for r in d["rows"]))
    out = ["| model (batch per rank) | parameters | " + " | ".join(pols) + " |", "|---|---|" + "---|" * len(pols)]
    for m in dict.fromkeys(r["model"] for r in d["rows"]):
        by = {r["policy"]: r for r in d["rows"] if r["model"] == m}
        ok = next((r for r in by.values() if "error" not in r), None)
        out.append("| %s (%s) | %s | %s |" % (
            m, ok["batch"] if ok else "-", "{:,}".format(ok["params"]) if ok else "-", " | ".join(
                ("%.0f MB" % by[p]["peak_rss_mb"] if "error" not in by[p] else "exit %d" % by[p]["exit"])
                if p in by else "-" for p in pols)))
    out += ["", "Peak resident memory of rank 0 over a %d-step run, %d ranks on this machine, one thread each, "
                "synthetic data. %s" % (d["steps"], d["ranks"], _prov(d)), ""]
    return "\n".join(out)


def render_regime(results, name="regime_map.json"):
    d = _load(results, name)
    if not d:
        return _absent(name[:-5].replace("_", " "), 'run `experiments/regime_map.sh --cells ... --results '
                       'experiments/results/%s`' % name)
    H = d["H"]
    delays = list(dict.fromkeys(r["config"] for c in d["cells"] for r in c["rows"] if ",delay=" in r["config"]
                                and r["system"] == "ours"))
    delayed = delays[0] if delays else None
    ran = {(r["system"], r["config"]) for c in d["cells"] for r in c["rows"] if r["samples_per_s"]}
    cols = [("ours", "ddp", "ours ddp"), ("torch", "ddp", "torch ddp"),
            ("ours", "localsgd:k=%d" % H, "ours localsgd"), ("torch", "localsgd:k=%d" % H, "torch localsgd"),
            ("ours", "plsgd:h=%d" % H, "ours plsgd"), ("ours", "dreamddp:h=%d" % H, "ours dreamddp"),
            ("ours", "dreamddp:h=%d,fillin=0" % H, "dreamddp fillin=0"), ("torch", "partial:h=%d" % H, "torch partial")]
    cols += [("ours", n, n) for n in delays]
    cols = [c for c in cols if c[:2] in ran]          # a configuration no cell ran gets no column
    fillin0 = ("ours", "dreamddp:h=%d,fillin=0" % H) in ran
    out = ["| cell | C/B | %s | **dreamddp / best baseline**%s |%s" % (
               " | ".join(c[2] for c in cols), " (fillin=0)" if fillin0 else "",
               (" best delay / localsgd |" if len(delays) > 1 else " delay / localsgd |") if delayed else ""),
           "|---|---|" + "---|" * (len(cols) + 1 + bool(delayed))]
    for c in d["cells"]:
        val = {(r["system"], r["config"]): r for r in c["rows"]}

        def cell(system, name):
            r = val.get((system, name))
            if not r or not r["samples_per_s"]:
                return "-"
            if system == "torch" and not r["peer_ok"]:
                return "(misconfigured)"
            runs = [x for x in r["samples_per_s_runs"] if x]
            spread = " (%s–%s)" % (_fmt_sps(min(runs)), _fmt_sps(max(runs))) if len(runs) > 1 else ""
            return "%s%s%s" % (_fmt_sps(r["samples_per_s"]), spread, " *noisy*" if r["noisy"] else "")
        v = c["verdict"]
        out.append("| %s, %d ranks, %s | %.2f | %s | **%s**%s |%s" % (
            c["model"], c["ranks"], c["rate"], c["comm_over_backward"], " | ".join(cell(*k[:2]) for k in cols),
            _f(v["dreamddp_vs_best_baseline"]), " (%s)" % _f(v["dreamddp_fillin0_vs_best_baseline"]) if fillin0
            else "", " %s |" % _f(v.get("best_delay_vs_localsgd") if len(delays) > 1 else
                                  v.get("dreamddp_delay_vs_localsgd")) if delayed else ""))
    e2e = [(c, _best_e2e(c, H)) for c in d["cells"]]
    if all(x for _, x in e2e):
        out += ["", "**From launch to exit** (each run's whole `dreamddp launch` command, as a user times it: "
                    "start-up, warm-up and exit included; dreamddp's separate `dreamddp profile` launch, which made "
                    "the cell's profile, is left out, as it was not timed), dreamddp:h=%d over the better of "
                    "localsgd:k=%d and plsgd:h=%d, with the timed window's ratio above in brackets: %s." % (
                        H, H, H, "; ".join("%s, %d ranks, %s: **%.2fx** [%.2fx]" % (
                            c["model"], c["ranks"], c["rate"], x, c["verdict"]["dreamddp_vs_best_baseline"])
                            for c, x in e2e))]
    else:
        out += ["", "The samples/s above are the trainer's timed window: it leaves out each run's start (start-up, "
                    "warm-up steps); this file recorded no launch-to-exit times."]
    names = [k[1] for k in cols if k[0] == "ours"]
    vs_partial = ["%s, %d ranks, %s: %s%s" % (
        c["model"], c["ranks"], c["rate"], _f(c["verdict"]["ours_dreamddp_vs_torch_partial"], "%.2fx"),
        " (dreamddp:h=%d ran these phases without fill-in)" % H if c["verdict"].get("dreamddp_fillin0_is_dreamddp")
        else "") for c in d["cells"] if c["verdict"].get("ours_dreamddp_vs_torch_partial")]
    if vs_partial:
        out += ["", "Our layer-wise schedule against the peer's `partial` on the same phases (samples/s, ours / "
                    "torch): " + "; ".join(vs_partial) + "."]
    out += ["", "Samples/s over all ranks, median of %d alternating repeats (range). Model check: the step time the "
                "schedule model predicts for each run's own profile (forward and update measured, backward + "
                "communication modelled) against the measured one:" % d["repeats"], "",
            "| cell | " + " | ".join(n for n in names) + " |", "|---|" + "---|" * len(names)]
    for c in d["cells"]:
        val = {(r["system"], r["config"]): r for r in c["rows"]}
        row = []
        for n in names:
            r = val.get(("ours", n))
            row.append("-" if not r or r.get("modelled_step_ms") is None else "%.1f / %.1f ms (%+.0f%%)" % (
                r["step_ms"], r["modelled_step_ms"], 100 * r["model_error"]))
        out.append("| %s, %d ranks, %s | %s |" % (c["model"], c["ranks"], c["rate"], " | ".join(row)))
    pa = d.get("peer_alone") or {}
    gemm = "Our GEMM %.1f GFLOP/s" % d["ours_gemm_gflops"]
    if d.get("ours_gemm_gflops_end") is not None:
        gemm += " at the start, %.1f at the end" % d["ours_gemm_gflops_end"]
    out += ["", "%s; the peer alone: %s, %s GFLOP/s, torch %s. %s" % (
        gemm, pa.get("blas", "-"), _f(pa.get("gemm_gflops"), "%.1f"), pa.get("peer", "-"), _prov(d)), ""]
    return "\n".join(out)


def _goal(c, H, v):
    """The paper models' goal in a cell (>= 1.2x localsgd:k=H and >= 1.0x plsgd:h=H), judged from launch to exit
    where the cell recorded it, else in the timed window (said so)."""
    ls, pl = _vs_e2e(c, "dreamddp:h=%d" % H, "localsgd:k=%d" % H), _vs_e2e(c, "dreamddp:h=%d" % H, "plsgd:h=%d" % H)
    if ls and pl:
        return "**met**" if ls >= 1.2 and pl >= 1.0 else "not met"
    return ("**met**" if v.get("goal_met") else "not met") + " (timed window)"


def render_goal(results, names=("throughput_gpt2.json", "throughput_resnet50.json")):
    """The paper models' goal line: dreamddp:h=H against Local SGD (>= 1.2x) and PLSGD (>= 1.0x) per cell, and the
    numbers that say why where it is not met: the most a perfect overlap gives over Local SGD on that cell, the
    largest layer's share of the communication, the contention the profile measured, the model's error."""
    docs = [d for d in (_load(results, n) for n in names) if d]
    if not docs:
        return _absent("the paper models on the emulated cluster", "run `experiments/regime_map.sh --cells "
                       "'gpt2:...:2:1gbit'` as docs/results/regime-map.md says")
    out = ["| cell | C/H vs B (ms) | dreamddp / localsgd | dreamddp / plsgd | launch to exit: dreamddp / localsgd, "
           "/ plsgd | goal | perfect overlap / localsgd | share of that gain realized | largest layer, share of C | "
           "contention: compute, comm | model error, ours |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in docs:
        H = d["H"]
        for c in d["cells"]:
            v = c["verdict"]
            t = v.get("bound_terms_ms") or {}
            big = c.get("largest_layer") or {}
            ct = c.get("contention") or {}
            errs = [r["model_error"] for r in c["rows"] if r["system"] == "ours" and r.get("model_error") is not None]
            sp, bound = v.get("dreamddp_vs_localsgd"), v.get("overlap_bound_vs_localsgd")
            realized = (sp - 1) / (bound - 1) if sp is not None and bound and bound > 1 else None
            dd, lsn, pln = "dreamddp:h=%d" % H, "localsgd:k=%d" % H, "plsgd:h=%d" % H
            out.append("| %s, %d ranks, %s | %s | %s | %s | %s, %s | %s | %s | %s | %s | %s | %s |" % (
                c["model"], c["ranks"], c["rate"],
                "%.3g vs %.3g" % (t["C_over_H"], t["B"]) if t else "-",
                _f(v.get("dreamddp_vs_localsgd")), _f(v.get("dreamddp_vs_plsgd")),
                _f(_vs_e2e(c, dd, lsn)), _f(_vs_e2e(c, dd, pln)),
                _goal(c, H, v),
                _f(bound), _f(realized and 100 * realized, "%.0f%%") if realized is not None else "-",
                "%s, %.0f%%" % (big["name"], 100 * big["share_of_C"]) if big else "-",
                "%s, %s" % (_f(ct.get("compute_slowdown") and 100 * ct["compute_slowdown"], "%+.0f%%"),
                            _f(ct.get("comm_slowdown") and 100 * ct["comm_slowdown"], "%+.0f%%")) if ct else "-",
                "%+.0f%% to %+.0f%%" % (100 * min(errs), 100 * max(errs)) if errs else "-"))
    errs_all, shares = [], []
    for d in docs:
        for c in d["cells"]:
            v = c["verdict"]
            errs_all += [r["model_error"] for r in c["rows"] if r["system"] == "ours" and r.get("model_error") is not None]
            sp, bound = v.get("dreamddp_vs_localsgd"), v.get("overlap_bound_vs_localsgd")
            if sp is not None and bound and bound > 1:
                shares.append(((sp - 1) / (bound - 1), "%s, %d ranks, %s" % (c["model"], c["ranks"], c["rate"])))
    if errs_all:
        worst = max(abs(e) for e in errs_all)
        out += ["", "The modelled step is within %.0f%% of the measured one in every run of these cells (%s)." % (
            100 * worst, "within the goal's 10%" if worst <= 0.10 else "**outside the goal's 10%**")]
    if shares:
        met = [s for s in shares if s[0] >= 0.75]
        out += ["dreamddp:h=%d realized %.0f%% to %.0f%% of the gain over Local SGD a perfect overlap allows, against "
                "a goal of 75%%: %s." % (H, 100 * min(s[0] for s in shares), 100 * max(s[0] for s in shares),
                                         "met in %d of %d cells" % (len(met), len(shares)) if met else
                                         "met in none of the %d cells" % len(shares))]
    out += ["", "Goal: dreamddp:h=%d at least 1.2x localsgd:k=%d and at least 1.0x plsgd:h=%d in one cell from "
                "launch to exit (the *goal* column; the timed window where a cell recorded no launch-to-exit "
                "times), the modelled step within 10%% of the measured one in every cell. *Perfect overlap / localsgd* is "
                "(F + B + U + C/H) / (F + max(B, C/H) + U): Local SGD's step, its whole-model average amortized over "
                "H steps, against a step whose communication hides entirely behind backward (F and U measured in "
                "the Local SGD runs, B and C from the cell's profile); no schedule can beat it. *Share of that gain "
                "realized*: (dreamddp / localsgd - 1) / (perfect overlap / localsgd - 1); the goal for it is 75%%, "
                "and a negative share means dreamddp ran slower than Local SGD. Contention: how much "
                "longer compute and communication take while they overlap, from the cell's profile "
                "(`overlap.json`)." % (H, H, H), ""]
    return "\n".join(out)


def render_demo(results):
    d = _load(results, "demo.json")
    if not d:
        return _absent('the demo', 'run `DEMO_RESULTS=experiments/results/demo.json make demo`')
    e2e = all("samples_per_s_end_to_end" in r for r in d["rows"])
    key = "samples_per_s_end_to_end" if e2e else "samples_per_s"
    ddp = next(r for r in d["rows"] if r["policy"] == "ddp")[key]
    if e2e:
        out = ["| policy | launch to exit | samples/s | vs ddp | timed window | samples/s in it | exposed comm | "
               "MB sent/rank | test accuracy |", "|---|---|---|---|---|---|---|---|---|"]
    else:
        out = ["| policy | samples/s (timed window) | vs ddp | exposed comm | MB sent/rank | test accuracy |",
               "|---|---|---|---|---|---|"]
    for r in d["rows"]:
        acc = "-" if r["test_accuracy"] is None else "%.2f%%" % (100 * r["test_accuracy"])
        if e2e:
            a, b = r["timed_steps"]
            out.append("| %s | %.2f s | %.0f | %.2fx | steps %d-%d | %.0f | %.1f%% | %.0f | %s |" % (
                r["policy"], r["launch_to_exit_s"], r[key], r[key] / ddp, a, b - 1, r["samples_per_s"],
                100 * r["exposed"], r["mb_per_rank"], acc))
        else:
            out.append("| %s | %.0f | %.2fx | %.1f%% | %.0f | %s |" % (
                r["policy"], r["samples_per_s"], r["samples_per_s"] / ddp, 100 * r["exposed"], r["mb_per_rank"], acc))
    if e2e:
        out += ["", "Launch to exit: the whole `dreamddp launch` command, as a user times it (start-up, evaluations "
                    "and exit included); the timed window is the trainer's samples/s over the steps shown, which "
                    "leaves out the steps before them (warm-up, and for dreamddp its profiling and trial steps) and "
                    "the evaluations.", "",
                "dreamddp:h=8 from launch to exit: **%.2fx DDP, %.2fx the better of Local SGD and PLSGD (%s): it %s "
                "against its own baselines** here (in the timed window alone: %.2fx). %d ranks, network %s, %d steps "
                "per policy. %s" % (d["dreamddp_vs_ddp"], d["dreamddp_vs_best_baseline"], d["best_baseline"],
                                    d["verdict"], d["dreamddp_vs_best_baseline_timed_window"], d["ranks"],
                                    d["network"], d["steps"], _prov(d)), ""]
    else:
        out += ["", "dreamddp:h=8 in the timed window (it leaves out the start: warm-up, profiling and trial steps; "
                    "launch to exit was not recorded): %.2fx DDP, %.2fx the better of Local SGD and PLSGD (%s): it "
                    "%s against its own baselines here. %d ranks, network %s, %d steps per policy. %s" % (
                        d["dreamddp_vs_ddp"], d["dreamddp_vs_best_baseline"], d["best_baseline"], d["verdict"],
                        d["ranks"], d["network"], d["steps"], _prov(d)), ""]
    return "\n".join(out)


def render_ops(results):
    d = _load(results, "ops_vs_torch.json")
    if not d:
        return _absent('per-op times', 'run `experiments/bench_ops_vs_torch.sh`')
    out = ["| op (our shapes, %d thread) | ours ms | torch ms | ours / torch |" % d["threads"], "|---|---|---|---|"]
    for r in d["rows"]:
        out.append("| %s | %.3f | %.3f | %s |" % (r["op"], r["ours_ms"], r["torch_ms"],
                                                 ("**%.2f**" if r["ratio"] > 1 else "%.2f") % r["ratio"]))
    flags = "/".join(f for f in ("avx2", "avx512f") if d.get(f))
    out += ["", "**Not a valid comparison**: the peer's GEMM ran at %.3fx ours (%.1f against %.1f GFLOP/s, "
                "64x1024x1024), ours and the peer ran one after the other instead of alternating, at a load of %s on "
                "%d cores, and no commit was recorded. `%s` — %s, %s (%s); torch %s on %s." % (
                    d["torch_gemm_gflops"] / d["ours_gemm_gflops"], d["torch_gemm_gflops"], d["ours_gemm_gflops"],
                    d["loadavg_start"].split()[0], d["nproc"], scrub(d["command"]), d["date"], d["cpu_model"], flags,
                    d["torch"], os.path.basename(d["torch_blas"][-1]) if d["torch_blas"] else "?"), ""]
    return "\n".join(out)


def render_json_table(results, name):
    """Fallback for results files that carry a ready `markdown` field (e.g. ops_vs_torch.json, simulate_*.json)."""
    d = _load(results, name + ".json")
    if not d:
        return _absent("results file %s.json" % name, "see its script")
    md = d.get("markdown")
    if not md:
        return "_%s.json has no markdown table._\n" % name
    return md.rstrip() + "\n"


def render_topk_compression(results, name="topk_compression.json"):
    """experiments/topk_compression.py: its table and verdict lines, then the provenance."""
    d = _load(results, name)
    if not d:
        return _absent("compress=topk against int8", "run `experiments/topk_compression.py --results " +
                       "experiments/results/%s`" % name)
    return d["markdown"].rstrip() + "\n\n" + _prov(d) + "\n"


def _render_beyond_convergence(results, name, what):
    d = _load(results, name + ".json")
    if not d:
        return _absent(what, "see experiments/beyond_results.py")
    out = ["| policy | samples | samples/s | test loss | loss vs ddp | test accuracy | vs ddp (points) | MB sent/rank | "
           "vs its plain twin |", "|---|---|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        twin = ""
        if r.get("baseline"):
            twin = "%s: %s bytes, %+.2f points" % (r["baseline"], _f(r.get("bytes_vs_baseline"), "%.2fx"),
                                                   r["gap_to_baseline_points"])
        out.append("| %s | %d | %.0f | %.4f | %s | %.2f%% | %s | %.0f | %s |" % (
            r["policy"], r["samples"], r["samples_per_s"], r["test_loss"],
            "-" if r.get("loss_vs_ddp") is None else "%+.1f%%" % (100 * r["loss_vs_ddp"]), 100 * r["test_accuracy"],
            _f(r.get("gap_to_ddp_points"), "%+.2f"), r["comm_mb"], twin))
    log = d.get("run_log", [])
    out += ["", "%s. Network %s; runs: %s. One seed per policy. samples/s come from a loaded machine (other builds "
                "beside the runs): for speed, read the throughput pages. %s" % (
                    "; ".join(dict.fromkeys(x for x in log if x.startswith("setup:"))), d["network"],
                    scrub("; ".join(dict.fromkeys(x.replace("git: ", "") for x in log if x.startswith("git:")))),
                    _prov(d)), ""]
    return "\n".join(out)


def render_beyond_convergence(results):
    return _render_beyond_convergence(results, "beyond_convergence", "cnn convergence")


def render_beyond_gpt(results):
    return _render_beyond_convergence(results, "beyond_gpt", "gpt-mini loss")


def render_beyond_seeds(results, name="beyond_convergence_seeds.json"):
    d = _load(results, name)
    if not d:
        return _absent("multi-seed convergence", "see experiments/beyond_results.py seeds")
    seeds = d["seeds"]
    out = ["| policy | %s | mean | vs ddp, mean of seeds (points) | per seed, worst / best | MB sent/rank |" % " | ".join(
        "seed %d" % s for s in seeds), "|" + "---|" * (len(seeds) + 5)]
    for r in d["rows"]:
        if len(r["seeds"]) < len(seeds):
            continue  # a policy some seeds did not run: its single runs are in the tables above
        out.append("| %s | %s | %.2f%% | %s | %+.2f / %+.2f | %.0f |" % (
            r["policy"], " | ".join("%.2f%%" % (100 * r["accuracy"][str(s)]) for s in seeds),
            100 * r["mean_accuracy"], ("**%+.2f**" % r["mean_gap_points"]) if r["policy"] != "ddp" else "+0.00",
            r["min_gap_points"], r["max_gap_points"], r["comm_mb"]))
    n = d.get("samples", 128000)   # files written before the count was recorded: 1000 steps x 32 x 4 ranks
    out += ["", "Final test accuracy (first 5000 test images) after the same %s samples; each seed's gap is to the "
                % ("{:,}".format(n) if n else "(differing)") +
                "ddp run of the same seed (same initialisation and data order); policies run on every seed. "
                "%s" % _prov(d), ""]
    return "\n".join(out)


def render_beyond_throughput(results, name="beyond_throughput.json"):
    d = _load(results, name)
    if not d:
        return _absent('throughput with the merge keys', 'run `experiments/regime_map.sh --configs ...`')
    H = d["H"]
    names = []
    for c in d["cells"]:
        for r in c["rows"]:
            if r["system"] == "ours" and r["config"] not in names:
                names.append(r["config"])
    out = ["| cell | C/B | " + " | ".join(names) + " | best delay / localsgd | compressed / localsgd |",
           "|---|---|" + "---|" * (len(names) + 2)]
    for c in d["cells"]:
        val = {r["config"]: r for r in c["rows"] if r["system"] == "ours"}
        cells = []
        for n in names:
            r = val.get(n)
            if not r or not r["samples_per_s"]:
                cells.append("-")
                continue
            mod = "" if r.get("modelled_step_ms") is None else ", model %+.0f%%" % (100 * r["model_error"])
            cells.append("%.0f%s%s" % (r["samples_per_s"], mod, " *noisy*" if r["noisy"] else ""))
        v = c["verdict"]
        out.append("| %s, %d ranks, %s | %.2f | %s | **%s** (%s) | %s (%s) |" % (
            c["model"], c["ranks"], c["rate"], c["comm_over_backward"], " | ".join(cells),
            _f(v.get("best_delay_vs_localsgd")), v.get("best_delay_config") or "-",
            _f(v.get("best_compressed_vs_localsgd")), v.get("best_compressed_config") or "-"))
    out += ["", "Samples/s over all ranks, median of %d alternating repeats; \"model\" is the schedule model's step "
                "time for the run's own profile against the measured one (compression: the codec's bytes, not its "
                "CPU). %s%s" % (
                    d["repeats"], _prov(d),
                    "" if "remodelled" not in d else
                    " Model column re-derived from the same runs' folders %s, commit %s "
                    "(`experiments/regime_map.py --remodel %s`; nothing re-measured)." % (
                        d["remodelled"]["date"], d["remodelled"]["commit"], "experiments/results/" + name)), ""]
    return "\n".join(out)


def _ours_against_baselines(c, names):
    """A cell's rows of ours by config, the samples/s of `names` (the first two are the baselines), the formatted
    cells and a ratio-to-best-baseline formatter."""
    val = {r["config"]: r for r in c["rows"] if r["system"] == "ours"}
    sps = {n: (val[n]["samples_per_s"] if n in val else None) for n in names}
    best = max(x for x in (sps[names[0]], sps[names[1]]) if x)
    cells = ["-" if sps[n] is None else "%.0f%s" % (sps[n], " *noisy*" if val[n].get("noisy") else "") for n in names]
    return val, sps, cells, (lambda x: "-" if x is None else "%.2f" % (x / best))


def render_fillin_rule(results):
    d = _load(results, "regime_fillin.json")
    if not d:
        return _absent('the fill-in rule', 'run `experiments/regime_map.sh --configs ...`')
    names = ["localsgd:k=%d" % d["H"], "plsgd:h=%d" % d["H"], "dreamddp:h=%d" % d["H"], "dreamddp:h=%d,fillin=0" % d["H"]]
    out = ["| cell | C/B | " + " | ".join(names) + " | **dreamddp / best baseline** | fillin=0 / best baseline |",
           "|---|---|" + "---|" * (len(names) + 2)]
    for c in d["cells"]:
        val, sps, cells, ratio = _ours_against_baselines(c, names)
        out.append("| %s, %d ranks, %s | %.2f | %s | **%s** | %s |" % (
            c["model"], c["ranks"], c["rate"], c["comm_over_backward"], " | ".join(cells), ratio(sps[names[2]]),
            ratio(sps[names[3]])))
    out += ["", "Samples/s over all ranks, median of %d alternating repeats. %s" % (d["repeats"], _prov(d)), ""]
    return "\n".join(out)


def render_contention(results, name="regime_contention.json"):
    d = _load(results, name)
    if not d:
        return _absent('contention', 'run `experiments/regime_map.sh --configs ...`')
    H = d["H"]
    names = ["localsgd:k=%d" % H, "plsgd:h=%d" % H, "dreamddp:h=%d" % H, "dreamddp:h=%d,fallback=0" % H]
    out = ["| cell | C/B | contention (compute, comm) | " + " | ".join(names) +
           " | **dreamddp / best baseline** | fallback=0 / best baseline | dreamddp ran | dreamddp modelled / measured |",
           "|---|---|---|" + "---|" * (len(names) + 4)]
    for c in d["cells"]:
        val, sps, cells, ratio = _ours_against_baselines(c, names)
        k = c.get("contention") or {}
        dd = val.get(names[2], {})
        mod = ("%.1f / %.1f ms (%+.0f%%)" % (dd["modelled_step_ms"], dd["step_ms"], 100 * dd["model_error"])
               if "modelled_step_ms" in dd else "-")
        out.append("| %s, %d ranks, %s | %.2f | x%.2f, x%.2f | %s | **%s** | %s | %s | %s |" % (
            c["model"], c["ranks"], c["rate"], c["comm_over_backward"], 1 + k.get("compute_slowdown", 0),
            1 + k.get("comm_slowdown", 0), " | ".join(cells), ratio(sps[names[2]]), ratio(sps[names[3]]),
            ", ".join(dd.get("ran", ["-"])), mod))
    out += ["", "Samples/s over all ranks, median of %d alternating repeats. %s" % (d["repeats"], _prov(d)), ""]
    return "\n".join(out)


def _median(xs):
    xs = sorted(xs)
    return None if not xs else xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def render_chaos(results, name="chaos.json"):
    d = _load(results, name)
    if not d:
        return _absent("the chaos study", "run `experiments/chaos.py`")
    u = d["set_up"]
    how = {"none": "no fault", "rejoin": "shrink, then the lost rank rejoins",
           "restart": "restart all from the newest checkpoint (every %d steps)" % u["checkpoint_every"],
           "exit": "exit 3 at the first loss (the default)"}
    out = ["| model | policy | fault | handling | faults | rc | wall | samples in the final model | **goodput** | "
           "test accuracy | per loss: detect, agree, rebuild (median) | per rejoin: admit (median) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        shr = [x for x in r["recoveries"] if "detect_s" in x]
        adm = [x["admit_s"] for x in r["recoveries"] if "admit_s" in x]
        per = ("%d: %s, %s, %s s" % (len(shr), _f(_median([x["detect_s"] for x in shr]), "%.1f"),
                                     _f(_median([x["agree_s"] for x in shr]), "%.1f"),
                                     _f(_median([x["rebuild_s"] for x in shr]), "%.2f")) if shr else "-")
        if r["mode"] == "restart":
            per = "%d restarts" % r["restarts"]
        handling = how[r["mode"]] + (" (did not finish)" if r["rc"] != 0 and r["mode"] != "exit" else "")
        share = 100.0 * r["samples"] / (r["steps"] * u["ranks"] * u["batch"])
        if r["mode"] == "exit":  # the job is over: what its last checkpoint holds, of what was asked
            good = "ended; %.0f%% of the samples" % share
        elif r["rc"] != 0:  # a run that did not finish the requested steps has earned no goodput
            good = "did not finish; %.0f%% of the samples" % share
        else:
            good = _f(r.get("goodput"))
        out.append("| %s | %s | %s | %s | %d | %d | %.0f s | %d | **%s** | %s | %s | %s |" % (
            "%s, %d steps" % (r["model"], r["steps"]), r["policy"], r["fault"] or "-", handling, len(r["faults"]),
            r["rc"], r["wall_s"], r["samples"], good, _f(r["accuracy"] * 100 if r["accuracy"] is not None else None, "%.2f%%"), per,
            "%d: %.2f s" % (len(adm), _median(adm)) if adm else "-"))
    out += ["", ("%s, %d ranks, batch %d per rank, `launch --netem %s`, `--timeout %g`; a fault every "
                 "%g s from the launch, on a rank drawn from 1..%d (seed %d); SIGSTOP for twice the timeout. "
                 "Goodput: samples in the final model per second of wall time (launch to exit), over the "
                 "fault-free run's, for runs that finished every requested step; a run that ended short shows the "
                 "share of the requested samples it delivered instead. %s") % (u["data"], u["ranks"], u["batch"], u["netem"],
                                           u["timeout"], u["every"], u["ranks"] - 1, u["seed"], _prov(d)), ""]
    return "\n".join(out)


def render_shrink_overhead(results, name="shrink_overhead.json"):
    d = _load(results, name)
    if not d:
        return _absent("the fault-free cost of shrink", "run `experiments/chaos.py --overhead N`")
    u = d["set_up"]
    out = ["| policy | `--on-peer-loss exit` (samples/s) | `--on-peer-loss shrink` (samples/s) | **shrink / exit** "
           "| pairs (min-max) |", "|---|---|---|---|---|"]
    for policy in dict.fromkeys(r["policy"] for r in d["runs"]):
        runs = [r for r in d["runs"] if r["policy"] == policy]
        ex = _median([r["samples_per_s"] for r in runs if r["mode"] == "exit"])
        sh = _median([r["samples_per_s"] for r in runs if r["mode"] == "shrink"])
        by = {}
        for r in runs:
            by.setdefault(r["repeat"], {})[r["mode"]] = r["samples_per_s"]
        pairs = [p["shrink"] / p["exit"] for p in by.values() if "shrink" in p and "exit" in p]
        out.append("| %s | %.0f | %.0f | **%.3f** | %.3f-%.3f |" % (policy, ex, sh, sh / ex, min(pairs), max(pairs)))
    out += ["", ("%s, %d steps, %d ranks, batch %d per rank, `launch --netem %s`, no fault; median of %d alternating "
                 "repeats (timed steps). %s") % (u["model"], u["steps"], u["ranks"], u["batch"], u["netem"],
                                                 u["repeats"], _prov(d)), ""]
    return "\n".join(out)


def render_compare_builds(results):
    d = _load(results, "compare_builds.json")
    if not d:
        return _absent('two builds side by side', 'run `experiments/compare_builds.sh`')
    out = ["| what | config | base (%s) | new (%s) | speed new/base |" % (d.get("base_commit") or "base",
                                                                   d.get("new_commit") or "new"),
           "|---|---|---|---|---|"]
    for r in d["rows"]:
        what = "step ms, 1 process" if r["kind"] == "step" else "samples/s, 4 ranks, %s" % d["net"]
        out.append("| %s | %s | %.2f | %.2f | %.3f |" % (what, r["config"], r["best_base"], r["best_new"],
                                                        r["speed_ratio"]))
    spread = max(max(r[k]) / min(r[k]) - 1 for r in d["rows"] for k in ("base", "new"))
    out += ["", "Best of %d alternating repetitions per side (lower step time / higher samples/s); the repetitions of "
                "one side differ by up to %.1f%%%s. %s" % (
                    len(d["rows"][0]["base"]), 100 * spread,
                    "; noisy: load %.2f before a run on %d cores" % (d["load_max"], d["cores"]) if d.get("noisy")
                    else "", _prov(d)), ""]
    return "\n".join(out)


# NAME.DATE.json, or NAME.DATEb.json for a second file superseded on one day
_SUPERSEDED = re.compile(r"\.\d{4}-\d{2}-\d{2}[a-z]?\.json$")


def render_sim_validation(results):
    """Every `experiments/sim_validate.sh --json` file of a regime-map cell: simulated over measured step time per
    run, by policy (the profile's path in a dreamddp spec dropped), and the spread over all of them."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_validation_") and f.endswith(".json")
                   and f != "simulate_validation_bp_run.json"  # --bp run on a /tmp profile: its own paragraph
                   and not _SUPERSEDED.search(f))  # NAME.DATE.json: superseded, on the history page
    if not files:
        return _absent('validation of the simulator', 'run `experiments/sim_validate.sh --json ...`')
    docs = [(f[len("simulate_validation_"):-len(".json")], _load(results, f)) for f in files]
    docs = [(c, d) for c, d in docs if d]
    if not docs:
        return _absent("the simulator against measured runs", "run `experiments/sim_validate.sh --json ...`")
    provs = ["%s: simulated by %s" % (c, _prov(d)) + (" Its runs: `%s` — %s." % (
        scrub(d["measured_by"]["command"]), _machine(d["measured_by"]["machine"])) if d.get("measured_by") else "")
             for c, d in docs]
    docs = [(c, d["rows"]) for c, d in docs]
    short = lambda p: ",".join(x for x in p.split(",") if not x.startswith("profile="))
    names = []
    for _, rows in docs:
        for r in rows:
            if short(r["policy"]) not in names:
                names.append(short(r["policy"]))
    out = ["| cell (runs) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    ratios = []
    for cell, rows in docs:
        by = {}
        for r in rows:
            by.setdefault(short(r["policy"]), []).append(r["ratio"])
            ratios.append(r["ratio"])
        out.append("| %s | %s |" % (cell, " | ".join(" / ".join("%.2f" % x for x in by[n]) if n in by else "-"
                                                     for n in names)))
    inside = sum(1 for x in ratios if abs(x - 1) <= 0.10)
    out += ["", "Simulated / measured step time, one entry per measured run (%d runs in %d files, %.2f–%.2fx; within "
                "10%% in %d). `experiments/sim_validate.sh --profile CELL/profile --json "
                "experiments/results/simulate_validation_CELL.json RUN...` on the cell's own profile; a file's "
                "runs and simulator are of one day." % (
                    len(ratios), len(docs), min(ratios), max(ratios), inside), ""]
    out += ["* " + p for p in provs] + [""]
    return "\n".join(out)




def _runs_glob(cmd):
    """A command whose trailing run directories (DIR/NAME.rK ...) are folded into DIR/* and their count."""
    def fold(m):
        dirs = m.group(0).split()
        return " %s/* (%d runs)" % (os.path.dirname(dirs[0]), len(dirs))
    return re.sub(r"(?:\s+\S+/ours-\S+\.r\d+)+", fold, cmd)


def render_sim_charge(results):
    """The contention charge, with and without: each `simulate_charge_CELL.json` (`sim_validate.sh --json`, which
    simulates every run from the cell's profile with its overlap.json and without it), by policy's median run."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_charge_") and f.endswith(".json")
                   and not _SUPERSEDED.search(f))
    docs = [(f[len("simulate_charge_"):-len(".json")], _load(results, f)) for f in files]
    docs = [(c, d) for c, d in docs if d and d.get("rows")]
    if not docs:
        return _absent("the simulator with and without the contention charge",
                       "run `experiments/sim_validate.sh --json experiments/results/simulate_charge_CELL.json ...`")
    short = lambda p: ",".join(x for x in p.split(",") if not x.startswith("profile="))
    out = ["| cell | contention: compute, comm | policy | runs | measured ms, median run (range) | simulated ms, "
           "charged / not | simulated / median run, charged | not charged |", "|---|---|---|---|---|---|---|---|"]
    w, wo, provs = [], [], []
    for cell, d in docs:
        by = {}
        for r in d["rows"]:
            by.setdefault(short(r["policy"]), []).append(r)
        ct = d["rows"][0].get("contention") or {}
        for pol, rows in by.items():
            rows = sorted(rows, key=lambda r: r["measured_step_ms"])
            mid = rows[(len(rows) - 1) // 2: len(rows) // 2 + 1]
            avg = lambda k: sum(r[k] for r in mid) / len(mid)
            a, b = avg("ratio"), avg("ratio_no_contention")
            w.append(a)
            wo.append(b)
            out.append("| %s | %s | %s | %d | %.1f (%.1f–%.1f) | %.1f / %.1f | %s | %s |" % (
                cell, "x%.2f, x%.2f" % (1 + ct.get("compute_slowdown", 0), 1 + ct.get("comm_slowdown", 0)) if ct
                else "none", pol, len(rows), avg("measured_step_ms"), rows[0]["measured_step_ms"],
                rows[-1]["measured_step_ms"], avg("simulated_step_ms"), avg("simulated_step_ms_no_contention"),
                ("%.2f" if abs(a - 1) <= 0.10 else "**%.2f**") % a, ("%.2f" if abs(b - 1) <= 0.10 else "**%.2f**") % b))
        provs.append("%s: simulated by %s" % (cell, _prov(dict(d, command=_runs_glob(d.get("command", "?")))))
                     + (" Its runs: `%s` — %s." % (scrub(d["measured_by"]["command"]),
                                                    _machine(d["measured_by"]["machine"])) if d.get("measured_by")
                        else ""))
    n5 = lambda xs: sum(1 for x in xs if abs(x - 1) <= 0.05)
    n10 = lambda xs: sum(1 for x in xs if abs(x - 1) <= 0.10)
    out += ["", "Median run of each cell and policy against its simulation from the cell's own profile, with the "
                "profile's contention charged and without it (bold: outside 10%%). Charged: %d of %d within 10%%, %d "
                "within 5%%, mean |error| %.1f%%; not charged: %d within 10%%, %d within 5%%, mean |error| %.1f%%. "
                "The charge moves a median run's simulation by at most %.1f%%." % (
                    n10(w), len(w), n5(w), 100 * sum(abs(x - 1) for x in w) / len(w), n10(wo), n5(wo),
                    100 * sum(abs(x - 1) for x in wo) / len(wo),
                    100 * max(abs(x / y - 1) for x, y in zip(w, wo))), ""]
    out += ["* " + p for p in provs] + [""]
    return "\n".join(out)


# The paper's models: their validation files are simulate_validation_CELL.json whose runs are of these models, and
# beside each, from the same runs with their own compute (`--bp run --step run`), simulate_runcompute_CELL.json.
PAPER_MODELS = ("gpt2", "resnet50")


def _median_run(rows):
    """The median run of one policy's runs by measured step time (the mean of the middle two for an even count):
    (measured ms, simulated ms, simulated / measured, that run's mean compute per step, the compute simulated,
    measured and simulated exposed communication in percent of the step)."""
    rows = sorted(rows, key=lambda r: r["measured_step_ms"])
    mid = rows[(len(rows) - 1) // 2: len(rows) // 2 + 1]
    avg = lambda k: sum(r[k] for r in mid) / len(mid) if all(r.get(k) is not None for r in mid) else None
    pct = lambda k: 100 * avg(k) if avg(k) is not None else None
    return (avg("measured_step_ms"), avg("simulated_step_ms"), avg("ratio"), avg("run_compute_ms_mean"),
            avg("sim_compute_ms"), pct("measured_exposed_comm_fraction"), pct("simulated_exposed_comm_fraction"))


def render_sim_validation_paper(results):
    """The paper's models against the simulator: each cell and policy's median run, simulated from the cell's own
    profile and, from the same runs, with the runs' own forward, backward and update."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_validation_") and f.endswith(".json")
                   and not _SUPERSEDED.search(f))
    docs = []
    for f in files:
        d = _load(results, f)
        if d and d["rows"] and str(d["rows"][0].get("model", "")).split(":")[0] in PAPER_MODELS:
            cell = f[len("simulate_validation_"):-len(".json")]
            docs.append((cell, d, _load(results, "simulate_runcompute_%s.json" % cell)))
    if not docs:
        return _absent("the simulator on the paper's models",
                       "run `experiments/sim_validate.sh --json experiments/results/simulate_validation_CELL.json` "
                       "on a gpt2 or resnet50 cell")
    short = lambda p: ",".join(x for x in p.split(",") if not x.startswith("profile="))
    out = ["| cell | policy | runs | measured ms, median run (range) | simulated ms | simulated / median run | "
           "without the contention charge | with the runs' own compute | compute per step: median run / simulated | "
           "exposed comm: median run, simulated |", "|---|---|---|---|---|---|---|---|---|---|"]
    met, pairs, provs, quiet, slowed = 0, 0, [], [], []
    for cell, d, rc in docs:
        for r in d["rows"]:
            if r.get("run_compute_ms_mean") and r.get("sim_compute_ms"):
                (quiet if r["run_compute_ms_mean"] <= 1.15 * r["sim_compute_ms"] else slowed).append(r["ratio"])
        by, by_rc = {}, {}
        for r in d["rows"]:
            by.setdefault(short(r["policy"]), []).append(r)
        for r in (rc or {}).get("rows", []):
            by_rc.setdefault(short(r["policy"]), []).append(r)
        for pol, rows in by.items():
            meas, sim, ratio, comp, sim_comp, exp_m, exp_s = _median_run(rows)
            pairs += 1
            met += abs(ratio - 1) <= 0.10
            own = _median_run(by_rc[pol])[2] if pol in by_rc else None
            # The same median run simulated without the profile's contention (files that record it).
            mid = sorted(rows, key=lambda r: r["measured_step_ms"])[(len(rows) - 1) // 2: len(rows) // 2 + 1]
            bare = (sum(r["ratio_no_contention"] for r in mid) / len(mid)
                    if all(r.get("ratio_no_contention") is not None for r in mid) else None)
            out.append("| %s | %s | %d | %.1f (%.1f–%.1f) | %.1f | %s | %s | %s | %s | %s, %s |" % (
                cell, pol, len(rows), meas, min(r["measured_step_ms"] for r in rows),
                max(r["measured_step_ms"] for r in rows), sim,
                ("%.2f" if abs(ratio - 1) <= 0.10 else "**%.2f**") % ratio, _f(bare), _f(own),
                _f(comp / sim_comp if comp and sim_comp else None), _f(exp_m, "%.1f%%"), _f(exp_s, "%.1f%%")))
        provs.append("%s: simulated by %s" % (cell, _prov(d)) + (" Its runs: `%s` — %s." % (
            scrub(d["measured_by"]["command"]), _machine(d["measured_by"]["machine"])) if d.get("measured_by") else ""))
        if rc:
            provs.append("%s, the runs' own compute: %s" % (cell, _prov(rc)))
    out += ["", "The median run is within 10%% of the simulation in %d of %d cell and policy pairs (bold: outside). "
                "*With the runs' own compute*: the same runs simulated with their own forward, update and per-layer "
                "backward (medians over the steps after warm-up, `--bp run --step run`) in place of the profile's, "
                "so that what is left is the model of the network and of synchronization. *Compute per step*: the "
                "median run's mean forward + backward + update per step over the compute the simulation was given "
                "from the profile (contention not included). *Without the contention charge*: the same median run "
                "simulated from the profile without its `overlap.json` ('-' where the file predates "
                "`sim_validate.sh` simulating both). *Exposed comm*: the share of the step spent waiting for "
                "communication, in the median run and in its simulation." % (met, pairs), ""]
    inside = lambda xs: sum(1 for x in xs if abs(x - 1) <= 0.10)
    if quiet or slowed:
        out += ["Every run, by its compute: of the %d runs whose mean compute per step stayed within 15%% of the "
                "compute simulated, %d are within 10%% of their simulation (%s); of the %d that computed slower, %d "
                "(%s)." % (len(quiet), inside(quiet), "%.2f–%.2fx" % (min(quiet), max(quiet)) if quiet else "none",
                           len(slowed), inside(slowed),
                           "%.2f–%.2fx" % (min(slowed), max(slowed)) if slowed else "none"), ""]
    out += ["* " + p for p in provs] + [""]
    return "\n".join(out)


# --- the simulator ------------------------------------------------------------------------------------------------

def _gbps(bw):
    return bw.replace("Gbps", " Gbit/s").replace("Mbps", " Mbit/s")


def render_sim_artifact(results):
    d = _load(results, "simulate_artifact.json")
    if not d:
        return _absent("the simulated artifact profiles", "run `experiments/sim_studies.sh --study artifact`")
    out = ["| profile | ranks | link | set-up | policy | simulated s/iter | modelled s/iter | simulated / modelled | "
           "MB per step |", "|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        setup = "the time model's assumptions" if "--comm-bw" in r.get("command", "") else "GPT-2's bytes, rings"
        out.append("| %s | %d | %s | %s | %s | %.4f | %s | %s | %s |" % (
            r["profile"], r["world"], _gbps(r["bandwidth"]), setup, r["policy"], r["simulated_s"],
            _f(r.get("modelled_s"), "%.4f"), _f(r["simulated_s"] / r["modelled_s"] if r.get("modelled_s") else None),
            _f(r["comm_bytes_per_step"] / 1e6 if r.get("comm_bytes_per_step") is not None else None, "%.1f")))
    out += ["", "Per-layer backward and all-reduce times from the DreamDDP artifact's profiles. \"GPT-2's bytes, "
                "rings\": the real layer sizes as ring all-reduces on the profile's link; \"the time model's "
                "assumptions\": a link whose transfer time is the profile's communication time, one transfer per "
                "layer, which must reproduce the model. \"modelled\" is `dreamddp schedule` on the same profile; "
                "`+profile` is dreamddp given the profile instead of profiling itself. %s" % _prov(d), ""]
    return "\n".join(out)


def render_sim_paper_scale(results):
    """The paper's tables at its scale: simulated s/iter per policy and the speed-ups of dreamddp, beside the time
    model on the same inputs and the artifact's scheduler at the profile's own worker count."""
    d = _load(results, "simulate_paper_scale.json")
    if not d:
        return _absent("the paper's tables in simulation", "run `experiments/sim_studies.sh --study paper_scale`")
    cells = {}
    for r in d["rows"]:
        cells.setdefault((r["model"], r["bandwidth"], r["world"]), {})[r["policy"].split(":")[0]] = r
    out = ["| model | link | workers | S-SGD s/iter | Local SGD | PLSGD | DreamDDP | DreamDDP over Local SGD: "
           "simulated / model / artifact | over PLSGD | over S-SGD | DreamDDP's exposed comm |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    top = {}
    for (model, bw, n), c in cells.items():
        if not all(k in c for k in ("ddp", "localsgd", "plsgd", "dreamddp")):
            continue
        dd = c["dreamddp"]

        def over(k):
            sim, mod = c[k]["simulated_s"] / dd["simulated_s"], c[k]["modelled_s"] / dd["modelled_s"]
            art = (c[k]["artifact_scheduler_s"] / dd["artifact_scheduler_s"]
                   if c[k].get("artifact_scheduler_s") and dd.get("artifact_scheduler_s") else None)
            if n == max(w for (_, _, w) in cells) and k != "ddp":
                top.setdefault(k, []).append(sim)
            return "%.2fx / %.2fx / %s" % (sim, mod, _f(art, "%.2fx"))
        out.append("| %s | %s | %d%s | %.3f | %.4f | %.4f | %.4f | %s | %s | %s | %.1f%% |" % (
            model, _gbps(bw), n, " (profiled)" if n == c["ddp"]["profile_workers"] else "",
            c["ddp"]["simulated_s"], c["localsgd"]["simulated_s"], c["plsgd"]["simulated_s"], dd["simulated_s"],
            over("localsgd"), over("plsgd"), over("ddp"), 100 * dd["exposed_comm_fraction"]))
    claim = d.get("paper_claim") or {}
    nmax = max(w for (_, _, w) in cells)
    lo = min(top.get("localsgd", []) + top.get("plsgd", []) or [float("nan")])
    hi = max(top.get("localsgd", []) + top.get("plsgd", []) or [float("nan")])
    out += ["", "Simulated seconds per iteration (H = 10, steady state after dreamddp's profiling steps), from the "
                "DreamDDP artifact's GPU profiles: per layer its backward time and all-reduce time, measured at the "
                "worker count marked *profiled*. Each layer's size is the one whose ring all-reduce on the link "
                "takes the profile's time at that worker count; other worker counts change only the ring's "
                "2(N-1)/N. *model*: `dreamddp schedule --h 10 --fillin` (the paper's time model; S-SGD with "
                "backward overlap) on the same profile scaled to N; *artifact*: the artifact's own scheduler's "
                "figures for that profile, which exist only at the profiled worker count (its S-SGD is B + C, "
                "without overlap). The paper states %s–%sx over %s on %s GPUs; at %d workers the simulated "
                "speed-up of dreamddp:h=10 over Local SGD and PLSGD here is %.2f–%.2fx." % (
                    _f(claim.get("speedup_min")), _f(claim.get("speedup_max")), claim.get("over", "its baselines"),
                    claim.get("gpus", "?"), nmax, lo, hi), ""]
    # The reading, from the same rows: simulation against the model, the artifact's accounting, the spread over N.
    dev = lambda ks: [r["simulated_s"] / r["modelled_s"] for r in d["rows"] if r["policy"].split(":")[0] in ks]
    other, pl = dev(("ddp", "localsgd", "dreamddp")), dev(("plsgd",))
    art = [(r, c) for c in cells.values() for r in c.values() if r.get("artifact_scheduler_s")]
    acc = [r["modelled_s"] / r["artifact_scheduler_s"] for r, _ in art if r["policy"].split(":")[0] in ("localsgd",)]
    sgd = [c["ddp"]["artifact_scheduler_s"] / c["dreamddp"]["artifact_scheduler_s"] for c in cells.values()
           if c.get("ddp", {}).get("artifact_scheduler_s") and c.get("dreamddp", {}).get("artifact_scheduler_s")]
    spread = []
    for (model, bw) in dict.fromkeys((m, b) for (m, b, _) in cells):
        xs = [c["localsgd"]["simulated_s"] / c["dreamddp"]["simulated_s"] for (m, b, _), c in cells.items()
              if (m, b) == (model, bw) and "localsgd" in c and "dreamddp" in c]
        spread.append(max(xs) - min(xs))
    out += ["Reading: the simulation stays within %.2f%% of the model for S-SGD, Local SGD and DreamDDP and within "
            "%.1f%% for PLSGD (%.3f–%.3fx: its phases are fused into buckets that launch when their last layer is "
            "ready). The model's Local SGD is %.3f–%.3fx the artifact's (its average over 1000 iterations has 99 "
            "synchronizations, not 100). The artifact's own S-SGD (B + C) over its DreamDDP is %.2f–%.2fx on these "
            "profiles. From the smallest to the largest worker count the speed-up over Local SGD moves by at most "
            "%.2f." % (100 * max(abs(x - 1) for x in other), 100 * max(abs(x - 1) for x in pl), min(pl), max(pl),
                       min(acc), max(acc), min(sgd), max(sgd), max(spread)), "", _prov(d), ""]
    return "\n".join(out)


def _sim_rows_by(d, key):
    by = {}
    for r in d["rows"]:
        by.setdefault(key(r), {})[r["policy"]] = r
    return by


def render_sim_scaling(results, name="simulate_scaling.json"):
    d = _load(results, name)
    if not d:
        return _absent("the simulated scaling study", "run `experiments/sim_studies.sh --study scaling`")
    pols = list(dict.fromkeys(r["policy"] for r in d["rows"]))
    out = ["| ranks | link | latency | " + " | ".join(pols) + " | dreamddp / localsgd |",
           "|---|---|---|" + "---|" * (len(pols) + 1)]
    for (w, bw, lat), row in _sim_rows_by(d, lambda r: (r["world"], r["bandwidth"], r["lat"])).items():
        dd = next((row[p]["samples_per_s"] for p in pols if p.startswith("dreamddp") and p in row), None)
        ls = next((row[p]["samples_per_s"] for p in pols if p.startswith("localsgd") and p in row), None)
        out.append("| %d | %s | %s | %s | %s |" % (w, _gbps(bw), lat, " | ".join(
            "%.1f" % row[p]["samples_per_s"] if p in row else "-" for p in pols), _f(dd / ls if dd and ls else None)))
    out += ["", "Simulated samples/s over all ranks (batch 8 per rank). %s" % _prov(d), ""]
    return "\n".join(out)


def render_sim_own_gpt2(results):
    d = _load(results, "simulate_own_gpt2.json")
    if not d:
        return _absent("GPT-2 simulated from our own profile", "run `experiments/sim_studies.sh --study own_gpt2`")
    pols = list(dict.fromkeys(r["policy"] for r in d["rows"]))
    out = ["| profile | ranks | " + " | ".join(pols) + " | dreamddp / localsgd | dreamddp / plsgd |",
           "|---|---|" + "---|" * (len(pols) + 2)]
    for (prof, w), row in _sim_rows_by(d, lambda r: (r["profile"], r["world"])).items():
        t = {p.split(":")[0]: row[p]["step_s"] for p in pols if p in row}
        out.append("| %s | %d | %s | %s | %s |" % (prof, w, " | ".join(
            "%.3f" % row[p]["step_s"] if p in row else "-" for p in pols),
            _f(t["localsgd"] / t["dreamddp"] if "localsgd" in t and "dreamddp" in t else None, "%.2fx"),
            _f(t["plsgd"] / t["dreamddp"] if "plsgd" in t and "dreamddp" in t else None, "%.2fx")))
    out += ["", "Simulated seconds per step at 1 Gbit/s (the ratios: speed-up of dreamddp:h=10, above 1 when it is "
                "faster). %s" % _prov(d), ""]
    return "\n".join(out)


def render_sim_dominance(results):
    d = _load(results, "simulate_dominance.json")
    if not d:
        return _absent("dreamddp against the better baseline", "run `experiments/sim_studies.sh --study dominance`")
    out = ["| profile | sizes | ranks | localsgd:k=10 ms | plsgd:h=10 ms | dreamddp:h=10 ms | dreamddp / better baseline |",
           "|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        t = r["step_ms"]
        out.append("| %s | %s | %d | %.1f | %.1f | %.1f | %.3fx |" % (
            r["profile"], r["sizes"], r["world"], t["localsgd:k=10"], t["plsgd:h=10"], t["dreamddp:h=10"],
            r["dreamddp_vs_best"]))
    worst = min(d["rows"], key=lambda r: r["dreamddp_vs_best"])
    out += ["", "Simulated milliseconds per step over each run's timed window (whole periods after dreamddp's "
                "profiling steps); the last column is the speed of the self-profiled dreamddp:h=10 over the faster "
                "of the two baselines, above 1 when dreamddp is faster (lowest: %.3fx, %s, %s, %d ranks). Links: "
                "the profile's bandwidth; sizes from its communication times at that bandwidth, or GPT-2 small's "
                "bytes. %s" % (worst["dreamddp_vs_best"], worst["profile"], worst["sizes"], worst["world"], _prov(d)),
            ""]
    return "\n".join(out)


def render_sim_copies_cost(results):
    d = _load(results, "simulate_copies_cost.json")
    if not d:
        return _absent("the cost of averages on copies in the simulator",
                       "run `experiments/sim_studies.sh --study copies_cost`")
    plain = {(r["world"], r["steps"]): r for r in d["rows"] if r["policy"] == "localsgd:k=4"}
    out = ["| ranks | steps | policy | wall s | peak RSS MiB | wall / plain | RSS / plain | simulated ms/step |",
           "|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        b = plain.get((r["world"], r["steps"]))
        out.append("| %d | %d | %s | %.2f | %.0f | %s | %s | %.1f |" % (
            r["world"], r["steps"], r["policy"], r["wall_s"], r["peak_rss_mib"],
            _f(r["wall_s"] / b["wall_s"] if b else None, "%.2fx"),
            _f(r["peak_rss_mib"] / b["peak_rss_mib"] if b else None, "%.2fx"), r["step_ms"]))
    out += ["", "Wall time and \"Maximum resident set size\" of `/usr/bin/time -v` around each `dreamddp simulate "
            "--profile data/dreamddp-profiles/gpt2_16_1gbit --cluster Nx1,inter=1Gbps --comm-bw 1Gbps` run; "
            "\"plain\" is localsgd:k=4 at the same size. %s" % _prov(d), ""]
    return "\n".join(out)


def render_sim_stragglers(results):
    d = _load(results, "simulate_stragglers.json")
    if not d:
        return _absent("the simulated straggler study", "run `experiments/sim_studies.sh --study stragglers`")
    base = {(r["bandwidth"], r["policy"]): r["step_s"] for r in d["rows"] if r["straggler"] == "none"}
    out = ["| link | policy | straggler | step s | slowdown against no straggler |", "|---|---|---|---|---|"]
    for r in d["rows"]:
        b = base.get((r["bandwidth"], r["policy"]))
        out.append("| %s | %s | %s | %.3f | %s |" % (_gbps(r["bandwidth"]), r["policy"], r["straggler"], r["step_s"],
                                                     _f(r["step_s"] / b if b else None, "%.2fx")))
    out += ["", _prov(d), ""]
    return "\n".join(out)


def render_sim_hier(results):
    d = _load(results, "simulate_hier.json")
    if not d:
        return _absent("the simulated two-level topology", "run `experiments/sim_studies.sh --study hier`")
    out = ["| cluster | policy | step s | samples/s | exposed comm | cross-node MB per step |", "|---|---|---|---|---|---|"]
    for r in d["rows"]:
        b = r.get("cross_node_bytes_per_step")
        out.append("| %s | %s | %.3f | %.1f | %.1f%% | %s |" % (
            r["cluster"], r["policy"], r["step_s"], r["samples_per_s"], 100 * r["exposed_comm_fraction"],
            "not recorded" if b is None else "%.1f" % (b / 1e6)))
    if any(r.get("cross_node_bytes_per_step") is None for r in d["rows"]):
        out += ["", "The policies here send different amounts across nodes per step and the file does not record how "
                    "much, so their speeds are not compared: a faster row may simply sync less."]
    out += ["", _prov(d), ""]
    return "\n".join(out)


# --- the schedule solver -------------------------------------------------------------------------------------------

def render_schedule(results):
    d = _load(results, "schedule_solver.json")
    if not d:
        return _absent("the schedule solver on the artifact's profiles", "run `experiments/schedule_study.sh`")
    out = ["| profile | H | ddp | localsgd | plsgd | dreamddp (ours) | lower bound | authors' schedule, modelled | "
           "authors' published | dreamddp vs localsgd | solve ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        out.append("| %s | %d | %.4f | %.4f | %.4f | **%.4f** | %.4f%s | %s | %s | %.2fx | %.0f |" % (
            r["name"], r["H"], r["ddp"], r["localsgd"], r["plsgd"], r["dreamddp"], r["lower_bound"],
            " (optimal)" if r["gap"] < 1e-9 else "", _f(r.get("authors_modelled"), "%.4f"),
            _f(r.get("authors_published"), "%.4f"), r["localsgd"] / r["dreamddp"], 1e3 * r["solve_s"]))
    out += ["", "Seconds per iteration under [the time model](%s) (forward and update excluded); ddp is the serial "
                "`B + C`. \"authors' schedule, modelled\" is the artifact's own schedule scored by the same model; "
                "\"published\" is the figure the artifact reports. The solver is deterministic. %s" % (
                    "../design.md#the-time-model" if _target[0] != "README.md" else "docs/design.md#the-time-model",
                    _prov(d)), ""]
    return "\n".join(out)


# --- layer sensitivity on the paper's models ------------------------------------------------------------------------

CLAIMS = {"a": "a conv block early in the network stays above cosine 0.85 at delay 8",
          "b": "the last fully connected layer drops below cosine 0.6 at delay 2",
          "c": "the embedding stays smooth for several steps while the output head turns at delay 1"}


def render_sensitivity_paper(results):
    """experiments/sensitivity.sh --save: per model the layer groups' cosine at each delay, then the claims' verdicts
    as the script computed them from the same runs."""
    d = _load(results, "sensitivity_paper.json")
    if not d:
        return _absent("the sensitivity study on the paper's models", 'run `experiments/sensitivity.sh --models '
                       '"resnet18 resnet50" --no-minibatch --threads 1 --out runs/sensitivity_paper --save '
                       'experiments/results/sensitivity_paper.json`')
    out = []
    for r in d["runs"]:
        if r["probe"] != "fixed":
            continue
        delays = r["delays"]
        size = " %s steps x batch %s," % (r["steps"], r["batch"]) if r.get("steps") else ""
        lrs = r.get("lr_at_probes")
        lr = " (learning rate %s)" % ", ".join("%.3g" % x for x in lrs) if lrs else ""
        out += ["`%s`,%s fixed probe batch, %d probes at steps %s%s; final training loss %s:" % (
                    r["model"], size, len(r["probe_steps"]), ", ".join(str(p) for p in r["probe_steps"]), lr,
                    _f(r.get("final_loss"), "%.3f")), "",
                "| layer group | layers | " + " | ".join("d=%d" % x for x in delays) + " |",
                "|---|---|" + "---|" * len(delays)]
        for g in r["groups"]:
            lo, hi = g.get("min_cosine"), g.get("max_cosine")
            cells = [_f(v, "%.3f") + ("" if lo is None or hi is None or lo[j] is None or hi[j] is None or v is None
                                      else " [%.2f, %.2f]" % (lo[j], hi[j])) for j, v in enumerate(g["mean_cosine"])]
            out.append("| %s | %d | %s |" % (g["group"], g["layers"], " | ".join(cells)))
        out.append("")
    out += ["| claim | model | verdict | the numbers it rests on (cosine) |", "|---|---|---|---|"]
    for c in d["claims"]:
        pp = c.get("per_probe") or {}
        nums = "; ".join("%s %s%s" % (k, _f(v, "%.3f"), " (per probe: %s)" % ", ".join(_f(x, "%.2f") for x in pp[k])
                                      if pp.get(k) else "") for k, v in c["rests_on"].items())
        if c.get("why"):
            nums = c["why"] + ("; " + nums if nums else "")
        out.append("| (%s) %s | %s | **%s** | %s |" % (c["claim"], c.get("statement") or CLAIMS.get(c["claim"], ""),
                                                      "`%s`" % c["model"] if c.get("model") else "-", c["verdict"],
                                                      nums))
    out += ["", "Cosine: mean over probes of cos(g_l(t0), g_l(t0+d)) on the fixed probe batch, [lowest, highest] "
                "over the probes in brackets; a group's cosine is the unweighted mean of its layers'. The verdicts "
                "are computed by the script from these runs (on the mean over probes). %s"
            % _prov(d), ""]
    return "\n".join(out)


def render_sensitivity_e2e(results, name="sensitivity_e2e.json"):
    """experiments/sensitivity_e2e.sh --save: the probe end to end against PyTorch (analysis/probe_e2e.py), per delay."""
    d = _load(results, name)
    if not d:
        return _absent("the end-to-end check of the probe", "run `experiments/sensitivity_e2e.sh --save "
                       "experiments/results/%s`" % name)
    out = ["`%s`, %d steps x batch %d, probes at steps %s, probe batch %d; PyTorch from our theta(0) on the same "
           "batches with the same SGD and probe rule (float32; the bounds from its float64 twin, K = %g):" % (
               d["model"], d["steps"], d["batch"], ", ".join(str(p) for p in d["probes"]), d["probe_batch"], d["K"]),
           "", "| delay | ours | PyTorch | PyTorch float64 | ours against PyTorch: mean abs difference | PyTorch float32 against float64: mean "
               "abs difference | max abs difference | largest bound | decided (bound below 0.1) | worst layer (its mean "
               "abs difference) | outside the bound |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    entries = len(d["probes"]) * len(d["layers"])

    def precisions(j):   # mean |cos32 - cos64| over probes and layers at delay index j
        pairs = [(x[j], y[j]) for a, b in zip(d.get("torch32") or [], d.get("torch64") or []) for x, y in zip(a, b)
                 if x[j] is not None and y[j] is not None and x[j] == x[j] and y[j] == y[j]]
        return sum(abs(x - y) for x, y in pairs) / len(pairs) if pairs else None
    for j, r in enumerate(d["per_delay"]):
        decided = r.get("decided")
        if decided is None:   # a file from before the count: none decided when even the smallest bound is too wide
            decided = 0 if r.get("min_bound", 0) >= 0.1 else None
        out.append("| %d | %.4f | %.4f | %s | %.2g | %s | %.2g | %.2g | %s | %s (%.2g) | %d |" % (
            r["delay"], r["ours"], r["torch"], _f(r.get("torch64"), "%.4f"), r["mean_abs_diff"],
            _f(precisions(j), "%.2g"), r["max_abs_diff"],
            r["max_bound"], "-" if decided is None else "%d of %d" % (decided, r.get("entries", entries)),
            r["worst_layer"], r["worst_layer_mean_abs_diff"], r["outside"]))
    verdict = "every cosine, loss and running statistic within its bound" if d["ok"] else (
        "**%d cosine(s), %d loss(es), %d running-statistics layer(s) outside their bound**" % (
            d["cos_outside"] + d["nan_mismatch"], d["loss_outside"], d["buffers_outside"]))
    out += ["", "ours and PyTorch: mean over probes and the %d layers of cos(g_l(t0), g_l(t0+d)); differences per "
                "probe and layer. Training loss: max abs difference %.2g over the %d steps; final BatchNorm running "
                "statistics: max relative difference %.2g; %s. %s" % (
                    len(d["layers"]), d["loss_max_abs_diff"], d["steps"], d["buffers_max_rel_diff"], verdict, _prov(d)),
            ""]
    return "\n".join(out)


def render_sensitivity_seeds(results, name="sensitivity_seeds.json"):
    """experiments/sensitivity_seeds.sh --save: the probe's mean cosine per delay over seeds, and its spread."""
    d = _load(results, name)
    if not d:
        return _absent("the probe's spread over seeds", "run `experiments/sensitivity_seeds.sh --save "
                       "experiments/results/%s`" % name)
    seeds = d["seeds"]
    rep = {int(k): v for k, v in (d.get("reported") or {}).items()}
    out = ["`%s`, %d steps x batch %d, constant learning rate %g, %d probes at steps %d to %d, %d layers; one run "
           "per seed (its own initialization, data order and probe batch):" % (
               d["model"], d["steps"], d["batch"], d["lr"], len(d["probes"]), d["probes"][0], d["probes"][-1],
               d["layers"]), "",
           "| delay | " + " | ".join("seed %s" % s for s in seeds) + " | mean | sd | max - min | widest pair: layers "
           "higher in the higher run |" + (" reported pair (two runs) |" if rep else ""),
           "|---|" + "---|" * (len(seeds) + 4 + (1 if rep else 0))]
    for r in d["per_delay"]:
        a, b = r["widest_pair"]
        row = "| %d | %s | %.3f | %.3f | %.3f | seeds %s, %s: %d of %d |" % (
            r["delay"], " | ".join("%.3f" % r["per_seed"][s] for s in seeds), r["mean"], r["sd"], r["range"], a, b,
            int(round(r["share_of_layers_higher_in_first"] * d["layers"])), d["layers"])
        if rep:
            x = rep.get(r["delay"])
            row += " %s |" % ("%.3f vs %.3f: %.3f apart" % (x[0], x[1], abs(x[1] - x[0])) if x else "-")
        out.append(row)
    out += ["", "Per seed: the mean over probes and layers of cos(g_l(t0), g_l(t0+d)); sd over the seeds' means.%s %s"
            % (" Reported pair: " + d["reported_what"] + "." if rep and d.get("reported_what") else "", _prov(d)), ""]
    return "\n".join(out)


# --- what the studies found (README) -------------------------------------------------------------------------------

PAPER_SPEEDUP = "1.49–3.91x"   # the DreamDDP paper's reported speed-up over its baselines (GPT-2 profiles)


def _sps(cell, config, system="ours"):
    r = next((r for r in cell["rows"] if r["system"] == system and r["config"] == config), None)
    return r["samples_per_s"] if r and r["samples_per_s"] else None


# Per-rank batch of experiments/regime_map.py, by model family: the samples behind a run's launch-to-exit time.
REGIME_BATCH = {"mlp": 64, "cnn": 64, "resnet20": 64, "gpt-mini": 8, "resnet18": 32, "resnet50": 32, "gpt2": 1,
                "llama": 1}


def _sps_e2e(cell, config, system="ours"):
    """Samples/s from launch to exit of a configuration in a regime-map cell: the median over its repeats of the
    run's steps x batch x ranks over its launch-to-exit seconds (`run_s`); None where the cell recorded no run_s.
    A dreamddp run reads the cell's profile, made once by a `dreamddp profile` launch that is not in run_s."""
    steps = cell.get("steps_ddp", cell.get("steps")) if config == "ddp" else cell.get("steps")
    b = REGIME_BATCH.get(cell["model"].split(":")[0])
    if not steps or not b:
        return None
    xs = sorted(steps * b * cell["ranks"] / r["run_s"] for r in cell.get("runs", [])
                if r["system"] == system and r["config"] == config and r.get("run_s") and r.get("samples_per_s"))
    if not xs:
        return None
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def _vs_e2e(c, a, b):
    x, y = _sps_e2e(c, a), _sps_e2e(c, b)
    return x / y if x and y else None


def _best_e2e(c, H):
    """dreamddp:h=H from launch to exit over the better of localsgd:k=H and plsgd:h=H (None where not recorded)."""
    dd, ls, pl = (_sps_e2e(c, n % H) for n in ("dreamddp:h=%d", "localsgd:k=%d", "plsgd:h=%d"))
    return dd / max(ls, pl) if dd and ls and pl else None


def _vs(c, a, b):
    """Samples/s of configuration a over configuration b in a regime-map cell (None when either is missing)."""
    x, y = _sps(c, a), _sps(c, b)
    return x / y if x and y else None


def _where(c):
    return "%s, %d ranks at %s" % (c["model"], c["ranks"], c["rate"])


E2E_NOTE = ("from launch to exit (each run's whole `dreamddp launch` command; dreamddp's separate profiling launch "
            "left out, as it was not timed), with the trainer's timed window in brackets")


def _finding_ties(results):
    d = _load(results, "regime_map.json")
    cells = [c for c in d["cells"] if c["model"] == "mlp"] if d else []
    if not cells:
        return _absent_line("Ties on a small model", "regime-map.md")
    H = d["H"]
    win = {_where(c): c["verdict"]["dreamddp_vs_best_baseline"] for c in cells}
    v = {_where(c): _best_e2e(c, H) for c in cells}
    if any(x is None for x in v.values()):  # older files: the timed window only, said so
        v, e2e = win, False
    else:
        e2e = True
    low = min(cells, key=lambda c: v[_where(c)])
    best = max(("localsgd:k=%d" % H, "plsgd:h=%d" % H), key=lambda n: (_sps_e2e(low, n) if e2e else _sps(low, n)))
    return ("**Ties on a small model.** On the 4-layer mlp, dreamddp:h=%d runs at %.2f–%.2fx the better of "
            "localsgd:k=%d and plsgd:h=%d in %d cells of the regime map, %s: with four layers there is little "
            "for a layer-wise schedule to spread. It loses most (%.2fx%s) on %d ranks at %s, where %s(C/B %.2f) and "
            "the best baseline is %s ([regime map](%s))." % (
                H, min(v.values()), max(v.values()), H, H, len(cells),
                (E2E_NOTE.replace("with the trainer's timed window in brackets", "against %.2f–%.2fx in the "
                                  "trainer's timed window" % (min(win.values()), max(win.values()))))
                if e2e else "in the trainer's timed window (it leaves out the start)",
                v[_where(low)], " [%.2fx]" % win[_where(low)] if e2e else "", low["ranks"], low["rate"],
                "communication is shortest " if low["comm_over_backward"] == min(
                    c["comm_over_backward"] for c in cells) else "",
                low["comm_over_backward"], "Local SGD's one whole-model average"
                if best.startswith("localsgd") else "plsgd", _rel("regime-map.md")))


def _finding_wins(results):
    d = _load(results, "regime_map.json")
    deep = [c for c in d["cells"] if c["model"] != "mlp"] if d else []
    if not deep:
        return _absent_line("Where it wins", "regime-map.md")
    H = d["H"]
    dd, ls, pl = "dreamddp:h=%d" % H, "localsgd:k=%d" % H, "plsgd:h=%d" % H
    e2e = all(_vs_e2e(c, dd, pl) and _vs_e2e(c, dd, ls) for c in deep)
    if e2e:
        out = ["%s: %.2fx [%.2fx] %s and %.2fx [%.2fx] %s" % (
            _where(c), _vs_e2e(c, dd, pl), _vs(c, dd, pl), pl, _vs_e2e(c, dd, ls), _vs(c, dd, ls), ls) for c in deep]
        text = ("**Where it wins.** On the deeper models dreamddp:h=%d against its baselines, %s: %s." % (
            H, E2E_NOTE, "; ".join(out)))
    else:
        out = ["%s: %.2fx %s and %.2fx %s" % (_where(c), _vs(c, dd, pl), pl, _vs(c, dd, ls), ls) for c in deep]
        text = ("**Where it wins.** On the deeper models dreamddp:h=%d against its baselines, in the trainer's timed "
                "window (it leaves out the start): %s." % (H, "; ".join(out)))
    delayed = [(c, c["verdict"]["best_delay_config"]) for c in d["cells"] if c["verdict"].get("best_delay_vs_localsgd")]
    if delayed:
        key = (lambda c, n: _vs_e2e(c, n, ls)) if e2e and all(_vs_e2e(c, n, ls) for c, n in delayed) else None
        ratio = key or (lambda c, n: _vs(c, n, ls))
        vals = [(c, ratio(c, n), n) for c, n in delayed]
        best = max(vals, key=lambda t: t[1])
        text += (" A delayed merge goes further: %s reaches %.2fx %s at %s%s; over all %d cells it runs at "
                 "%.2f–%.2fx %s, below 1 only at %s. What the delay costs in accuracy is the next finding "
                 "([regime map](%s))." % (
                     best[2], best[1], ls, _where(best[0]), " from launch to exit [%.2fx in the timed window]" %
                     _vs(best[0], best[2], ls) if key else "", len(vals), min(t[1] for t in vals),
                     max(t[1] for t in vals), ls, ", ".join(_where(c) for c, x, _ in vals if x < 1) or "none",
                     _rel("regime-map.md")))
    return text


def _finding_delay(results):
    seeds = _load(results, "convergence_seeds_mlp.json")
    speed_doc = _load(results, "regime_map.json")
    if not seeds or not speed_doc:
        return _absent_line("The delay against accuracy", "convergence.md")
    H = speed_doc["H"]
    gap = {r["policy"]: r for r in seeds["rows"] if len(r["seeds"]) == len(seeds["seeds"]) and r["policy"] != "ddp"}
    ls = "localsgd:k=%d" % H
    parts = []
    mlp = [c for c in speed_doc["cells"] if c["model"] == "mlp"]
    e2e = all(_vs_e2e(c, p, ls) for c in mlp for p in gap if p != ls and _vs(c, p, ls))
    vs = _vs_e2e if e2e else _vs
    for p in sorted(gap, key=lambda p: -gap[p]["mean_gap_points"]):
        sp = [vs(c, p, ls) for c in mlp if vs(c, p, ls)]
        parts.append("%s %+.2f points (%+.2f to %+.2f)%s" % (
            p, gap[p]["mean_gap_points"], gap[p]["min_gap_points"], gap[p]["max_gap_points"],
            ", %.2f–%.2fx %s" % (min(sp), max(sp), ls) if sp and p != ls else ""))
    ddp = next((list(r["accuracy"].values()) for r in seeds["rows"] if r["policy"] == "ddp"), [])
    spread = 100 * (max(ddp) - min(ddp)) if ddp else None
    worst = min((r["mean_gap_points"] for r in gap.values()), default=0.0)
    verdict = ""
    if spread is not None and gap:
        verdict = (" Every local policy's mean gap is %s ddp's own spread over the seeds (%.2f points)%s." % (
            "within" if -worst <= spread else "beyond", spread,
            ": on this small model the delay's accuracy cost is not resolved" if -worst <= spread else ""))
    return ("**The delay against accuracy.** Gap to ddp's final test accuracy on the mlp (Fashion-MNIST, %d "
            "seeds, each against ddp of the same seed), with the speed against Local SGD on the mlp cells of the "
            "regime map %s: %s ([convergence](%s)).%s" % (
                len(seeds["seeds"]), "from launch to exit" if e2e else "in the trainer's timed window (it leaves out "
                "the start)", "; ".join(parts), _rel("convergence.md"), verdict))


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
    return text + " ([regime map](%s#the-papers-models))" % _rel("regime-map.md")


def _finding_elastic(results):
    d = _load(results, "chaos.json")
    if not d:
        return _absent_line("A lost rank", "elastic.md")
    kill = [r for r in d["runs"] if r.get("fault") == "kill" and r.get("goodput") is not None]
    # Goodput only for runs that finished every requested step (an unfinished one is counted apart, below).
    by = {m: [r["goodput"] for r in kill if r["mode"] == m and r["rc"] == 0] for m in ("rejoin", "restart")}
    ended = [r["samples"] / float(r["steps"] * d["set_up"]["ranks"] * d["set_up"]["batch"])
             for r in kill if r["mode"] == "exit"]
    unfinished = [r for r in kill if r["mode"] == "restart" and r["rc"] != 0]
    if not by["rejoin"]:
        return _absent_line("A lost rank", "elastic.md")
    rng = lambda xs: ("%.2f" % xs[0]) if len(set(xs)) == 1 else "%.2f–%.2f" % (min(xs), max(xs))  # noqa: E731
    shr = [x for r in kill if r["mode"] == "rejoin" for x in r["recoveries"] if "detect_s" in x]
    adm = [x["admit_s"] for r in kill if r["mode"] == "rejoin" for x in r["recoveries"] if "admit_s" in x]
    u = d["set_up"]
    text = ("**Lost ranks, killed on a schedule.** With one of %d ranks killed every %g s on the emulated %s "
            "cluster (%s; %s), shrinking and rejoining kept a goodput of %s (samples in the final model per "
            "second, over the fault-free run)" % (u["ranks"], u["every"], u["netem"],
                                                  " and ".join(dict.fromkeys(r["model"] for r in kill)),
                                                  ", ".join(dict.fromkeys(r["policy"] for r in kill)),
                                                  rng(by["rejoin"])))
    if by["restart"]:
        text += ", restarting every rank from its checkpoint %s" % rng(by["restart"])
        if unfinished:
            text += (" where it finished (%d of %d such runs never did: every restart was killed before the end, "
                     "so they earn no goodput)" % (len(unfinished), len(unfinished) + len(by["restart"])))
    if ended:
        text += (", and the default ends the job at the first loss with %.0f–%.0f%% of the requested samples in its "
                 "last checkpoint" % (100 * min(ended), 100 * max(ended)))
    text += "."
    if shr:
        text += (" A loss stalls the survivors for a median %.2f s (detect %.2f s, agree %.2f s, rebuild %.2f s); "
                 % (_median([x["detect_s"] + x["recover_s"] for x in shr]), _median([x["detect_s"] for x in shr]),
                    _median([x["agree_s"] for x in shr]), _median([x["rebuild_s"] for x in shr])))
    if adm:
        text += "the restarted rank rejoins in %.2f s." % _median(adm)
    again = _load(results, "chaos_shrink.json")
    if again:
        rows = [r for r in again["runs"] if r["mode"] == "rejoin" and r["rc"] == 0 and r.get("goodput") is not None]
        k = ["%s %.2f" % (r["policy"], r["goodput"]) for r in rows if r["fault"] == "kill"]
        part = [r for r in again["runs"] if r["fault"] == "partition"]
        if k:
            text += (" Re-measured (%s) without per-step copies, with partitions fenced by probes and the profile "
                     "carried through shrink and rejoin: %s" % (" and ".join(dict.fromkeys(r["model"] for r in rows)),
                                                               ", ".join(k)))
            if part:
                p0 = part[0]
                text += ("; a rank partitioned half the time %s" % (
                    "no longer stalls the run: it finished, goodput %.2f" % p0["goodput"]
                    if p0["rc"] == 0 and p0.get("goodput") is not None else "still ends the run short"))
            text += "."
    ov = _load(results, "shrink_overhead.json")
    if ov:
        ratios = []
        for policy in dict.fromkeys(r["policy"] for r in ov["runs"]):
            ex = _median([r["samples_per_s"] for r in ov["runs"] if r["policy"] == policy and r["mode"] == "exit"])
            sh = _median([r["samples_per_s"] for r in ov["runs"] if r["policy"] == policy and r["mode"] == "shrink"])
            ratios.append("%s %.3f" % (policy, sh / ex))
        text += " Being ready for a loss, without one, runs at %s of the default's speed" % ", ".join(ratios)
        fx = _load(results, "shrink_overhead_profile.json")
        if fx:
            ex = _median([r["samples_per_s"] for r in fx["runs"] if r["mode"] == "exit"])
            sh = _median([r["samples_per_s"] for r in fx["runs"] if r["mode"] == "shrink"])
            text += " (dreamddp with one fixed profile, so that both run the same plan: %.3f)" % (sh / ex)
        text += "."
    return text + " ([elastic](%s))" % _rel("elastic.md")


def _finding_gpu(results):
    d = _load(results, "gpu_step.json")
    if not d:
        return _absent_line("The GPU path", "gpu.md")
    rows = [r for r in d["results"] if r.get("ratio") is not None]
    if not rows:
        return _absent_line("The GPU path", "gpu.md")
    ratios = [r["ratio"] for r in rows]
    return ("**One GPU.** On an %s, our step took %.2f–%.2fx of PyTorch's on the same GPU (%s; batch %d, plain FP32, "
            "both at the same GEMM rate). The smallest model's step is mostly launch and dispatch overhead, which "
            "PyTorch pays in Python for every operation; %s. ([GPU](%s))" % (
                d["gpu"].split(",")[0], min(ratios), max(ratios),
                ", ".join("%s %.2fx" % (r["model"], r["ratio"]) for r in rows), d["batch"], _gpu_rounds(d),
                _rel("gpu.md")))


def _finding_step_time(results):
    docs = [d for d in (_load(results, "bench_step_t1.json"), _load(results, "bench_step_t2.json")) if d]
    if not docs:
        return _absent_line("Step time against PyTorch", "step-time.md")
    parts, slower = [], []
    for d in docs:
        rows = [r for r in d["results"] if r.get("ratio") is not None]
        if not rows:
            continue
        ratios = [r["ratio"] for r in rows]
        peer = d.get("peer") or {}
        gemms = [r["peer"].get("gemm_gflops") for r in rows if r["peer"].get("gemm_gflops")]
        g = d["ours_gemm_gflops"]
        parts.append("%d thread%s: %.2f–%.2fx over %d models (%s; peer GEMM %.0f–%.0f GFLOP/s, ours %.0f)" % (
            d["threads"], "" if d["threads"] == 1 else "s", min(ratios), max(ratios), len(rows),
            ", ".join("%s %.2fx" % (r["model"], r["ratio"]) for r in rows), min(gemms), max(gemms),
            max(g["start"], g["end"])))
        slower += ["%s at %d thread%s" % (r["model"], d["threads"], "" if d["threads"] == 1 else "s")
                   for r in rows if r["ratio"] > 1.0]
        missing = [r["model"] for r in d["results"] if r.get("ratio") is None]
        if missing:
            parts[-1] += "; no ratio for %s (the peer did not run at its best)" % ", ".join(missing)
    if not parts:
        return _absent_line("Step time against PyTorch", "step-time.md")
    peer = docs[0].get("peer") or {}
    text = ("**Step time against PyTorch %s.** One process on the CPU, same model, batch and thread count, "
            "alternating repeats; our step over the peer's (%s): %s." % (
                peer.get("torch", "?").split("+")[0], (peer.get("blas") or "?").split(",")[-1].split(" (")[0].strip(),
                "; ".join(parts)))
    text += (" Slower than PyTorch: %s." % ", ".join(slower)) if slower else " Slower than PyTorch in none of them."
    return text + " ([step time](%s))" % _rel("step-time.md")


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


def _finding_torchft(results):
    d, f = _load(results, "torchft.json"), _load(results, "torchft_faults.json")
    if not d:
        return _absent_line("torchft as a peer", "torchft.md")
    rows = d["results"]
    val = {(r["network"], r["system"], r["method"]): r for r in rows}
    run_s = {}
    for x in d.get("runs", []):
        run_s.setdefault((x["network"], x["system"], x["method"]), []).append(x["run_s"])
    per_net = {}
    for r in rows:
        if r["system"] != "dreamddp":
            continue
        t = val.get((r["network"], "torchft", _torchft_twin(r["method"])))
        if t and t.get("peer_ok", True):
            e = _torchft_e2e(run_s, r, t)
            per_net.setdefault(r["network"], []).append("%s %s[%.2fx]" % (
                r["method"], "%.2fx " % e if e else "", r["samples_per_s"] / t["samples_per_s"]))
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
    text += (" compress=int8 is set against unquantized Streaming DiLoCo: torchft's quantized all-reduce runs on CUDA "
             "only. Where we lose: a short run's launch-to-exit time on a slow link, which our lock-step profiling "
             "steps dominate.")
    if f:
        g = {r["system"]: r for r in f["runs"] if r.get("fault") and r.get("goodput") is not None}
        if "ours" in g and "torchft" in g:
            text += (" One killed and restarted rank (%s, %d ranks): goodput %.3f ours, %.3f torchft, one repeat." % (
                f["set_up"]["model"], f["set_up"]["ranks"], g["ours"]["goodput"], g["torchft"]["goodput"]))
    return text + " ([torchft](%s))" % _rel("torchft.md")


def _absent_line(title, page):
    return ("**%s.** _No complete record yet: see [%s](%s) once one exists, and the earlier records on "
            "the [history page](%s)._" % (title, page[:-3], _rel(page), _rel(HISTORY)))


def render_findings(results):
    """The README's bullets, wrapped at 116 characters so that no line of the README runs long."""
    return "\n".join(textwrap.fill(f(results), 116, initial_indent="* ", subsequent_indent="  ",
                                   break_on_hyphens=False, break_long_words=False)
                     for f in (_finding_step_time, _finding_ties, _finding_wins, _finding_paper_models,
                               _finding_delay, _finding_sim, _finding_paper, _finding_artifact, _finding_torchft,
                               _finding_elastic, _finding_gpu)) + "\n"




def _median(xs):
    xs = sorted(xs)
    return None if not xs else xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


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
        twin, ratio, e2e = "", "-", "-"
        if r["system"] == "dreamddp":
            t = val.get((r["network"], "torchft", _torchft_twin(r["method"])))
            if t and t.get("peer_ok", True):
                twin, ratio = t["method"], "%.2fx %s" % (r["samples_per_s"] / t["samples_per_s"], t["method"])
            if t and t.get("peer_ok", True):  # the peer rules withhold both ratios alike
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


def render_torchft_faults(results, name="torchft_faults.json"):
    """experiments/torchft_faults.py: one kill and restart, ours (shrink + rejoin) against torchft's Manager."""
    d = _load(results, name)
    if not d:
        return _absent("the torchft fault comparison", "run `experiments/torchft_faults.py --out runs/torchft-faults "
                       "--results experiments/results/torchft_faults.json`")
    out = ["| system | fault | rc | wall s | samples in the model | goodput | recovery |", "|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        if r["system"] == "ours":
            rec = "; ".join("%s at step %d: %s%s" % (
                k, s, re.sub(r"^.*?\): ", "", dt).split(";")[0],
                "".join(", " + m.group(1) for m in re.finditer(r"(full world again [0-9.]+ s after the loss)", dt)))
                            for s, k, dt in r.get("events", [])) or "-"
        else:
            v = r.get("recovery") or {}
            rec = "-" if not v else ("first sync without the lost replica %s s after the kill, with all again %s s "
                                     "after; syncs not committed: %d" % (
                                         _f(v.get("to_first_commit_without_lost_s"), "%.1f"),
                                         _f(v.get("to_first_commit_with_all_again_s"), "%.1f"),
                                         v.get("failed_commits", 0)))
        out.append("| %s | %s | %d | %.1f | %d | %s | %s |" % (
            "ours" if r["system"] == "ours" else "torchft", r["fault"] or "none", r["rc"], r["wall_s"], r["samples"],
            _f(r.get("goodput"), "%.3f"), rec))
    su = d["set_up"]
    out += ["", "%s, batch %d, %d ranks on %s, Local SGD H=%d, %d steps; rank 1 killed %g s after the launch. %s" % (
        su["model"], su["batch"], su["ranks"], su["netem"], su["h"], su["steps"], su["kill_at"], _prov(d)), ""]
    return "\n".join(out)


# --- the history page ----------------------------------------------------------------------------------------------

def _date_of(d):
    if not isinstance(d, dict):
        return "-"
    return (d.get("machine") or {}).get("date") or d.get("date") or d.get("time_utc") or "-"


def render_history_index(results):
    out = ["| results file | study | date | record |", "|---|---|---|---|"]
    for f in sorted(os.listdir(results)):
        if not f.endswith(".json"):
            continue
        d = _read(results, f)
        miss = missing_fields(d)
        status = "complete" if not miss else "incomplete: no " + ", ".join(miss)
        if f == "ops_vs_torch.json":
            status = "breaks the comparison rules (see below); " + status
        out.append("| `%s` | %s | %s | %s |" % (f, d.get("study") or d.get("bench") or "-" if isinstance(d, dict)
                                                 else "-", _date_of(d), status))
    mds = sorted(f for f in os.listdir(results) if f.endswith(".md"))
    out += ["", "Written records without a machine-readable file (their numbers are not rendered anywhere): %s." %
            ", ".join("`%s`" % f for f in mds), ""]
    return "\n".join(out)


RENDERERS = {"simulate_validation": render_sim_validation, "sim_charge": render_sim_charge,
             "simulate_validation_paper": render_sim_validation_paper, "bench_step": render_bench_step,
             "bench_step_torch113": lambda r: render_bench_step(r, ("bench_step_t1.2026-12-02.json",
                                                                    "bench_step_t2.2026-12-01.json")),
             "bench_step_stem": render_bench_step_stem, "bench_step_gpt2_init": render_bench_step_ab,
             "regime_map": render_regime, "demo": render_demo,
             "regime_map_20261201": lambda r: render_regime(r, "regime_map.2026-12-01.json"),
             "throughput_gpt2": lambda r: render_regime(r, "throughput_gpt2.json"),
             "throughput_resnet50": lambda r: render_regime(r, "throughput_resnet50.json"),
             "paper_goal": render_goal,
             "backward_shares": render_backward_shares, "gpu_step": render_gpu_step, "peak_rss": render_peak_rss,
             "sim_own_gpt2": render_sim_own_gpt2,
             "ops_vs_torch": render_ops, "beyond_convergence": render_beyond_convergence,
             "beyond_gpt": render_beyond_gpt, "beyond_throughput": render_beyond_throughput,
             "compare_builds": render_compare_builds, "fillin_rule": render_fillin_rule,
             "contention": render_contention, "beyond_convergence_seeds": render_beyond_seeds,
             "convergence_seeds_mlp": lambda r: render_beyond_seeds(r, "convergence_seeds_mlp.json"),
             "contention_3gbit": lambda r: render_contention(r, "regime_contention_3gbit.json"),
             "beyond_delay_spread": lambda r: render_beyond_throughput(r, "beyond_delay_spread.json"),
             "beyond_delay_h4": lambda r: render_beyond_throughput(r, "beyond_delay_h4.json"),
             "sim_artifact": render_sim_artifact, "sim_scaling": render_sim_scaling,
             "sim_scaling_gptmini": lambda r: render_sim_scaling(r, "simulate_scaling_gptmini.json"),
             "sim_stragglers": render_sim_stragglers, "sim_hier": render_sim_hier,
             "sim_dominance": render_sim_dominance, "sim_copies_cost": render_sim_copies_cost,
             "sim_paper_scale": render_sim_paper_scale,
             "schedule_solver": render_schedule, "sensitivity_paper": render_sensitivity_paper,
             "sensitivity_e2e": render_sensitivity_e2e, "sensitivity_seeds": render_sensitivity_seeds,
             "sensitivity_e2e_lr05": lambda r: render_sensitivity_e2e(r, "sensitivity_e2e_lr05.json"),
             "sensitivity_e2e_cnn": lambda r: render_sensitivity_e2e(r, "sensitivity_e2e_cnn.json"),
             "sensitivity_seeds32": lambda r: render_sensitivity_seeds(r, "sensitivity_seeds32.json"),
             "chaos": render_chaos, "shrink_overhead": render_shrink_overhead,
             "chaos_shrink": lambda r: render_chaos(r, "chaos_shrink.json"),
             "shrink_overhead_profile": lambda r: render_shrink_overhead(r, "shrink_overhead_profile.json"),
             "findings": render_findings, "history_index": render_history_index,
             "topk_compression": render_topk_compression, "torchft": render_torchft,
             "torchft_faults": render_torchft_faults,
             "torchft_faults_heal": lambda r: render_torchft_faults(r, "torchft_faults_heal.json")}


def render_section(name, results):
    if name.startswith("history_") and name != "history_index":
        base = name[len("history_"):]
        if base not in RENDERERS:
            raise KeyError(name)
        _lenient[0] = True
        try:
            return RENDERERS[base](results)
        finally:
            _lenient[0] = False
    if name == "ops_vs_torch" and not _lenient[0]:
        return ("_The per-op comparison broke the comparison rules; it is kept on the [history page](%s)._\n" %
                _rel(HISTORY))
    if name not in RENDERERS:
        raise KeyError(name)
    return RENDERERS[name](results)


_SECTION = re.compile(r"<!-- results:([a-z0-9_]+) -->\n.*?<!-- /results:\1 -->", re.S)


def render(text, results, target="README.md"):
    _target[0] = target

    def sub(m):
        body = render_section(m.group(1), results)
        return "<!-- results:%s -->\n%s<!-- /results:%s -->" % (m.group(1), body if body.endswith("\n") else
                                                               body + "\n", m.group(1))
    return _SECTION.sub(sub, text)


# Numbers a reader could quote as a measurement: decimals, percentages, ratios, times, rates and sizes with units.
_NUMBER = re.compile(r"(?<![\w.\-/])(?:x\d+(?:\.\d+)?|\d+(?:\.\d+)?(?:x\b|\s?%|\s?(?:ms|µs|us|s|GB/s|MB/s|"
                     r"GFLOP/s|samples/s|MB|GB|KB)\b)|\d+\.\d+)")


def prose_numbers(text):
    """(line number, token) of every measurement-like number outside rendered sections, code and link targets."""
    hits = []
    text = _SECTION.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for i, line in enumerate(text.split("\n"), 1):
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        hits += [(i, m.group(0)) for m in _NUMBER.finditer(line)]
    return hits


def pages(readme, docs):
    out = [(readme, "README.md")]
    if docs and os.path.isdir(docs):
        out += [(os.path.join(docs, f), "docs/results/" + f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", default=os.path.join(REPO, "README.md"))
    ap.add_argument("--docs", default=os.path.join(REPO, "docs", "results"),
                    help="folder of result pages rendered besides the README")
    ap.add_argument("--results", default=os.path.join(REPO, "experiments", "results"))
    ap.add_argument("--check", action="store_true", help="exit 1 if a rendered section differs or prose has numbers")
    a = ap.parse_args()
    if not os.path.isfile(a.readme):
        ap.exit(2, "render_results: error: --readme %s: no such file\n" % a.readme)
    if not os.path.isdir(a.docs):
        ap.exit(2, "render_results: error: --docs %s: not a directory\n" % a.docs)
    if not os.path.isdir(a.results):
        ap.exit(2, "render_results: error: --results %s: not a directory\n" % a.results)
    stale, numbers = [], []
    for path, target in pages(a.readme, a.docs):
        text = open(path).read()
        try:
            new = render(text, a.results, target)
        except KeyError as e:
            ap.exit(2, "render_results: error: %s: unknown section %s\n" % (path, e.args[0]))
        numbers += ["%s:%d: %s" % (target, n, tok) for n, tok in prose_numbers(new)]
        if new != text:
            stale.append(path)
            if not a.check:
                open(path, "w").write(new)
                print("render_results: rewrote the marked sections of %s" % target)
    for n in numbers:
        sys.stderr.write("render_results: a number outside the rendered sections: %s\n" % n)
    if a.check:
        for p in stale:
            sys.stderr.write("render_results: %s is out of date with %s: run analysis/render_results.py\n" % (
                p, a.results))
        if stale or numbers:
            return 1
        print("render_results: every rendered section matches the results files, no number outside them")
        return 0
    return 1 if numbers else 0


if __name__ == "__main__":
    sys.exit(main())
