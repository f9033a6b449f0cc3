"""docs/results/throughput.md: the demo and the throughput studies beyond the paper."""
from .common import _absent, _f, _load, _prov


def _within_spread(d):
    """ ', by less than ...' when dreamddp's gap to its better baseline is smaller than a policy's runs lie apart."""
    gap = abs(d["dreamddp_vs_best_baseline"] - 1)
    return ", by less than one policy's runs lie apart" if "spread" in d and gap < d["spread"] else ""


def render_demo(results):
    d = _load(results, "demo.json")
    if not d:
        return _absent('the demo', 'run `DEMO_RESULTS=experiments/results/demo.json make demo`')
    e2e = all("samples_per_s_end_to_end" in r for r in d["rows"])
    key = "samples_per_s_end_to_end" if e2e else "samples_per_s"
    ddp = next(r for r in d["rows"] if r["policy"] == "ddp")[key]
    runs = all("launch_to_exit_runs" in r for r in d["rows"])
    if e2e:
        out = ["| policy | launch to exit | samples/s | vs ddp | timed window | samples/s in it | exposed comm | "
               "MB sent/rank | test accuracy |" + (" runs, s |" if runs else ""),
               "|---|---|---|---|---|---|---|---|---|" + ("---|" if runs else "")]
    else:
        out = ["| policy | samples/s (timed window) | vs ddp | exposed comm | MB sent/rank | test accuracy |",
               "|---|---|---|---|---|---|"]
    for r in d["rows"]:
        acc = "-" if r["test_accuracy"] is None else "%.2f%%" % (100 * r["test_accuracy"])
        if e2e:
            a, b = r["timed_steps"]
            out.append("| %s | %.2f s | %.0f | %.2fx | steps %d-%d | %.0f | %.1f%% | %.0f | %s |" % (
                r["policy"], r["launch_to_exit_s"], r[key], r[key] / ddp, a, b - 1, r["samples_per_s"],
                100 * r["exposed"], r["mb_per_rank"], acc) + (
                " %s |" % ", ".join("%.2f" % t for t in r["launch_to_exit_runs"]) if runs else ""))
        else:
            out.append("| %s | %.0f | %.2fx | %.1f%% | %.0f | %s |" % (
                r["policy"], r["samples_per_s"], r["samples_per_s"] / ddp, 100 * r["exposed"], r["mb_per_rank"], acc))
    if e2e:
        reps = ("Median of %d repeats in alternating order; a policy's runs lie up to %.0f%% apart from launch to "
                "exit. " % (d["repeats"], 100 * d["spread"])) if runs and d.get("repeats", 1) > 1 else ""
        out += ["", reps + "Launch to exit: the whole `dreamddp launch` command, as a user times it (start-up, "
                    "evaluations and exit included); the timed window is the trainer's samples/s over the steps shown, which "
                    "leaves out the steps before them (warm-up, and for dreamddp its profiling and trial steps) and "
                    "the evaluations.", "",
                "dreamddp:h=8 from launch to exit: **%.2fx DDP, %.2fx the better of Local SGD and PLSGD (%s): it %s "
                "against its own baselines** here%s (in the timed window alone: %.2fx). %d ranks, network %s, %d steps "
                "per policy. %s" % (d["dreamddp_vs_ddp"], d["dreamddp_vs_best_baseline"], d["best_baseline"],
                                    d["verdict"], _within_spread(d), d["dreamddp_vs_best_baseline_timed_window"],
                                    d["ranks"], d["network"], d["steps"], _prov(d)), ""]
    else:
        out += ["", "dreamddp:h=8 in the timed window (it leaves out the start: warm-up, profiling and trial steps; "
                    "launch to exit was not recorded): %.2fx DDP, %.2fx the better of Local SGD and PLSGD (%s): it "
                    "%s against its own baselines here. %d ranks, network %s, %d steps per policy. %s" % (
                        d["dreamddp_vs_ddp"], d["dreamddp_vs_best_baseline"], d["best_baseline"], d["verdict"],
                        d["ranks"], d["network"], d["steps"], _prov(d)), ""]
    return "\n".join(out)


def render_beyond_throughput(results, name="beyond_throughput.json"):
    d = _load(results, name)
    if not d:
        return _absent('throughput with the merge keys', 'run `experiments/regime_map.sh --configs ...`')
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
