"""Loading metrics.h5 runs (schema: analysis/README.md) and grouping them into studies."""
import os
from dataclasses import dataclass, field

import h5py
import numpy as np


def _plain(v):
    """h5py attribute value -> plain Python (str, int, float, list)."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass
class Run:
    path: str                      # .../metrics.h5
    attrs: dict = field(default_factory=dict)
    label: str = ""

    @property
    def dir(self):
        return os.path.dirname(os.path.abspath(self.path))

    @property
    def name(self):
        return os.path.basename(self.dir)

    @property
    def policy(self):
        return str(self.attrs.get("policy", self.name))

    def table(self, name):
        """The whole table as a numpy structured array (empty array if the table is absent)."""
        with h5py.File(self.path, "r") as f:
            if name not in f:
                return np.zeros(0)
            return f[name][:]

    def layer_names(self):
        layers = self.table("layers")
        if len(layers) == 0:
            return []
        return [n.decode() if isinstance(n, bytes) else str(n) for n in layers["name"]]

    def has(self, name):
        with h5py.File(self.path, "r") as f:
            return name in f and f[name].shape[0] > 0


def load_run(path):
    with h5py.File(path, "r") as f:
        attrs = {k: _plain(v) for k, v in f.attrs.items()}
    return Run(path=path, attrs=attrs)


def label_runs(runs):
    """Labels runs by policy; runs of a study that share a policy get their directory name appended."""
    counts = {}
    for r in runs:
        counts[r.policy] = counts.get(r.policy, 0) + 1
    for r in runs:
        r.label = r.policy if counts[r.policy] == 1 else f"{r.policy} ({r.name})"
    return runs


def find_studies(root):
    """{study_dir: [metrics.h5 paths]} for every metrics.h5 under ROOT.

    A study is the parent of a run directory (runs/STUDY/RUN/metrics.h5), but never above ROOT itself, so
    pointing at a single run directory puts its figures in RUN/figures.
    """
    root = os.path.abspath(root)
    studies = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "figures")
        if "metrics.h5" not in filenames:
            continue
        run_dir = os.path.abspath(dirpath)
        study = run_dir if run_dir == root else os.path.dirname(run_dir)
        studies.setdefault(study, []).append(os.path.join(run_dir, "metrics.h5"))
    return {s: sorted(p) for s, p in sorted(studies.items())}


def samples_axis(run, steps):
    """Samples seen by the end of each step: (step+1)·batch·world from the root attributes, else the
    integral of samples_per_s over wall time."""
    batch, world = run.attrs.get("batch"), run.attrs.get("world")
    if batch and world:
        return (steps["step"].astype(np.float64) + 1) * float(batch) * float(world)
    dt = np.diff(np.concatenate([[0.0], steps["wall_time_s"]]))
    return np.cumsum(steps["samples_per_s"] * dt)
