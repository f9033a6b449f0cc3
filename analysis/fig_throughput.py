"""Throughput bars, ours vs the peer, from a results JSON: [{system, policy, network, samples_per_s}, ...]."""
import json

import matplotlib.pyplot as plt
import numpy as np

from style import save


def load_results(path):
    """The results list; a {"results": [...]} wrapper is accepted too. Validates the four keys."""
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("results", [])
    for i, e in enumerate(data):
        missing = {"system", "policy", "network", "samples_per_s"} - set(e)
        if missing:
            raise ValueError(f"{path}: entry {i} lacks {sorted(missing)}")
    return data


def plot_throughput(results_path, out_dir, name="throughput"):
    data = load_results(results_path)
    if not data:
        return None
    networks = list(dict.fromkeys(e["network"] for e in data))
    series = list(dict.fromkeys((e["system"], e["policy"]) for e in data))
    systems = list(dict.fromkeys(s for s, _ in series))
    value = {(e["system"], e["policy"], e["network"]): float(e["samples_per_s"]) for e in data}

    fig, ax = plt.subplots(figsize=(max(8.0, 0.6 * len(networks) * len(series) + 4.5), 4.8))
    width = 0.8 / len(series)
    x = np.arange(len(networks))
    # Colour by policy (same policy = same colour across systems), hatch by system (ours plain, peers hatched).
    policies = list(dict.fromkeys(p for _, p in series))
    pal = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    hatches = ["", "//", "..", "xx"]
    for k, (system, policy) in enumerate(series):
        ys = [value.get((system, policy, n), np.nan) for n in networks]
        bars = ax.bar(x - 0.4 + width * (k + 0.5), ys, width * 0.95, color=pal[policies.index(policy) % len(pal)],
                      hatch=hatches[systems.index(system) % len(hatches)], edgecolor="black", linewidth=0.5,
                      label=f"{system} · {policy}")
        for b, y in zip(bars, ys):
            if np.isfinite(y):
                ax.annotate(f"{y:.0f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                            fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x)
    ax.set_xticklabels(networks)
    ax.set_xlabel("network")
    ax.set_ylabel("throughput (samples/s, all ranks)")
    ax.set_title("Training throughput: " + " vs ".join(systems))
    ax.grid(axis="x", visible=False)
    ax.set_ylim(0, np.nanmax(list(value.values())) * 1.15)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="system · policy",
              title_fontsize=8)
    return save(fig, out_dir, name)
