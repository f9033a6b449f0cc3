#!/usr/bin/python3
"""HDF5 runs -> paper figures (PNG + PDF).

  make_figures.py RUNS_DIR                   every study under RUNS_DIR (runs/STUDY/RUN/metrics.h5) ->
                                             runs/STUDY/figures/ (also: `make_figures.py all RUNS_DIR`)
  make_figures.py sensitivity RUN.h5 [--out DIR]
  make_figures.py curves RUN.h5 [RUN.h5 ...] [--out DIR]
  make_figures.py timeline RUN.h5 [RUN.h5 ...] [--step N] [--out DIR]
  make_figures.py schedule SCHEDULE.json [--out DIR]
  make_figures.py throughput RESULTS.json [--out DIR]
  make_figures.py regime REGIME.json [--out DIR]     (experiments/regime_map.sh)

Formats: analysis/README.md. Needs only /usr/bin/python3 with numpy, h5py, matplotlib (Debian packages).
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fig_curves import plot_curves  # noqa: E402
from fig_regime import plot_regime  # noqa: E402
from fig_schedule import plot_schedule  # noqa: E402
from fig_sensitivity import plot_sensitivity  # noqa: E402
from fig_throughput import plot_throughput  # noqa: E402
from fig_timeline import plot_timeline  # noqa: E402
from runs import find_studies, label_runs, load_run  # noqa: E402

SUBCOMMANDS = ("all", "sensitivity", "curves", "timeline", "schedule", "throughput", "regime")


def _json_files(study, runs, pattern):
    """JSON files matching PATTERN in the study directory and in its run directories."""
    found = sorted(glob.glob(os.path.join(study, pattern)))
    for r in runs:
        found += sorted(glob.glob(os.path.join(r.dir, pattern)))
    return found


def _stem_suffix(path, base):
    """'' for BASE.json; otherwise the file stem without BASE, so gpt2_schedule.json draws schedule_gpt2."""
    stem = os.path.splitext(os.path.basename(path))[0]
    rest = stem.replace(base, "", 1).strip("_-.") if stem != base else ""
    return "_" + rest if rest else ""


def study_figures(study, paths):
    runs = []
    for p in paths:
        try:
            runs.append(load_run(p))
        except OSError as e:  # a file being replaced right now, or not HDF5: say so, keep going
            print(f"skipping {p}: {e}", file=sys.stderr)
    runs = label_runs(runs)
    out = os.path.join(study, "figures")
    written = []
    models = {str(r.attrs.get("model", "")) for r in runs}
    if len(models) <= 1:
        written += plot_curves(runs, out)
        t = plot_timeline(runs, out)
        written += [t] if t else []
    else:  # loss or accuracy of different models on one axis compares nothing: one set of curves per model
        for m in sorted(models):
            sub = [r for r in runs if str(r.attrs.get("model", "")) == m]
            written += plot_curves(sub, os.path.join(out, "by_model", m))
    with_sens = [r for r in runs if r.has("sensitivity/cosine") or r.has("sensitivity/cosine_minibatch")]
    for r in with_sens:
        written += plot_sensitivity(r, out, suffix="" if len(with_sens) == 1 else "_" + r.name)
    layer_order = next((r.layer_names() for r in runs if r.layer_names()), None)
    for s in _json_files(study, runs, "*schedule*.json"):
        written.append(plot_schedule(s, out, name="schedule" + _stem_suffix(s, "schedule"), layer_order=layer_order))
    for s in _json_files(study, runs, "*throughput*.json"):
        written.append(plot_throughput(s, out, name="throughput" + _stem_suffix(s, "throughput")))
    for s in sorted(glob.glob(os.path.join(study, "*regime*.json"))):
        written.append(plot_regime(s, out, name="regime_map" + _stem_suffix(s, "regime")))
    return [w for w in written if w]


def cmd_all(args):
    studies = find_studies(args.runs_dir)
    # A study of schedules or throughput results alone (no training run) still gets its figures.
    root = os.path.abspath(args.runs_dir)
    if root not in studies and any(glob.glob(os.path.join(root, p))
                                   for p in ("*schedule*.json", "*throughput*.json", "*regime*.json")):
        studies[root] = []
    if not studies:
        print(f"make_figures: no metrics.h5 under {args.runs_dir} (expected RUNS/STUDY/RUN/metrics.h5) and no "
              f"schedule/throughput JSON in it", file=sys.stderr)
        return 2
    for study, paths in studies.items():
        written = study_figures(study, paths)
        print(f"{study}: {len(paths)} run(s), {len(written)} figure(s) in {os.path.join(study, 'figures')}")
        for w in written:
            print("  " + os.path.relpath(w, os.path.join(study, "figures")))
    return 0


def _runs(paths):
    return label_runs([load_run(p) for p in paths])


def _default_out(path):
    return os.path.join(os.path.dirname(os.path.abspath(path)), "figures")


def main(argv):
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        argv = ["all"] + argv  # `make_figures.py RUNS_DIR`
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("all", help="every study under RUNS_DIR")
    a.add_argument("runs_dir")
    for name, many, extra in (("sensitivity", False, "metrics.h5 with /sensitivity"),
                              ("curves", True, "metrics.h5 files on the same axes"),
                              ("timeline", True, "metrics.h5 files, one panel each"),
                              ("schedule", False, "schedule JSON"),
                              ("throughput", False, "results JSON"),
                              ("regime", False, "regime.json of experiments/regime_map.sh")):
        p = sub.add_parser(name, help=extra)
        p.add_argument("inputs", nargs="+" if many else 1, help=extra)
        p.add_argument("--out", help="output folder (default: figures/ next to the first input)")
        if name == "schedule":
            p.add_argument("--layers-from", metavar="RUN.h5", help="take the forward layer order from this run's /layers")
        if name == "timeline":
            p.add_argument("--step", type=int, help="step to draw (default: a representative one)")
    args = ap.parse_args(argv)
    if args.cmd == "all":
        return cmd_all(args)
    for p in args.inputs:
        if not os.path.isfile(p):
            print(f"make_figures: {p}: no such file", file=sys.stderr)
            return 2
    out = args.out or _default_out(args.inputs[0])
    if args.cmd == "sensitivity":
        written = plot_sensitivity(_runs(args.inputs)[0], out)
    elif args.cmd == "curves":
        written = plot_curves(_runs(args.inputs), out)
    elif args.cmd == "timeline":
        written = [plot_timeline(_runs(args.inputs), out, step=args.step)]
    elif args.cmd == "schedule":
        order = load_run(args.layers_from).layer_names() if args.layers_from else None
        written = [plot_schedule(args.inputs[0], out, layer_order=order)]
    elif args.cmd == "regime":
        written = [plot_regime(args.inputs[0], out)]
    else:
        written = [plot_throughput(args.inputs[0], out)]
    written = [w for w in written if w]
    if not written:
        print(f"make_figures {args.cmd}: nothing to plot in {' '.join(args.inputs)}", file=sys.stderr)
        return 1
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
