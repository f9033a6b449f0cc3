"""Convergence curves of the runs of one study: training loss and test accuracy vs wall time and vs samples."""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import EngFormatter

from runs import samples_axis
from style import RUN_COLOURS, save


def _smooth(y, window):
    """Trailing moving average (same length): the raw loss is noisy per step."""
    if window <= 1 or len(y) < 2:
        return y
    c = np.cumsum(np.insert(np.asarray(y, dtype=np.float64), 0, 0.0))
    out = np.empty(len(y))
    for i in range(len(y)):
        lo = max(0, i + 1 - window)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


def _eval_metric(runs):
    """'test_accuracy' if any run has one, else 'perplexity', else 'test_loss' (column, axis label, file stem)."""
    evals = [r.table("eval") for r in runs]
    for col, label, stem in (("test_accuracy", "test accuracy (%)", "accuracy"),
                             ("perplexity", "test perplexity", "perplexity"),
                             ("test_loss", "test loss", "test_loss")):
        if any(len(e) and np.isfinite(e[col]).any() for e in evals):
            return col, label, stem
    return None


def _x(run, steps, axis):
    if axis == "time":
        return steps["wall_time_s"]
    return samples_axis(run, steps)


def _setup(ax, axis):
    if axis == "time":
        ax.set_xlabel("wall time (s)")
    else:
        ax.set_xlabel("training samples (all ranks)")
        ax.xaxis.set_major_formatter(EngFormatter())


def plot_loss(runs, out_dir, axis):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for i, run in enumerate(runs):
        steps = run.table("steps")
        if len(steps) == 0:
            continue
        x, y = _x(run, steps, axis), steps["loss"]
        c = RUN_COLOURS[i % len(RUN_COLOURS)]
        ax.plot(x, y, color=c, alpha=0.2, lw=0.8)
        ax.plot(x, _smooth(y, max(1, len(y) // 40)), color=c, lw=1.8, label=run.label)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    _setup(ax, axis)
    ax.set_ylabel("training loss (moving average; raw faint)")
    what = "wall time" if axis == "time" else "samples"
    ax.set_title(f"Training loss vs {what}")
    ax.legend()
    return save(fig, out_dir, f"loss_vs_{axis if axis == 'time' else 'samples'}")


def plot_eval(runs, out_dir, axis):
    metric = _eval_metric(runs)
    if metric is None:
        return None
    col, ylabel, stem = metric
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, run in enumerate(runs):
        ev, steps = run.table("eval"), run.table("steps")
        if len(ev) == 0 or len(steps) == 0 or not np.isfinite(ev[col]).any():
            continue
        # Eval rows carry only the step; place them on the run's time/sample axis via the /steps table.
        x = np.interp(ev["step"], steps["step"], _x(run, steps, axis))
        y = ev[col] * (100.0 if col == "test_accuracy" else 1.0)
        ax.plot(x, y, marker="o", ms=3.5, lw=1.6, color=RUN_COLOURS[i % len(RUN_COLOURS)], label=run.label)
    _setup(ax, axis)
    ax.set_ylabel(ylabel)
    what = "wall time" if axis == "time" else "samples"
    ax.set_title(f"{ylabel[0].upper() + ylabel[1:].split(' (')[0]} vs {what}")
    ax.legend()
    return save(fig, out_dir, f"{stem}_vs_{'time' if axis == 'time' else 'samples'}")


def plot_curves(runs, out_dir):
    out = []
    for axis in ("time", "samples"):
        for fn in (plot_loss, plot_eval):
            p = fn(runs, out_dir, axis)
            if p:
                out.append(p)
    return out
