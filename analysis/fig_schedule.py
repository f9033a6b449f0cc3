"""A DreamDDP schedule ({"H": H, "schedule": {layer: phase}, "fillin": {layer: [phases]}}) as a layers x phase grid."""
import json
import os

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from style import save


def load_schedule(path):
    with open(path) as f:
        data = json.load(f)
    if "H" not in data or "schedule" not in data:
        raise ValueError(f"{path}: a schedule needs keys 'H' and 'schedule' (layer -> phase)")
    return int(data["H"]), data["schedule"], data.get("fillin", {})


def forward_order(names, layer_order):
    """Schedule layers in forward order: LAYER_ORDER (e.g. /layers names of a run) when it covers them all,
    else the JSON object order (a JSON writer that sorts keys loses the model order, hence the first choice)."""
    if layer_order and set(names) <= set(layer_order):
        rank = {n: i for i, n in enumerate(layer_order)}
        return sorted(names, key=rank.__getitem__)
    return list(names)


def plot_schedule(path, out_dir, name="schedule", layer_order=None):
    h, sched, fillin = load_schedule(path)
    layers = forward_order(list(sched), layer_order)
    grid = np.zeros((len(layers), h))
    for i, layer in enumerate(layers):
        p = int(sched[layer])
        if not 0 <= p < h:
            raise ValueError(f"{path}: layer {layer} has phase {p} outside [0, {h})")
        grid[i, p] = 2
        for q in fillin.get(layer, []):
            if grid[i, int(q)] == 0:
                grid[i, int(q)] = 1
    n = len(layers)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * h + 5.0), min(18.0, max(4.0, 0.15 * n + 1.8))))
    cmap = ListedColormap(["white", "#9ecae1", "#08519c"])
    ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
    ax.set_xticks(range(h))
    ax.set_xticks(np.arange(-0.5, h, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, n, 1), minor=True)
    ax.grid(False)
    ax.grid(which="minor", color="lightgray", lw=0.4)
    ax.tick_params(which="minor", length=0)
    step = max(1, int(np.ceil(n / 70)))
    ax.set_yticks(range(0, n, step))
    ax.set_yticklabels([layers[i] for i in range(0, n, step)], fontsize=max(5, min(9, int(500 / max(n, 1)))))
    ax.set_xlabel("phase (step mod H)")
    ax.set_ylabel("layer (forward order)")
    counts = (grid == 2).sum(axis=0)
    ax.set_title(f"Schedule {os.path.splitext(os.path.basename(path))[0]}, H = {h}: phase at which each layer is "
                 f"averaged\n"
                 f"layers per phase: {' '.join(str(int(c)) for c in counts)}", fontsize=10)
    handles = [Patch(facecolor="#08519c", label="scheduled average")]
    if fillin:
        handles.append(Patch(facecolor="#9ecae1", label="fill-in average"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return save(fig, out_dir, name)
