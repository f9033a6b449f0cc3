"""Layer sensitivity to stale gradients (/sensitivity/cosine[probe, layer, delay]): cosine vs delay and a heat map."""
import warnings

import h5py
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import cm, colors

from style import save

VARIANTS = {"": "fixed probe batch", "_minibatch": "training minibatch"}


def load_cosine(path, variant=""):
    """(mean cosine [layer, delay] over probes, delays, probe steps) or None if the run has no such probe."""
    with h5py.File(path, "r") as f:
        key = "sensitivity/cosine" + variant
        if key not in f or f[key].shape[0] == 0:
            return None
        cos = f[key][:]
        delays = f["sensitivity/delays" + variant][:]
        probes = f["sensitivity/probe_steps" + variant][:]
    with warnings.catch_warnings():  # a layer/delay never measured is all-NaN: keep it NaN, quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(cos, axis=0)
    return mean, delays, probes


def _who(run):
    """Run label with the model in front (sensitivity runs of a study usually share one policy)."""
    model = str(run.attrs.get("model", ""))
    return run.label if not model or model in run.label else f"{model}, {run.label}"


def _layer_labels(run, n):
    names = run.layer_names()
    return names if len(names) == n else [str(i) for i in range(n)]


def plot_cosine_vs_delay(run, out_dir, variant="", name=None):
    data = load_cosine(run.path, variant)
    if data is None:
        return None
    mean, delays, probes = data
    n_layers = mean.shape[0]
    labels = _layer_labels(run, n_layers)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    cmap = plt.get_cmap("viridis")
    norm = colors.Normalize(vmin=0, vmax=max(1, n_layers - 1))
    for l in range(n_layers):
        ax.plot(delays, mean[l], marker="o", ms=3, lw=1.2, color=cmap(norm(l)),
                label=labels[l] if n_layers <= 12 else None)
    ax.set_xscale("log", base=2)
    ax.set_xticks(delays)
    ax.set_xticklabels([str(d) for d in delays])
    ax.set_xlabel("delay d (steps)")
    ax.set_ylabel("cos(g_l(t0), g_l(t0 + d))")
    lo = np.nanmin(mean) if np.isfinite(mean).any() else 0.0
    ax.set_ylim(min(0.0, lo - 0.05), 1.02)
    ax.set_title(f"Gradient cosine vs delay per layer — {_who(run)}\n"
                 f"{VARIANTS[variant]}, mean of {len(probes)} probes")
    if n_layers <= 12:
        ax.legend(fontsize=8, ncol=2, loc="lower left")
    sm = cm.ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=ax, pad=0.02)
    cb.set_label("layer index (forward order: input → output)")
    return save(fig, out_dir, name or f"cosine{variant}_vs_delay")


def plot_cosine_heatmap(run, out_dir, variant="", name=None):
    data = load_cosine(run.path, variant)
    if data is None:
        return None
    mean, delays, probes = data
    n_layers = mean.shape[0]
    labels = _layer_labels(run, n_layers)
    height = min(16.0, max(4.0, 0.17 * n_layers + 1.8))
    fig, ax = plt.subplots(figsize=(7.0, height))
    im = ax.imshow(mean, aspect="auto", cmap="RdYlGn", vmin=min(0.0, float(np.nanmin(mean))), vmax=1.0,
                   interpolation="nearest")
    ax.set_xticks(range(len(delays)))
    ax.set_xticklabels([str(d) for d in delays])
    step = max(1, int(np.ceil(n_layers / 70)))  # at most ~70 names so they stay legible
    ax.set_yticks(range(0, n_layers, step))
    ax.set_yticklabels([f"{i}: {labels[i]}" if labels[i] != str(i) else str(i) for i in range(0, n_layers, step)],
                       fontsize=max(5, min(9, int(500 / max(n_layers, 1)))))
    ax.set_xlabel("delay d (steps)")
    ax.set_ylabel("layer (forward order)")
    ax.grid(False)
    if n_layers * len(delays) <= 240:
        for l in range(n_layers):
            for j in range(len(delays)):
                if np.isfinite(mean[l, j]):
                    ax.text(j, l, f"{mean[l, j]:.2f}", ha="center", va="center", fontsize=6, color="black")
    cb = fig.colorbar(im, ax=ax, pad=0.02)
    cb.set_label("cosine, mean over probes")
    ax.set_title(f"Layer × delay gradient cosine\n{_who(run)}\n{VARIANTS[variant]}, {len(probes)} probes", fontsize=9)
    return save(fig, out_dir, name or f"cosine{variant}_heatmap")


def plot_sensitivity(run, out_dir, suffix=""):
    """Both sensitivity figures for every probe variant the run holds; returns the PNG paths written."""
    out = []
    for variant in VARIANTS:
        for fn, base in ((plot_cosine_vs_delay, f"cosine{variant}_vs_delay"),
                         (plot_cosine_heatmap, f"cosine{variant}_heatmap")):
            p = fn(run, out_dir, variant, base + suffix)
            if p:
                out.append(p)
    return out
