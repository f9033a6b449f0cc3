"""The summary experiments/sim_studies.py prints after its studies: one table per results file it wrote."""
import json
import os

from sim_run import BATCH, STEADY


def _load(results, name):
    p = os.path.join(results, f"simulate_{name}.json")
    return json.load(open(p))["rows"] if os.path.exists(p) else []


def report(results):
    """Markdown tables of the studies' JSON (printed; simulate.md embeds them)."""
    out = []
    rows = _load(results, "artifact")
    if rows:
        out.append("| profile | policy | simulated s/iter (GPT-2 bytes on the named link) | modelled s/iter "
                   "(`schedule --h 10 --fillin`) | sim/model | exposed comm | simulated on the profile's c_l |")
        out.append("|---|---|---|---|---|---|---|")
        cl = {(r["profile"], r["policy"]): r for r in rows if r["bandwidth"] == "profile c_l"}
        for r in rows:
            if r["bandwidth"] == "profile c_l":
                continue
            c = cl.get((r["profile"], r["policy"]))
            out.append(f"| {r['profile']} | {r['policy']} | {r['simulated_s']:.4f} | {r['modelled_s']:.4f} | "
                       f"{r['simulated_s'] / r['modelled_s']:.2f} | {100 * r['exposed_comm_fraction']:.1f}% | "
                       + (f"{c['simulated_s']:.4f} |" if c else "— |"))
        out.append("")
        out.append("| profile | simulated speed-up of dreamddp:h=10 (self-profiled) over ddp / localsgd / plsgd | "
                   "modelled (`schedule`) over ddp / localsgd / plsgd |")
        out.append("|---|---|---|")
        for prof in sorted({r["profile"] for r in rows}):
            sim = {r["policy"]: r["simulated_s"] for r in rows if r["profile"] == prof and r["bandwidth"] != "profile c_l"}
            mod = {r["policy"]: r["modelled_s"] for r in rows if r["profile"] == prof and r["bandwidth"] != "profile c_l"}
            d, m = sim["dreamddp:h=10"], mod["dreamddp:h=10"]
            out.append(f"| {prof} | {sim['ddp'] / d:.2f}x / {sim['localsgd:k=10'] / d:.2f}x / {sim['plsgd:h=10'] / d:.2f}x"
                       f" | {mod['ddp'] / m:.2f}x / {mod['localsgd:k=10'] / m:.2f}x / {mod['plsgd:h=10'] / m:.2f}x |")
        out.append("")
    for study, what in (("scaling", f"GPT-2 profile gpt2_16_1gbit's backward times, GPT-2 small bytes, batch {BATCH}/rank"),
                        ("scaling_gptmini", "gpt-mini, backward measured here, batch 64/rank")):
        rows = _load(results, study)
        if not rows:
            continue
        pols = list(dict.fromkeys(r["policy"] for r in rows))
        for bw, lat in dict.fromkeys((r["bandwidth"], r.get("lat", "0us")) for r in rows):
            out.append(f"Scaling at {bw}, latency {lat} between nodes ({what}): samples/s (exposed comm fraction)")
            out.append("")
            out.append("| ranks | " + " | ".join(pols) + " |")
            out.append("|---" * (len(pols) + 1) + "|")
            for n in sorted({r["world"] for r in rows}):
                cells = []
                for p in pols:
                    r = next((r for r in rows if r["world"] == n and r["bandwidth"] == bw and r["policy"] == p
                              and r.get("lat", "0us") == lat), None)
                    cells.append(f"{r['samples_per_s']:.1f} ({100 * r['exposed_comm_fraction']:.0f}%)" if r else "—")
                out.append(f"| {n} | " + " | ".join(cells) + " |")
            out.append("")
    rows = _load(results, "hier")
    if rows:
        out.append(f"Two-level cluster {rows[0]['cluster']} (128 ranks), steady state (steps >= {STEADY}):")
        out.append("")
        out.append("| policy | s/step | samples/s | exposed comm | vs dreamddp:h=8 |")
        out.append("|---|---|---|---|---|")
        base = next(r for r in rows if r["policy"] == "dreamddp:h=8")["step_s"]
        for r in rows:
            out.append(f"| {r['policy']} | {r['step_s']:.4f} | {r['samples_per_s']:.1f} | "
                       f"{100 * r['exposed_comm_fraction']:.1f}% | {base / r['step_s']:.2f}x |")
        out.append("")
    rows = _load(results, "stragglers")
    if rows:
        out.append("Stragglers, 16 ranks (forward 44 ms, backward 88.8 ms, update 10 ms per step), rank 5's compute "
                   "x1.5:")
        out.append("")
        out.append("| bandwidth | policy | s/step, no straggler | s/step, straggler | slow-down | exposed comm "
                   "(straggler) |")
        out.append("|---|---|---|---|---|---|")
        for bw in dict.fromkeys(r["bandwidth"] for r in rows):
            for p in dict.fromkeys(r["policy"] for r in rows):
                a = next(r for r in rows if r["bandwidth"] == bw and r["policy"] == p and r["straggler"] == "none")
                b = next(r for r in rows if r["bandwidth"] == bw and r["policy"] == p and r["straggler"] != "none")
                out.append(f"| {bw} | {p} | {a['step_s']:.4f} | {b['step_s']:.4f} | {b['step_s'] / a['step_s']:.3f}x | "
                           f"{100 * b['exposed_comm_fraction']:.1f}% |")
        out.append("")
    return "\n".join(out)
