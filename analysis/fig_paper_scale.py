"""The paper's comparison at its scale, in simulation: seconds per iteration of S-SGD, Local SGD, PLSGD and DreamDDP
at 8, 16 and 32 workers, one panel per model and link, from experiments/results/simulate_paper_scale.json
(`experiments/sim_studies.sh --study paper_scale`). Bars: simulated; black ticks: the time model on the same
inputs; red diamonds: the artifact's own scheduler, at the worker count its profile was measured with. Above each
DreamDDP bar, its simulated speed-up over the faster of Local SGD and PLSGD. The axis is linear from 0 and cut
a little above the local policies: S-SGD's bars are clipped and labelled with their value.

  /usr/bin/python3 analysis/fig_paper_scale.py [--results experiments/results/simulate_paper_scale.json]
                                               [--out-dir docs/figures]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from style import plt, save  # noqa: E402

POLICIES = (("ddp", "S-SGD"), ("localsgd", "Local SGD"), ("plsgd", "PLSGD"), ("dreamddp", "DreamDDP"))
COLOURS = ("#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(REPO, "experiments", "results", "simulate_paper_scale.json"))
    ap.add_argument("--out-dir", default=os.path.join(REPO, "docs", "figures"))
    a = ap.parse_args(argv)
    try:
        rows = json.load(open(a.results))["rows"]
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("fig_paper_scale: error: %s: %s\n" % (a.results, e))
        return 2
    panels = list(dict.fromkeys((r["model"], r["bandwidth"]) for r in rows))
    workers = sorted({r["world"] for r in rows})
    by = {(r["model"], r["bandwidth"], r["world"], r["policy"].split(":")[0]): r for r in rows}
    cols = 2
    fig, axes = plt.subplots((len(panels) + cols - 1) // cols, cols, figsize=(10, 3.6 * ((len(panels) + 1) // 2)),
                             squeeze=False)
    width = 0.8 / len(POLICIES)
    for ax, (model, bw) in zip(axes.flat, panels):
        for i, ((key, label), colour) in enumerate(zip(POLICIES, COLOURS)):
            xs, sim, mod, art_x, art = [], [], [], [], []
            for j, n in enumerate(workers):
                r = by.get((model, bw, n, key))
                if not r:
                    continue
                x = j + (i - (len(POLICIES) - 1) / 2) * width
                xs.append(x)
                sim.append(r["simulated_s"])
                mod.append(r["modelled_s"])
                if r.get("artifact_scheduler_s"):
                    art_x.append(x)
                    art.append(r["artifact_scheduler_s"])
            ax.bar(xs, sim, width * 0.92, color=colour, label=label)
            ax.scatter(xs, mod, marker="_", s=140, color="black", linewidths=1.6, zorder=3,
                       label="time model" if i == 0 else None)
            if art:
                ax.scatter(art_x, art, marker="D", s=18, color="#d62728", zorder=4,
                           label="artifact's scheduler" if key == "ddp" else None)
        for j, n in enumerate(workers):
            d = by.get((model, bw, n, "dreamddp"))
            base = [by[(model, bw, n, k)]["simulated_s"] for k in ("localsgd", "plsgd") if (model, bw, n, k) in by]
            if d and base:
                x = j + (len(POLICIES) - 1) / 2 * width
                ax.annotate("%.2fx" % (min(base) / d["simulated_s"]), (x, d["simulated_s"]), textcoords="offset points",
                            xytext=(0, 8), ha="center", fontsize=8)
        # A linear axis from 0, up to a little above the slowest local policy: S-SGD, many times slower, is clipped
        # and labelled with its value.
        top = 1.3 * max(by[(model, bw, n, k)]["simulated_s"] for n in workers for k in ("localsgd", "plsgd")
                        if (model, bw, n, k) in by)
        ax.set_ylim(0, top)
        for j, n in enumerate(workers):
            r = by.get((model, bw, n, "ddp"))
            if r and r["simulated_s"] > top:
                x = j - (len(POLICIES) - 1) / 2 * width
                ax.annotate("%.2f s" % r["simulated_s"], (x, top), textcoords="offset points", xytext=(0, -10),
                            ha="center", fontsize=7, rotation=90, va="top", color="white")
        ax.set_xticks(range(len(workers)))
        ax.set_xticklabels([str(n) for n in workers])
        ax.set_xlabel("workers")
        ax.set_ylabel("s / iteration")
        ax.set_title("%s, %s" % (model, bw.replace("Gbps", " Gbit/s")))
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    h, l = axes.flat[0].get_legend_handles_labels()
    fig.legend(h, l, loc="upper center", ncol=6, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    print(save(fig, a.out_dir, "paper_scale", tight=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
