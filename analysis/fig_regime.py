"""The regime map figure (experiments/regime_map.sh -> regime.json): per world size, samples/s of every policy and
of the PyTorch peer against the measured communication/backward ratio C/B of each cell (log x), with the modelled
value of each of our policies as a hollow marker; below it, dreamddp:h=H over the best of Local SGD and PLSGD.
"""
import json

import matplotlib.ticker

from style import RUN_COLOURS, plt, save

OURS = ("ddp", "localsgd", "plsgd", "dreamddp", "dreamddp0", "delay")


def _key(row):
    c = row["config"]
    if c.startswith("dreamddp") and "fillin=0" in c:
        return "dreamddp0"
    if c.startswith("dreamddp") and "delay=" in c:
        return "delay"
    return c.split(":")[0]


LABEL = {"ddp": "ddp", "localsgd": "localsgd:k=H", "plsgd": "plsgd:h=H", "dreamddp": "dreamddp:h=H",
         "dreamddp0": "dreamddp:h=H,fillin=0", "delay": "dreamddp:h=H,delay=T",
         "partial": "torch partial (our phases)"}


def plot_regime(path, out_dir, name="regime_map"):
    doc = json.load(open(path))
    cells = doc["cells"]
    if not cells:
        return None
    H = doc.get("H", 8)
    groups = sorted({(c["model"], c["ranks"]) for c in cells})
    fig, axes = plt.subplots(2, len(groups), figsize=(5.2 * len(groups), 7.2), squeeze=False,
                             gridspec_kw={"height_ratios": [2.2, 1]})
    for gi, (model, ranks) in enumerate(groups):
        cs = sorted([c for c in cells if c["model"] == model and c["ranks"] == ranks],
                    key=lambda c: c["comm_over_backward"])
        ax, bx = axes[0][gi], axes[1][gi]
        xs = [c["comm_over_backward"] for c in cs]
        for i, k in enumerate(OURS + ("partial",)):
            for system in ("ours", "torch"):
                if system == "torch" and k not in ("ddp", "localsgd", "partial"):
                    continue
                if system == "ours" and k == "partial":
                    continue
                pts, mod = [], []
                for c in cs:
                    row = next((r for r in c["rows"] if r["system"] == system and _key(r) == k), None)
                    if not row or not row["samples_per_s"] or (system == "torch" and not row["peer_ok"]):
                        continue
                    pts.append((c["comm_over_backward"], row["samples_per_s"]))
                    if row.get("modelled_step_ms"):
                        batch = row["samples_per_s"] * row["step_ms"] / 1e3  # samples per step, all ranks
                        mod.append((c["comm_over_backward"], batch / (row["modelled_step_ms"] / 1e3)))
                if not pts:
                    continue
                colour = RUN_COLOURS[i % len(RUN_COLOURS)]
                style = "-o" if system == "ours" else ":s"
                label = ("" if system == "ours" else "torch ") + LABEL[k] if k != "partial" else LABEL[k]
                ax.plot(*zip(*pts), style, color=colour, label=label, ms=4)
                if mod:
                    ax.plot(*zip(*mod), "o", mfc="none", color=colour, ms=7, alpha=0.7)
        for c in cs:
            bx.annotate(c["rate"], (c["comm_over_backward"], 1.0), fontsize=7, rotation=90, va="bottom",
                        ha="center", alpha=0.6, xytext=(0, 4), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylabel("samples/s (all ranks)")
        ax.set_title("%s, %d ranks: measured (filled) and modelled (hollow)" % (model, ranks), fontsize=9)
        ax.legend(fontsize=7, loc="lower left")
        r = [(c["comm_over_backward"], c["verdict"]["dreamddp_vs_best_baseline"]) for c in cs
             if c["verdict"]["dreamddp_vs_best_baseline"]]
        r0 = [(c["comm_over_backward"], c["verdict"]["dreamddp_fillin0_vs_best_baseline"]) for c in cs
              if c["verdict"]["dreamddp_fillin0_vs_best_baseline"]]
        if r:
            bx.plot(*zip(*r), "-o", color=RUN_COLOURS[3], label="dreamddp:h=%d" % H, ms=4)
        if r0:
            bx.plot(*zip(*r0), "--o", color=RUN_COLOURS[4], label="dreamddp:h=%d,fillin=0" % H, ms=4)
        rd = [(c["comm_over_backward"], c["verdict"].get("dreamddp_delay_vs_localsgd")) for c in cs
              if c["verdict"].get("dreamddp_delay_vs_localsgd")]
        if rd:
            bx.plot(*zip(*rd), ":^", color=RUN_COLOURS[5], label="dreamddp delay=T / localsgd", ms=4)
        bx.axhline(1.0, color="k", lw=0.8)
        bx.axhline(0.98, color="k", lw=0.6, ls=":")
        bx.set_xscale("log")
        bx.set_xlabel("measured communication / backward (C/B of the cell's profile)")
        bx.set_ylabel("/ best of localsgd, plsgd")
        bx.legend(fontsize=7)
        if xs:
            for a in (ax, bx):
                a.set_xlim(min(xs) / 1.5, max(xs) * 1.5)
    for a in axes.flat:
        a.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    fig.suptitle("Regime map, %s" % doc["machine"]["date"], fontsize=10)
    return save(fig, out_dir, name)
