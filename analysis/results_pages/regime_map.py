"""docs/results/regime-map.md: the regime map, the fill-in rule, contention and the paper's throughput goal."""
from .common import _absent, _f, _fmt_sps, _load, _prov
from .findings_cells import _best_e2e, _vs_e2e


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
    out += _e2e_sentence(d, H)
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
    peer = ("the peer alone: %s, %s GFLOP/s, torch %s" % (pa.get("blas", "-"), _f(pa.get("gemm_gflops"), "%.1f"),
                                                          pa.get("peer", "-")) if pa else "ours only, no peer ran")
    out += ["", "%s; %s. %s" % (gemm, peer, _prov(d)), ""]
    return "\n".join(out)


def _e2e_sentence(d, H):
    """The launch-to-exit sentence under the map (or why there is none), saying what the launch left out."""
    e2e = [(c, _best_e2e(c, H)) for c in d["cells"]]
    if all(x for _, x in e2e):
        start = ("dreamddp profiled itself inside that launch (its default start: plsgd's groups while it records, "
                 "then the solved plan, and a measured trial where the model puts it within a tenth of Local SGD's "
                 "schedule), so nothing is left out" if d.get("dreamddp_profile") == "self" else
                 "dreamddp's separate `dreamddp profile` launch, which made the cell's profile, is left out, as it "
                 "was not timed")
        return ["", "**From launch to exit** (each run's whole `dreamddp launch` command, as a user times it: "
                    "start-up, warm-up and exit included; %s), dreamddp:h=%d over the better of "
                    "localsgd:k=%d and plsgd:h=%d, with the timed window's ratio above in brackets: %s." % (
                        start, H, H, H, "; ".join("%s, %d ranks, %s: **%.2fx** [%.2fx]" % (
                            c["model"], c["ranks"], c["rate"], x, c["verdict"]["dreamddp_vs_best_baseline"])
                            for c, x in e2e))]
    return ["", "The samples/s above are the trainer's timed window: it leaves out each run's start (start-up, "
                "warm-up steps); this file recorded no launch-to-exit times."]


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
