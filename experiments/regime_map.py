#!/usr/bin/python3
"""The regime map: where layer-wise partial sync pays off and where it does not, measured.

For every cell (model, ranks, link rate) on the emulated cluster (`dreamddp launch --netem RATE`, one network
namespace per rank, one thread per rank):
  1. `dreamddp profile` measures the cell's per-layer backward and all-reduce times (CELL/profile/{bp,comm}.json);
     `dreamddp schedule --h H --fillin` solves the DreamDDP schedule on it and models every policy's time per step;
  2. ours (ddp, localsgd:k=H, plsgd:h=H, dreamddp:h=H on that profile with and without fill-in) and the PyTorch peer
     (DDP, PeriodicModelAverager k=H, and --algo partial with the phases our solver chose) run the same number of
     steps, in alternating order (reversed on every second repetition);
  3. the cell records the measured communication/backward ratio C/B of its profile (the x-axis: place your own
     cluster on it), each run's samples/s, and next to it the step time the schedule model predicts for that run's
     own profile (forward + update measured in the run, backward + communication modelled).
The peer must run at its best: its gemm_gflops is checked against our GEMM rate (experiments/lib/peer_rules.py) and a
misconfigured peer gets no ratio. Runs started while the load average exceeded the core count are marked noisy.

Writes OUT/regime.json (every run and every cell) and, with --results FILE, the same document for the README
(analysis/render_results.py) and analysis/fig_regime.py. Nothing of an earlier run is overwritten: an existing
OUT is refused unless --resume-cells (cells already measured are kept and skipped).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
import provenance  # noqa: E402
import peer_rules  # noqa: E402
from regime_cell import Run, summarize  # noqa: E402
from regime_runs import (BATCH, die, family, modelled_as, parse_cell, ran_phases, ran_without_fill,  # noqa: E402
                         rate_bps, read_profile)


def remodel(a):
    """--remodel RESULTS: the schedule model's step time of every run in a results file again, from the runs' own
    folders (under --runs-root) and the current binary, without measuring anything; the cells' rows and verdicts
    follow. For a results file measured before a fix to the model or to how a run is modelled."""
    try:
        doc = json.load(open(a.remodel))
    except (OSError, ValueError) as e:
        die("--remodel: cannot read %s: %s" % (a.remodel, e))
    if not isinstance(doc, dict) or doc.get("study") != "regime_map" or not isinstance(doc.get("cells"), list):
        die("--remodel: %s is not a regime map's results file (no \"study\": \"regime_map\" with cells)" % a.remodel)
    s = Run(a)
    changed = 0
    for c in doc["cells"]:
        ours = [r for r in c["runs"] if r["system"] == "ours"]
        if not ours:
            continue
        cdir = os.path.dirname(os.path.join(a.runs_root, ours[0]["dir"]))
        prof = os.path.join(cdir, "profile")
        if not os.path.isfile(os.path.join(prof, "bp.json")):
            die("%s: no profile of cell %s-n%d-%s (its runs are not under --runs-root %s)"
                % (prof, c["model"], c["ranks"], c["rate"], a.runs_root))
        bp, cm = read_profile(prof)
        for r in ours:
            rdir = os.path.join(a.runs_root, r["dir"])
            if r["config"] == "dreamddp:h=%d" % c["H"]:
                r["no_fill_in"] = ran_without_fill(rdir + ".log", list(bp), c["phases"])
            m = s.modelled(rdir, bp, cm, r["means_ms"], c["phases"], c["H"],
                           modelled_as(r["config"], r.get("ran"), c["H"]),
                           ran_phases(rdir + ".log", list(bp)))
            if m != r["modelled_ms"]:
                print("   %-18s %-34s model %8.2f -> %8.2f ms (measured %.2f)" % (
                    "%s n%d %s" % (c["model"], c["ranks"], c["rate"]), r["config"], r["modelled_ms"] or float("nan"),
                    m or float("nan"), r["step_ms"]), flush=True)
                changed += 1
            r["modelled_ms"] = m
        fresh = summarize(c["model"], c["ranks"], c["rate"], c["steps"], c["profile_B_ms"] / 1e3,
                          c["profile_C_ms"] / 1e3, c["modelled_s"], c["phases"], c["runs"], c["H"])
        c.update({k: fresh[k] for k in ("rows", "verdict")})
    doc["remodelled"] = {"date": peer_rules.machine(REPO)["date"], "commit": peer_rules.git_commit(REPO),
                         "runs_changed": changed}
    return doc, changed


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--models", default="mlp")
    ap.add_argument("--ranks", default="2 4")
    ap.add_argument("--rates", default="100mbit 300mbit 1gbit 3gbit 10gbit")
    ap.add_argument("--cells", default="", help="explicit cells 'model:ranks:rate ...' instead of the full grid")
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--delay", type=int, default=2, help="T of the dreamddp:h=H,delay=T configuration (< H)")
    ap.add_argument("--budget-s", type=float, default=6.0, help="about this many seconds of ddp per run")
    ap.add_argument("--max-steps", type=int, default=405)
    ap.add_argument("--out", default=os.path.join(REPO, "runs", "regime"))
    ap.add_argument("--resume-cells", action="store_true", help="OUT exists: keep its measured cells, add the rest")
    ap.add_argument("--results", default="", help="also write the document here (e.g. experiments/results/regime_map.json)")
    ap.add_argument("--bin", default=os.environ.get("DREAMDDP_BIN", os.path.join(REPO, "build", "dreamddp")))
    ap.add_argument("--peer", default=os.environ.get("DREAMDDP_PEER", os.path.join(REPO, "peers", "torch_ddp.py")))
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--self-profiled", action="store_true",
                    help="dreamddp profiles itself inside its timed launch (its default start) instead of running "
                    "on the cell's profile from a separate `dreamddp profile` launch")
    ap.add_argument("--configs", default="", help="our configurations instead of the default ones, e.g. "
                    "'localsgd:k=8 dreamddp:h=8 dreamddp:h=8,delay=2 dreamddp:h=8,delay=2,compress=int8'")
    ap.add_argument("--remodel", default="", metavar="RESULTS",
                    help="measure nothing: model every run of RESULTS again with --bin (rewrites RESULTS; git keeps "
                    "the old)")
    ap.add_argument("--runs-root", default=REPO, help="--remodel: the folder the runs' dirs in RESULTS are relative to")
    return ap


def main_remodel(a):
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        die("no dreamddp binary at %s (make build, or --bin)" % a.bin)
    if not os.path.isfile(a.remodel):
        die("--remodel: no results file %s" % a.remodel)
    doc, changed = remodel(a)
    json.dump(provenance.repo_relative(doc, REPO), open(a.remodel, "w"), indent=1)
    print("regime_map: %d of %d runs modelled differently; %s rewritten" % (
        changed, sum(len(c["runs"]) for c in doc["cells"]), a.remodel))
    print_table(doc)


def checked_cells(a):
    """The cells to measure, after refusing bad options or a machine that cannot emulate the cluster; resolves
    the paths in a and the peer's python."""
    for name in ("h", "repeats", "max_steps", "delay"):
        if getattr(a, name) < 1:
            die("--%s must be >= 1" % name.replace("_", "-"))
    if a.delay >= a.h:
        die("--delay must be below --h")
    if not (a.budget_s > 0):
        die("--budget-s must be > 0")
    a.out = os.path.abspath(a.out)
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        die("no dreamddp binary at %s (make build, or --bin)" % a.bin)
    if not a.no_peer:
        if not os.path.isfile(a.peer):
            die("no PyTorch peer at %s (--peer, or --no-peer)" % a.peer)
        a.peer = os.path.abspath(a.peer)
        # .venv-peer (make deps-peer), PEER_PYTHON, or Debian's python3-torch
        a.peer_py = peer_rules.peer_python()
        if subprocess.run([a.peer_py, "-c", "import torch"], capture_output=True).returncode != 0:
            die("the peer needs python3-torch (make deps-peer), or pass --no-peer")
    if os.geteuid() != 0 or not shutil.which("tc"):
        die("the regime map needs the emulated cluster: run as root with iproute2 (ip, tc)")
    if os.path.exists(a.out) and os.listdir(a.out) and not a.resume_cells:
        die("%s exists and is not empty: pick another --out, or --resume-cells to complete it" % a.out)
    if a.cells:
        cells = [parse_cell(c) for c in a.cells.split()]
    else:
        cells = [(m, int(n), r) for m in a.models.split() for n in a.ranks.split() for r in a.rates.split()]
    for m, n, r in cells:
        if family(m) not in BATCH:
            die("unknown model '%s' (%s, with options where CONTRACT.md's models take them)" % (m, ", ".join(BATCH)))
        if n < 2 or n > 16:
            die("ranks must be in 2..16, got %d" % n)
        rate_bps(r)
    return cells


def main():
    a = parser().parse_args()
    if a.remodel:
        main_remodel(a)
        return
    cells = checked_cells(a)
    os.makedirs(a.out, exist_ok=True)
    s = Run(a)
    our_gemm = peer_rules.our_gemm_gflops(a.bin)
    alone = None if a.no_peer else peer_rules.peer_gemm_alone(a.peer)
    if not a.no_peer and alone is None:
        print("# the peer does not run alone here (netlib BLAS? see torch_ddp.py): its ratios will be withheld")
    s.peer_alone = alone["gemm_gflops"] if alone else 0.0
    meta = provenance.start(REPO)
    cmd = provenance.shell_command([os.environ.get("REGIME_MAP_ENTRY", "experiments/regime_map.py")] + sys.argv[1:],
                                   ("DREAMDDP_PEER",))
    print("# regime map: %d cells, %d repeats, H=%d; our GEMM %.1f GFLOP/s, the peer's alone %.1f (%s); %s, %d cores, "
          "load %.2f" % (len(cells), a.repeats, a.h, our_gemm, s.peer_alone, (alone or {}).get("blas", "-"),
                         meta["cpu"], meta["cores"], meta["load_1m"]), flush=True)
    doc = {"study": "regime_map", "ours_gemm_gflops": our_gemm,
           "peer_alone": peer_rules.peer_config(alone), "H": a.h,
           "repeats": a.repeats, "dreamddp_profile": "self" if a.self_profiled else "cell", "cells": []}
    peer_script = None if a.no_peer else provenance.rel_to_repo(a.peer, REPO)
    provenance.stamp(doc, cmd, meta, peer=alone, peer_script=peer_script)
    for m, n, r in cells:
        doc["cells"].append(s.cell(m, n, r, our_gemm))
        json.dump(doc, open(os.path.join(a.out, "regime.json"), "w"), indent=1)
    doc["ours_gemm_gflops_end"] = peer_rules.our_gemm_gflops(a.bin)
    provenance.stamp(doc, cmd, meta, peer=alone, peer_script=peer_script)
    json.dump(doc, open(os.path.join(a.out, "regime.json"), "w"), indent=1)
    if a.results:
        json.dump(provenance.repo_relative(doc, REPO), open(a.results, "w"), indent=1)
    print_table(doc)


def print_table(doc):
    H = doc["H"]
    print("\n%-18s %6s  %-24s %10s %10s %10s %7s" % ("cell", "C/B", "config", "samples/s", "step ms",
                                                     "model ms", "error"))
    for c in doc["cells"]:
        name = "%s n%d %s" % (c["model"], c["ranks"], c["rate"])
        for r in c["rows"]:
            sps = "%.0f" % r["samples_per_s"] if r["samples_per_s"] else "-"
            step = "%.1f" % r["step_ms"] if r["step_ms"] else "-"
            mod = "%.1f" % r["modelled_step_ms"] if "modelled_step_ms" in r else ""
            err = "%+.0f%%" % (100 * r["model_error"]) if "model_error" in r else ""
            flag = ("" if r["system"] == "ours" or r["peer_ok"] else "  (peer misconfigured: no ratio)") + (
                "  noisy" if r["noisy"] else "")
            print("%-18s %6.2f  %-24s %10s %10s %10s %7s%s" % (name, c["comm_over_backward"],
                                                              r["system"] + " " + r["config"], sps, step, mod, err,
                                                              flag))
        v = c["verdict"]
        f = lambda x: "%.2f" % x if x else "-"
        print("%-18s        dreamddp:h=%d / best of localsgd, plsgd = %s (fillin=0: %s; delay / localsgd: %s); "
              "ours/torch: ddp %s, localsgd %s, dreamddp vs partial %s" % (
                  "", H, f(v["dreamddp_vs_best_baseline"]), f(v["dreamddp_fillin0_vs_best_baseline"]),
                  f(v.get("dreamddp_delay_vs_localsgd")),
                                                       f(v["ours_ddp_vs_torch_ddp"]),
                                                       f(v["ours_localsgd_vs_torch_localsgd"]),
                                                       f(v["ours_dreamddp_vs_torch_partial"])))


if __name__ == "__main__":
    main()
