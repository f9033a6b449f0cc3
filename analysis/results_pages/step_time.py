"""docs/results/step-time.md: step time of the benchmarks, backward shares and peak memory."""
import os
from .common import _absent, _f, _load, _prov


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
