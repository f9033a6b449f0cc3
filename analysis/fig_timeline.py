"""Overlap timeline of one step: per-layer backward (/layer_ready) and every collective (/sync_events) on its
own row, x = ms since the step's backward start; one panel per run of the study."""
import h5py
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors
from matplotlib.patches import Patch

from style import save

ACTION_COLOURS = {"allreduce_grads": "tab:orange", "average_params": "tab:blue", "control": "tab:gray",
                  "broadcast": "tab:purple", "none": "lightgray"}
MAX_ROWS = 40  # more collectives than this are summarized, not drawn one per row


def fmt_bytes(n):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def action_names(run):
    """code -> name from the HDF5 enum stored with /sync_events.action."""
    with h5py.File(run.path, "r") as f:
        mapping = h5py.check_enum_dtype(f["sync_events"].dtype["action"]) or {}
    return {v: k for k, v in mapping.items()}


def choose_step(ready, sync, steps):
    """A representative step: one with per-layer ready times and the most collectives (latest on ties)."""
    ready_steps = set(np.unique(ready["step"]).tolist()) if len(ready) else set()
    counts = {}
    for s in sync["step"].tolist() if len(sync) else []:
        counts[s] = counts.get(s, 0) + 1
    both = [s for s in counts if s in ready_steps]
    pool = both or list(counts) or sorted(ready_steps) or (steps["step"].tolist() if len(steps) else [])
    if not pool:
        return None
    # The first step is not representative (first touch of buffers, one-off syncs such as dreamddp's initial
    # all-reduce): use it only when nothing else was logged.
    first = min(steps["step"].tolist()) if len(steps) else min(pool)
    pool = [s for s in pool if s != first] or pool
    return max(pool, key=lambda s: (counts.get(s, 0), s))


def _panel(ax, run, step, ready, sync, steps, names):
    ready = ready[(ready["step"] == step)] if len(ready) else ready
    if len(ready) and "rank" in ready.dtype.names:
        ready = ready[ready["rank"] == ready["rank"].min()]
    sync = sync[sync["step"] == step] if len(sync) else sync
    if len(sync):
        sync = sync[sync["rank"] == sync["rank"].min()]
        sync = sync[np.argsort(sync["launch_s"], kind="stable")]
    row = steps[steps["step"] == step] if len(steps) else steps

    # Backward row: layer l occupies [ready of the layer finished just before it, ready_l].
    if len(ready):
        order = np.argsort(ready["ready_s"], kind="stable")
        t_ready = ready["ready_s"][order] * 1e3
        layers = ready["layer"][order]
        starts = np.concatenate([[0.0], t_ready[:-1]])
        norm = colors.Normalize(vmin=0, vmax=max(1, int(layers.max())))
        cmap = plt.get_cmap("viridis")
        ax.barh(0, t_ready - starts, left=starts, height=0.7, color=cmap(norm(layers)), edgecolor="white",
                linewidth=0.4)
        backward_end = float(t_ready[-1])
        backward_label = f"backward\nL{int(layers[0])}→L{int(layers[-1])}"
    elif len(row):
        backward_end = float(row["backward_ms"][0])
        ax.barh(0, backward_end, left=0, height=0.7, color="tab:green", alpha=0.6)
        # Left-aligned at the end of the bar so a short backward does not push the note over the row label.
        ax.text(backward_end * 1.02, 0, " per-layer times not logged for this step", ha="left", va="center",
                fontsize=7, color="0.3")
        backward_label = "backward"
    else:
        backward_end, backward_label = 0.0, "backward"

    shown = sync[:MAX_ROWS]
    for k, e in enumerate(shown):
        name = names.get(int(e["action"]), str(e["action"]))
        x0, x1 = e["launch_s"] * 1e3, e["end_s"] * 1e3
        ax.barh(k + 1, max(x1 - x0, 1e-3), left=x0, height=0.7, color=ACTION_COLOURS.get(name, "black"))
        span = f"L{e['first_layer']}" if e["first_layer"] == e["last_layer"] else \
            f"L{e['first_layer']}–{e['last_layer']}"
        ax.text(x1, k + 1, f" {span} · {fmt_bytes(e['bytes'])}", va="center", fontsize=6.5)
    comm_end = float(sync["end_s"].max() * 1e3) if len(sync) else backward_end
    ax.axvline(backward_end, color="black", ls="--", lw=1)
    if comm_end > backward_end:
        ax.axvspan(backward_end, comm_end, color="red", alpha=0.08, lw=0)
    labels = [backward_label] + [f"#{k}" for k in range(len(shown))]
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7 if len(labels) < 25 else 5)
    ax.set_ylim(len(labels) - 0.4, -0.8)
    ax.grid(axis="y", visible=False)
    exposed = f", exposed comm {row['exposed_comm_ms'][0]:.1f} ms" if len(row) else ""
    more = f" (first {MAX_ROWS} of {len(sync)} collectives)" if len(sync) > MAX_ROWS else \
        "" if len(sync) else " (no collective logged in this step)"
    ax.set_title(f"{run.label} — step {step}: backward {backward_end:.1f} ms{exposed}{more}", fontsize=9, loc="left")
    return max(comm_end, backward_end)


def plot_timeline(runs, out_dir, step=None, name="overlap_timeline"):
    panels = []
    for run in runs:
        ready, sync, steps = run.table("layer_ready"), run.table("sync_events"), run.table("steps")
        s = step if step is not None else choose_step(ready, sync, steps)
        if s is None:
            continue
        n = len(sync[sync["step"] == s]) if len(sync) else 0
        panels.append((run, s, ready, sync, steps, min(n, MAX_ROWS) + 1))
    if not panels:
        return None
    heights = [max(2, p[5]) for p in panels]
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(9, min(22, 1.6 + 0.28 * sum(heights) + 0.6 * len(panels))),
                             gridspec_kw={"height_ratios": heights})
    xmax = 0.0
    for ax, (run, s, ready, sync, steps, _) in zip(axes[:, 0], panels):
        xmax = max(xmax, _panel(ax, run, s, ready, sync, steps, action_names(run)))
    axes[-1, 0].set_xlim(0, xmax * 1.18)  # room for the labels right of the last bar
    axes[-1, 0].set_xlabel("time since backward start (ms)")
    legend = [Patch(color=c, label=a) for a, c in ACTION_COLOURS.items() if a != "none"]
    legend += [Patch(color="red", alpha=0.15, label="after backward (exposed if waited on)")]
    # Title and legend sit in a fixed band (in inches) above the panels, where they cannot hide a bar.
    h_in = fig.get_figheight()
    fig.suptitle("Overlap of communication with backward (dashed line: backward ends)", fontsize=10,
                 y=1 - 0.08 / h_in, va="top")
    fig.legend(handles=legend, fontsize=7, loc="upper center", ncol=len(legend), bbox_to_anchor=(0.5, 1 - 0.34 / h_in))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / h_in))
    return save(fig, out_dir, name, tight=False)
