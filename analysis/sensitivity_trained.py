#!/usr/bin/python3
"""The sensitivity claims on models trained to their plateau, judged at the start, 10%, 50% and the end of training.

    analysis/sensitivity_trained.py RUN_DIR... [--save FILE]

Each RUN_DIR is one `experiments/sensitivity.sh` output folder (its OUT: run_log.txt, sensitivity.json and one
<model>-fixed/ run with metrics.h5 and summary.json), trained long enough to reach its plateau. For every run the
probes nearest to 0%, 10%, 50% and 100% of its steps are taken, and at each of them the claims are judged on that
probe's cosines cos(g_l(t0), g_l(t0+d)):

  depth     deeper layers turn faster: Spearman's rank correlation between a layer's depth (forward order) and its
            cosine at delay 8 is at most -0.5;
  b         the last layer (resnet20's fc, a language model's head) is below 0.6 at delay 2;
  a         an early block (the stem or a block of the first stage) is above 0.85 at delay 8 (ResNets);
  c         the embedding stays smooth (above 0.85 at delay 4) while the head turns at delay 1 (below 0.6)
            (language models with a head of their own).

The table goes to stdout; --save writes it as JSON with the provenance of the runs (their commands, machine, load
and commit, from each run's sensitivity.json) for analysis/render_results.py.
"""
import argparse
import json
import os
import re
import sys
import warnings

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "experiments", "lib"))
import provenance  # noqa: E402

FRACTIONS = (("start", 0.0), ("10%", 0.1), ("50%", 0.5), ("end", 1.0))


def spearman(x, y):
    """Spearman's rho of two equal-length sequences (average ranks for ties); None when undefined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3:
        return None

    def ranks(v):
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for val in np.unique(v):  # ties share their mean rank
            idx = v == val
            r[idx] = r[idx].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def mean_of(cos_probe, idx, j):
    """Mean cosine of the layers idx at delay index j in one probe's [layer, delay] array (None if unmeasured)."""
    if not idx:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        v = float(np.nanmean(cos_probe[idx, j]))
    return v if np.isfinite(v) else None


def early_blocks(names):
    """The stem and each block of the first stage (ResNets): name -> layers ({} for a model without them)."""
    out = {"stem": [i for i, n in enumerate(names) if n in ("conv1", "bn1")]}
    for i, n in enumerate(names):
        m = re.match(r"((?:stage1|layer1)\.\d+)\.", n)
        if m:
            out.setdefault(m.group(1), []).append(i)
    return {k: v for k, v in out.items() if v}


def judge(names, cos_probe, delays):
    """The claims at one probe: {claim: {"value": ..., "rests_on": {...}, "verdict": ...}}."""
    def at(d):
        return delays.index(d) if d in delays else None

    def verdict(ok):
        return "not measurable" if ok is None else ("holds" if ok else "does not hold")

    out = {}
    j8, j4, j2, j1 = at(8), at(4), at(2), at(1)
    c8 = [float(cos_probe[i, j8]) if j8 is not None else float("nan") for i in range(len(names))]
    rho = spearman(list(range(len(names))), c8)
    out["depth"] = {"value": rho, "rests_on": {"rho(depth, cos at d=8)": rho},
                    "verdict": verdict(None if rho is None else rho <= -0.5)}
    last = [i for i, n in enumerate(names) if n in ("fc", "head")]
    v = mean_of(cos_probe, last, j2) if j2 is not None else None
    out["b"] = {"value": v, "rests_on": {"%s at d=2" % (names[last[0]] if last else "last layer"): v},
                "verdict": verdict(None if v is None else v < 0.6)}
    early = early_blocks(names)
    if early and j8 is not None:
        cands = {k: mean_of(cos_probe, idx, j8) for k, idx in early.items()}
        known = {k: x for k, x in cands.items() if x is not None}
        best = max(known, key=known.get) if known else None
        out["a"] = {"value": known.get(best), "best": best,
                    "rests_on": {"%s at d=8" % k: x for k, x in cands.items()},
                    "verdict": verdict(None if best is None else known[best] > 0.85)}
    emb = [i for i, n in enumerate(names) if n in ("wte", "embed")]
    head = [i for i, n in enumerate(names) if n == "head"]
    if emb and head and j4 is not None and j1 is not None:
        ve, vh = mean_of(cos_probe, emb, j4), mean_of(cos_probe, head, j1)
        out["c"] = {"value": None, "rests_on": {"embedding at d=4": ve, "head at d=1": vh},
                    "verdict": verdict(None if ve is None or vh is None else (ve > 0.85 and vh < 0.6))}
    return out


def load_run(out_dir):
    """One sensitivity.sh folder -> (its fixed run's metrics and summary, the folder's provenance document)."""
    runs = [r for r in sorted(os.listdir(out_dir)) if r.endswith("-fixed")
            and os.path.isfile(os.path.join(out_dir, r, "metrics.h5"))]
    if len(runs) != 1:
        sys.exit("sensitivity_trained.py: %s: expected one <model>-fixed run with metrics.h5, found %d"
                 % (out_dir, len(runs)))
    run = os.path.join(out_dir, runs[0])
    with h5py.File(os.path.join(run, "metrics.h5"), "r") as f:
        model = f.attrs["model"]
        model = model.decode() if isinstance(model, bytes) else str(model)
        names = [n.decode() for n in f["layers"]["name"]]
        cos = f["sensitivity/cosine"][:]
        delays = [int(d) for d in f["sensitivity/delays"][:]]
        probes = [int(p) for p in f["sensitivity/probe_steps"][:]]
        lr = f["steps"]["lr"][:] if "steps" in f else None
    summary = json.load(open(os.path.join(run, "summary.json")))
    prov_path = os.path.join(out_dir, "sensitivity.json")
    prov = json.load(open(prov_path)) if os.path.isfile(prov_path) else {}
    return {"model": model, "names": names, "cos": cos, "delays": delays, "probes": probes, "lr": lr,
            "summary": summary}, prov


def study(out_dir):
    r, prov = load_run(out_dir)
    steps = int(r["summary"]["steps"])
    picks = []
    for label, frac in FRACTIONS:
        k = int(np.argmin([abs(p - frac * steps) for p in r["probes"]]))
        if any(p["probe"] == k for p in picks):
            continue
        cp = r["cos"][k]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_layers = [float(np.nanmean(cp[:, j])) for j in range(len(r["delays"]))]
        picks.append({"label": label, "probe": k, "step": r["probes"][k],
                      "lr": float(r["lr"][r["probes"][k]]) if r["lr"] is not None and len(r["lr"]) > r["probes"][k]
                      else None,
                      "mean_cosine": mean_layers, "claims": judge(r["names"], cp, r["delays"])})
    s = r["summary"]
    return {"model": r["model"], "steps": steps, "batch": s.get("batch"), "final_loss": s.get("final_loss"),
            "test_accuracy": s.get("test_accuracy"), "test_loss": s.get("test_loss"),
            "eval_samples": s.get("eval_samples"), "delays": r["delays"], "probe_steps": r["probes"],
            "layers": len(r["names"]), "probes": picks,
            "training": {"command": prov.get("command"), "machine": prov.get("machine")}}


def main(argv):
    ap = argparse.ArgumentParser(prog="sensitivity_trained.py", description="the sensitivity claims per probe")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="experiments/sensitivity.sh output folders")
    ap.add_argument("--save", metavar="FILE", help="also write the table as JSON with the runs' provenance")
    args = ap.parse_args(argv)
    for d in args.runs:
        if not os.path.isdir(d):
            ap.error("%s: no such run folder" % d)
    doc = {"study": "sensitivity_trained", "runs": [study(d) for d in args.runs]}
    for run in doc["runs"]:
        acc = run.get("test_accuracy")
        print("%s: %d steps x batch %s, final loss %.3f, test accuracy %s" % (
            run["model"], run["steps"], run["batch"], run["final_loss"], "-" if acc is None else "%.4f" % acc))
        for p in run["probes"]:
            verdicts = ", ".join("%s %s (%s)" % (k, c["verdict"], "-" if c["value"] is None else "%.3f" % c["value"])
                                 for k, c in p["claims"].items())
            print("  %-5s step %5d  mean cos %s  %s" % (p["label"], p["step"], " ".join(
                "%.3f" % v for v in p["mean_cosine"]), verdicts))
    if args.save:
        trainings = [r["training"] for r in doc["runs"]]
        machines = [t["machine"] for t in trainings if t.get("machine")]
        start = dict(machines[0]) if machines else provenance.start(os.path.join(HERE, ".."))
        doc["command"] = " && ".join([t["command"] for t in trainings if t.get("command")] +
                                     [provenance.shell_command(["analysis/sensitivity_trained.py"] + sys.argv[1:])])
        provenance.stamp(doc, doc["command"], start)
        if len(machines) > 1:  # the load at the end is the last run's
            doc["machine"]["load_1m_end"] = machines[-1].get("load_1m_end")
        provenance.write_json_atomic(args.save, provenance.repo_relative(doc, os.path.join(HERE, "..")))
        print("wrote %s" % args.save)


if __name__ == "__main__":
    main(sys.argv[1:])
