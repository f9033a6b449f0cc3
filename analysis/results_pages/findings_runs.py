"""The README's findings from measured runs: ties, wins, delay, elastic, GPU, step time."""
import re

from .common import _load, _median, _rel
from .findings_cells import _absent_line, _best_e2e, _regime_e2e, _sps, _sps_e2e, _vs, _vs_e2e, _where
from .gpu import _gpu_rounds


def _finding_ties(results):
    d, note = _regime_e2e(results)
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
            "for a layer-wise schedule to spread. It loses most (%.2fx%s) on %d ranks at %s (C/B %.2f%s), where "
            "the best baseline is %s ([regime map](%s))." % (
                H, min(v.values()), max(v.values()), H, H, len(cells),
                (note.replace("with the trainer's timed window in brackets", "against %.2f–%.2fx in the "
                                  "trainer's timed window" % (min(win.values()), max(win.values()))))
                if e2e else "in the trainer's timed window (it leaves out the start)",
                v[_where(low)], " [%.2fx]" % win[_where(low)] if e2e else "", low["ranks"], low["rate"],
                low["comm_over_backward"], ", the shortest communication" if low["comm_over_backward"] == min(
                    c["comm_over_backward"] for c in cells) else "", "Local SGD's one whole-model average"
                if best.startswith("localsgd") else "plsgd", _rel("regime-map.md")))


def _finding_wins(results):
    d, note = _regime_e2e(results)
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
            H, note, "; ".join(out)))
    else:
        out = ["%s: %.2fx %s and %.2fx %s" % (_where(c), _vs(c, dd, pl), pl, _vs(c, dd, ls), ls) for c in deep]
        text = ("**Where it wins.** On the deeper models dreamddp:h=%d against its baselines, in the trainer's timed "
                "window (it leaves out the start): %s." % (H, "; ".join(out)))
    d = _load(results, "regime_map.json") or {"cells": []}  # the delayed merges ran on the cells' profiles
    delayed = [(c, c["verdict"]["best_delay_config"]) for c in d["cells"] if c["verdict"].get("best_delay_vs_localsgd")]
    if delayed:
        key = (lambda c, n: _vs_e2e(c, n, ls)) if e2e and all(_vs_e2e(c, n, ls) for c, n in delayed) else None
        ratio = key or (lambda c, n: _vs(c, n, ls))
        vals = [(c, ratio(c, n), n) for c, n in delayed]
        best = max(vals, key=lambda t: t[1])
        text += (" A delayed merge goes further: %s reaches %.2fx %s at %s%s; over all %d cells it runs at "
                 "%.2f–%.2fx %s, below 1 only at %s. What the delay costs in accuracy is the next finding "
                 "([regime map](%s))." % (
                     best[2], best[1], ls, _where(best[0]), " from launch to exit on the cell's profile [%.2fx in the timed window]" %
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


def _finding_chaos_cells(results, rng):
    """The chaos table's every fault, both policies, with heartbeats: goodput per fault, a stop's detection."""
    d = _load(results, "chaos_cells.json")
    if not d:
        return ""
    rows = [r for r in d["runs"] if r["mode"] == "rejoin" and r["rc"] == 0 and r.get("goodput") is not None]
    per = ["%s %s" % (f, rng([r["goodput"] for r in rows if r["fault"] == f]))
           for f in ("kill", "stop", "partition") if any(r["fault"] == f for r in rows)]
    if not per:
        return ""
    stops = [x for r in rows if r["fault"] == "stop" for x in r["recoveries"] if "detect_s" in x]
    text = (" Every fault on one machine (%s; %s), silent members found by heartbeats: goodput %s" % (
        " and ".join(dict.fromkeys(r["model"] for r in rows)), ", ".join(dict.fromkeys(r["policy"] for r in rows)),
        ", ".join(per)))
    if stops:
        text += ("; a stopped rank is judged lost and agreed on in a median %.2f s (the collectives' timeout is %g s)"
                 % (_median([x["detect_s"] + x["agree_s"] for x in stops]), d["set_up"]["timeout"]))
    text += "."
    again = _chaos_goodputs(_load(results, "chaos_in_place.json"))
    if again:
        text += " Measured again with an excluded rank joining from its own process, goodput %s." % again
    hb = _load(results, "chaos_heartbeat.json")
    beat = _chaos_goodputs(hb)
    if beat:
        text += (" Again with a %g s heartbeat, a local layer's optimizer state kept through a shrink: goodput %s." %
                 (hb["set_up"]["heartbeat"], beat))
    return text


def _chaos_goodputs(d):
    """'mlp: localsgd:k=8 kill 0.92, stop 0.84; ...; cnn: ...' of a chaos table's finished rejoin runs ('' if none)."""
    rows = [r for r in d["runs"] if r["mode"] == "rejoin" and r["rc"] == 0 and r.get("goodput") is not None] if d else []
    per_model = []
    for model in dict.fromkeys(r["model"] for r in rows):
        per_policy = []
        for policy in dict.fromkeys(r["policy"] for r in rows if r["model"] == model):
            per_policy.append("%s %s" % (policy, ", ".join(
                "%s %.2f" % (r["fault"], r["goodput"]) for r in rows if r["model"] == model and r["policy"] == policy)))
        per_model.append("%s: %s" % (model, "; ".join(per_policy)))
    return "; ".join(per_model)


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
    text += _finding_chaos_cells(results, rng)
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


def _short_cpu(d):
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon', 'AMD EPYC 9B14' -> 'AMD EPYC', with ' (AVX2 only)' where
    the machine recorded its flags and had no AVX-512."""
    m = d.get("machine") or {}
    cpu = " ".join(re.sub(r"\((R|TM)\)", "", m.get("cpu", "?")).split()[:2])
    flags = m.get("cpu_flags")
    return cpu + (" (AVX2 only)" if flags and "avx2" in flags and "avx512f" not in flags else "")


# The step-time A/B studies (experiments/bench_step_ab.sh), oldest first, and the change each measured.
STEP_TIME_AB = (("bench_step_ab_avx2_gptmini.json", "copying a large transposed A into row order before its GEMM"),
                ("bench_step_ab_avx2_padb.json", "copying B to longer rows before a transposed-A product"))


def _finding_step_time(results):
    docs = [d for d in (_load(results, n) for n in ("bench_step_t1.json", "bench_step_t2.json",
                                                    "bench_step_t1_intel.json", "bench_step_t2_intel.json",
                                                    "bench_step_t1_avx2.json", "bench_step_t2_avx2.json")) if d]
    if not docs:
        return _absent_line("Step time against PyTorch", "step-time.md")
    cpus = {_short_cpu(d) for d in docs}
    parts, slower = [], []
    for d in docs:
        rows = [r for r in d["results"] if r.get("ratio") is not None]
        if not rows:
            continue
        ratios = [r["ratio"] for r in rows]
        peer = d.get("peer") or {}
        gemms = [r["peer"].get("gemm_gflops") for r in rows if r["peer"].get("gemm_gflops")]
        g = d["ours_gemm_gflops"]
        cpu = _short_cpu(d) if len(cpus) > 1 else None  # named only where the runs are from more than one CPU
        span = "%.2fx on 1 model" % ratios[0] if len(rows) == 1 else "%.2f–%.2fx over %d models" % (
            min(ratios), max(ratios), len(rows))
        gspan = "%.0f" % min(gemms) if min(gemms) == max(gemms) else "%.0f–%.0f" % (min(gemms), max(gemms))
        parts.append("%s%d thread%s: %s (%s; peer GEMM %s GFLOP/s, ours %.0f)" % (
            cpu + ", " if cpu else "", d["threads"], "" if d["threads"] == 1 else "s", span,
            ", ".join("%s %.2fx" % (r["model"], r["ratio"]) for r in rows), gspan, max(g["start"], g["end"])))
        slower += ["%s at %d thread%s%s" % (r["model"], d["threads"], "" if d["threads"] == 1 else "s",
                                            " (%s)" % cpu if cpu else "")
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
    for name, what in STEP_TIME_AB:
        ab = _load(results, name)
        rows = [r for r in (ab or {}).get("summary", []) if r["before"].get("ratio") and r["after"].get("ratio")]
        if rows:
            text += " On the %s, after %s, in one sitting against the code before: %s." % (
                _short_cpu(ab), what, "; ".join(
                    "%s %.2fx PyTorch (before %.2fx; our step %.2fx of before)" % (
                        r["model"], r["after"]["ratio"], r["before"]["ratio"], r["ours_after_over_before"])
                    for r in rows))
    return text + " ([step time](%s))" % _rel("step-time.md")
