"""docs/results/simulator.md and paper-scale.md: what the simulator predicts."""
from .common import _absent, _f, _load, _prov


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
