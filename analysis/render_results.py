#!/usr/bin/python3
"""README tables rendered from experiments/results/*.json, so the text cannot drift from the data.

  render_results.py [--readme README.md] [--results experiments/results]          rewrite the marked sections
  render_results.py --check                                                         exit 1 if any is stale

A section is the text between `<!-- results:NAME -->` and `<!-- /results:NAME -->` in the README; NAME picks the
renderer below and the results file(s) it reads. Every rendered table ends with the command, date, machine (CPU,
flags, cores, load) and peer configuration of its sitting, taken from the file.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _load(results, name):
    p = os.path.join(results, name)
    return json.load(open(p)) if os.path.exists(p) else None


def _machine(m):
    return "%s, %s (%s), %d cores, load %.2f%s" % (
        m.get("date", "?"), m.get("cpu", "?"), "/".join(m.get("cpu_flags", [])) or "no AVX2",
        m.get("cores", 0), m.get("load_1m", 0),
        (" at the start, %.2f at the end" % m["load_1m_end"]) if "load_1m_end" in m else "")


def _f(x, fmt="%.2f", none="-"):
    return none if x is None else fmt % x


def render_bench_step(results):
    docs = [d for d in (_load(results, "bench_step_t1.json"), _load(results, "bench_step_t2.json")) if d]
    if not docs:
        return "_No step-time sitting recorded yet: run `SAVE=experiments/results/bench_step_t1.json " \
               "experiments/bench_step.sh`._\n"
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
        out.append("%d thread(s): `%s` — %s; our GEMM %.1f / %.1f GFLOP/s (start / end of the sitting), commit %s." % (
            d["threads"], d["command"], _machine(d["machine"]), g["start"], g["end"], d["machine"].get("commit", "?")))
        out.append("")
    return "\n".join(out)


def render_regime(results):
    d = _load(results, "regime_map.json")
    if not d:
        return "_No regime map recorded yet: run `experiments/regime_map.sh --results experiments/results/regime_map.json`._\n"
    H = d["H"]
    delayed = next((r["config"] for c in d["cells"] for r in c["rows"] if ",delay=" in r["config"]), None)
    out = ["| cell | C/B | ours ddp | torch ddp | ours localsgd | torch localsgd | ours plsgd | ours dreamddp | "
           "dreamddp fillin=0 | torch partial | %s | **dreamddp / best baseline** (fillin=0) | delay / localsgd |"
           % (delayed or "delayed"), "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    names = ["ddp", "localsgd:k=%d" % H, "plsgd:h=%d" % H, "dreamddp:h=%d" % H, "dreamddp:h=%d,fillin=0" % H]
    if delayed:
        names.append(delayed)
    for c in d["cells"]:
        val = {(r["system"], r["config"]): r for r in c["rows"]}

        def cell(system, name):
            r = val.get((system, name))
            if not r or not r["samples_per_s"]:
                return "-"
            if system == "torch" and not r["peer_ok"]:
                return "(misconfigured)"
            runs = [x for x in r["samples_per_s_runs"] if x]
            spread = " (%.0f–%.0f)" % (min(runs), max(runs)) if len(runs) > 1 else ""
            return "%.0f%s%s" % (r["samples_per_s"], spread, " *noisy*" if r["noisy"] else "")
        v = c["verdict"]
        out.append("| %s, %d ranks, %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | **%s** (%s) | %s |" % (
            c["model"], c["ranks"], c["rate"], c["comm_over_backward"], cell("ours", names[0]),
            cell("torch", "ddp"), cell("ours", names[1]), cell("torch", names[1]), cell("ours", names[2]),
            cell("ours", names[3]), cell("ours", names[4]), cell("torch", "partial:h=%d" % H),
            cell("ours", delayed) if delayed else "-",
            _f(v["dreamddp_vs_best_baseline"]), _f(v["dreamddp_fillin0_vs_best_baseline"]),
            _f(v.get("dreamddp_delay_vs_localsgd"))))
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
    out += ["", "`%s` — %s; our GEMM %.1f GFLOP/s; the peer alone: %s, %s GFLOP/s, torch %s; commit %s." % (
        d["command"], _machine(d["machine"]), d["ours_gemm_gflops"], pa.get("blas", "-"),
        _f(pa.get("gemm_gflops"), "%.1f"), pa.get("peer", "-"), d["machine"].get("commit", "?")), ""]
    return "\n".join(out)


def render_demo(results):
    d = _load(results, "demo.json")
    if not d:
        return "_No demo sitting recorded yet: run `DEMO_RESULTS=experiments/results/demo.json make demo`._\n"
    ddp = next(r for r in d["rows"] if r["policy"] == "ddp")["samples_per_s"]
    out = ["| policy | samples/s | vs ddp | exposed comm | MB sent/rank | test accuracy |", "|---|---|---|---|---|---|"]
    for r in d["rows"]:
        out.append("| %s | %.0f | %.2fx | %.1f%% | %.0f | %s |" % (
            r["policy"], r["samples_per_s"], r["samples_per_s"] / ddp, 100 * r["exposed"], r["mb_per_rank"],
            "-" if r["test_accuracy"] is None else "%.2f%%" % (100 * r["test_accuracy"])))
    out += ["", "dreamddp:h=8: **%.2fx DDP, %.2fx the better of Local SGD and PLSGD (%s): it %s against its own "
                "baselines** here. `%s` — %d ranks, network %s, %d steps per policy; %s, commit %s." % (
                    d["dreamddp_vs_ddp"], d["dreamddp_vs_best_baseline"], d["best_baseline"], d["verdict"],
                    d["command"], d["ranks"], d["network"], d["steps"], _machine(d["machine"]),
                    d["machine"].get("commit", "?")), ""]
    return "\n".join(out)


def render_ops(results):
    d = _load(results, "ops_vs_torch.json")
    if not d:
        return "_No per-op sitting recorded yet: run `experiments/bench_ops_vs_torch.sh`._\n"
    out = ["| op (our shapes, %d thread) | ours ms | torch ms | ours / torch |" % d["threads"], "|---|---|---|---|"]
    for r in d["rows"]:
        out.append("| %s | %.3f | %.3f | %s |" % (r["op"], r["ours_ms"], r["torch_ms"],
                                                 ("**%.2f**" if r["ratio"] > 1 else "%.2f") % r["ratio"]))
    flags = "/".join(f for f in ("avx2", "avx512f") if d.get(f))
    out += ["", "`%s` — %s, %s (%s), %d cores, load %s at the start; GEMM 64x1024x1024: ours %.1f, torch %.1f "
                "GFLOP/s; torch %s on %s." % (d["command"], d["date"], d["cpu_model"], flags, d["nproc"],
                                             d["loadavg_start"].split()[0], d["ours_gemm_gflops"],
                                             d["torch_gemm_gflops"], d["torch"],
                                             os.path.basename(d["torch_blas"][-1]) if d["torch_blas"] else "?"), ""]
    return "\n".join(out)


def render_json_table(results, name):
    """Fallback for results files that carry a ready `markdown` field (e.g. ops_vs_torch.json, simulate_*.json)."""
    d = _load(results, name + ".json")
    if not d:
        return "_No results file %s.json yet._\n" % name
    md = d.get("markdown")
    if not md:
        return "_%s.json has no markdown table._\n" % name
    return md.rstrip() + "\n"


def _render_beyond_convergence(results, name, what):
    d = _load(results, name + ".json")
    if not d:
        return "_No %s sitting recorded yet: see experiments/beyond_results.py._\n" % what
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
    out += ["", "%s. `%s` — collected %s; network %s; runs: %s. One seed per policy: single runs of the local "
                "policies move by about a point between seeds (experiments/convergence.sh). samples/s come from a "
                "loaded sitting (studies beside builds): for speed, read the throughput table." % (
                    "; ".join(dict.fromkeys(x for x in d.get("sitting", []) if x.startswith("setup:"))), d["command"],
                    _machine(d["machine"]), d["network"],
                    "; ".join(dict.fromkeys(x.replace("git: ", "") for x in d.get("sitting", []) if x.startswith("git:")))), ""]
    return "\n".join(out)


def render_beyond_convergence(results):
    return _render_beyond_convergence(results, "beyond_convergence", "cnn convergence")


def render_beyond_gpt(results):
    return _render_beyond_convergence(results, "beyond_gpt", "gpt-mini loss")


def render_beyond_seeds(results, name="beyond_convergence_seeds.json"):
    d = _load(results, name)
    if not d:
        return "_No multi-seed convergence recorded yet: see experiments/beyond_results.py seeds._\n"
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
    out += ["", "Final test accuracy (first 5000 test images) after the same 128,000 samples; each seed's gap is to the "
                "ddp run of the same seed (same initialisation and data order); policies run on every seed. "
                "`%s` — collected %s." % (d["command"], _machine(d["machine"])), ""]
    return "\n".join(out)


def render_beyond_throughput(results, name="beyond_throughput.json"):
    d = _load(results, name)
    if not d:
        return "_No throughput sitting for the merge keys yet: run `experiments/regime_map.sh --configs ...`._\n"
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
                "CPU). `%s` — %s; commit %s.%s" % (
                    d["repeats"], d["command"], _machine(d["machine"]), d["machine"].get("commit", "?"),
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
        return "_No sitting of the fill-in rule yet: run `experiments/regime_map.sh --configs ...`._\n"
    names = ["localsgd:k=%d" % d["H"], "plsgd:h=%d" % d["H"], "dreamddp:h=%d" % d["H"], "dreamddp:h=%d,fillin=0" % d["H"]]
    out = ["| cell | C/B | " + " | ".join(names) + " | **dreamddp / best baseline** | fillin=0 / best baseline |",
           "|---|---|" + "---|" * (len(names) + 2)]
    for c in d["cells"]:
        val, sps, cells, ratio = _ours_against_baselines(c, names)
        out.append("| %s, %d ranks, %s | %.2f | %s | **%s** | %s |" % (
            c["model"], c["ranks"], c["rate"], c["comm_over_backward"], " | ".join(cells), ratio(sps[names[2]]),
            ratio(sps[names[3]])))
    out += ["", "Samples/s over all ranks, median of %d alternating repeats. `%s` — %s; commit %s." % (
        d["repeats"], d["command"], _machine(d["machine"]), d["machine"].get("commit", "?")), ""]
    return "\n".join(out)


def render_contention(results, name="regime_contention.json"):
    d = _load(results, name)
    if not d:
        return "_No sitting with contention measured yet: run `experiments/regime_map.sh --configs ...`._\n"
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
    out += ["", "Samples/s over all ranks, median of %d alternating repeats. `%s` — %s; commit %s." % (
        d["repeats"], d["command"], _machine(d["machine"]), d["machine"].get("commit", "?")), ""]
    return "\n".join(out)


def render_compare_builds(results):
    d = _load(results, "compare_builds.json")
    if not d:
        return "_No side-by-side sitting of two builds recorded yet: run `experiments/compare_builds.sh`._\n"
    out = ["| what | config | base (%s) | new (%s) | speed new/base |" % (d.get("base_commit") or "base",
                                                                   d.get("new_commit") or "new"),
           "|---|---|---|---|---|"]
    for r in d["rows"]:
        what = "step ms, 1 process" if r["kind"] == "step" else "samples/s, 4 ranks, %s" % d["net"]
        out.append("| %s | %s | %.2f | %.2f | %.3f |" % (what, r["config"], r["best_base"], r["best_new"],
                                                        r["speed_ratio"]))
    out += ["", "Best of %d alternating repetitions per side (lower step time / higher samples/s). `%s` — %s%s." % (
        len(d["rows"][0]["base"]), d["command"], _machine(d["machine"]),
        "; noisy: load %.2f before a run on %d cores" % (d["load_max"], d["cores"]) if d.get("noisy") else ""), ""]
    return "\n".join(out)


def render_sim_validation(results):
    """Every `experiments/sim_validate.sh --json` file of a regime-map cell: simulated over measured step time per
    run, by policy (the profile's path in a dreamddp spec dropped), and the spread over all of them."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_validation_") and f.endswith(".json")
                   and f != "simulate_validation_bp_run.json")  # --bp run on a /tmp profile: its own paragraph
    if not files:
        return "_No validation of the simulator recorded yet: run `experiments/sim_validate.sh --json ...`._\n"
    docs = [(f[len("simulate_validation_"):-len(".json")], json.load(open(os.path.join(results, f)))["rows"])
            for f in files]
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
    inside = sum(1 for x in ratios if abs(x - 1) <= 0.15)
    out += ["", "Simulated / measured step time, one entry per measured run (%d runs in %d files, %.2f–%.2fx; within "
                "15%% in %d). `experiments/sim_validate.sh --profile CELL/profile --json "
                "experiments/results/simulate_validation_CELL.json RUN...` on the cell's own profile; a file's "
                "runs and simulator are of one day (the `delay-` file: the engine and simulator with the control "
                "all-reduce on its own channel; the others: both still queued it behind the delayed averages)." % (
                    len(ratios), len(docs), min(ratios), max(ratios), inside), ""]
    return "\n".join(out)


RENDERERS = {"simulate_validation": render_sim_validation, "bench_step": render_bench_step,
             "regime_map": render_regime, "demo": render_demo,
             "ops_vs_torch": render_ops, "beyond_convergence": render_beyond_convergence,
             "beyond_gpt": render_beyond_gpt, "beyond_throughput": render_beyond_throughput,
             "compare_builds": render_compare_builds, "fillin_rule": render_fillin_rule,
             "contention": render_contention, "beyond_convergence_seeds": render_beyond_seeds,
             "contention_3gbit": lambda r: render_contention(r, "regime_contention_3gbit.json"),
             "beyond_delay_spread": lambda r: render_beyond_throughput(r, "beyond_delay_spread.json"),
             "beyond_delay_h4": lambda r: render_beyond_throughput(r, "beyond_delay_h4.json")}


def render(readme_text, results):
    def sub(m):
        name = m.group(1)
        body = RENDERERS[name](results) if name in RENDERERS else render_json_table(results, name)
        return "<!-- results:%s -->\n%s<!-- /results:%s -->" % (name, body if body.endswith("\n") else body + "\n",
                                                               name)
    return re.sub(r"<!-- results:([a-z0-9_]+) -->\n.*?<!-- /results:\1 -->", sub, readme_text, flags=re.S)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", default=os.path.join(REPO, "README.md"))
    ap.add_argument("--results", default=os.path.join(REPO, "experiments", "results"))
    ap.add_argument("--check", action="store_true", help="exit 1 if a rendered section differs from the README")
    a = ap.parse_args()
    try:
        text = open(a.readme).read()
    except OSError as e:
        ap.exit(2, "render_results: error: --readme %s: %s\n" % (a.readme, e.strerror))
    if not os.path.isdir(a.results):
        ap.exit(2, "render_results: error: --results %s: not a directory\n" % a.results)
    new = render(text, a.results)
    if a.check:
        if new != text:
            sys.stderr.write("render_results: %s is out of date with %s: run analysis/render_results.py\n" % (
                a.readme, a.results))
            return 1
        print("render_results: README tables match the results files")
        return 0
    if new != text:
        open(a.readme, "w").write(new)
        print("render_results: rewrote the marked sections of %s" % a.readme)
    else:
        print("render_results: %s already up to date" % a.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
