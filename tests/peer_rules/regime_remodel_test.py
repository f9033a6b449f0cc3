"""regime_map.py --remodel: every run of a results file is modelled again from its own folder, nothing measured.
A synthetic cell (4 layers, a profile, a Local SGD run whose model is stale, and a delayed dreamddp run whose log
printed a schedule the solver would not pick) is remodelled with the real binary; each run's modelled step must be
forward + update + the binary's own `schedule` figure for that run (the delayed run with the phases its log printed),
the cell's rows must follow, and the document must say it was remodelled.
Usage: regime_remodel_test.py DREAMDDP_BIN EXPERIMENTS_DIR"""
import json
import os
import subprocess
import sys
import tempfile

binary, experiments = sys.argv[1], sys.argv[2]
sys.path.insert(0, experiments)
import regime_map  # noqa: E402,F401  (puts experiments/lib on the path)
import regime_runs  # noqa: E402

failed = []


def check(cond, what):
    if not cond:
        failed.append(what)
        print("FAIL: " + what)


def schedule(prof, *extra):
    p = subprocess.run([binary, "schedule", "--profile", prof, "--h", "8"] + list(extra), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


with tempfile.TemporaryDirectory() as root:
    cell = os.path.join(root, "runs", "s", "mlp-n2-300mbit")
    prof = os.path.join(cell, "profile")
    os.makedirs(prof)
    layers = ["fc1", "fc2", "fc3", "fc4"]
    bp = dict(zip(layers, [0.004, 0.003, 0.002, 0.001]))  # seconds
    cm = dict(zip(layers, [0.040, 0.030, 0.020, 0.002]))
    json.dump(bp, open(os.path.join(prof, "bp.json"), "w"))
    json.dump(cm, open(os.path.join(prof, "comm.json"), "w"))
    means = {"forward": 3.0, "backward": 10.0, "update": 2.0}  # ms; the profile's own backward: no rescaling
    runs = []
    for config, tag in (("localsgd:k=8", "ours-localsgd_k8.r1"),
                        ("dreamddp:h=8,delay=2", "ours-dreamddp_h8_delay2.r1")):
        d = os.path.join("runs", "s", "mlp-n2-300mbit", tag)
        os.makedirs(os.path.join(root, d))
        runs.append({"system": "ours", "config": config, "spec": config, "samples_per_s": 1000.0, "step_ms": 40.0,
                     "exposed_comm_fraction": 0.5, "comm_bytes": 1, "means_ms": means, "modelled_ms": 1.0,
                     "rep": 1, "dir": d, "load_1m": 0.0, "noisy": False, "run_s": 1.0})
    # The delayed run's log: every layer in phase 0 (the solver spreads them).
    with open(os.path.join(root, runs[1]["dir"] + ".log"), "w") as f:
        f.write("dreamddp: schedule for H=8, delay=2 (modelled 1 ms/iter backward+comm)\n"
                "  phase: fc1=0 fc2=0 fc3=0 fc4=0\nstep 10/10\n")
    check(regime_runs.ran_phases(os.path.join(root, runs[1]["dir"] + ".log"), layers) == "0,0,0,0", "ran_phases")
    model_s = schedule(prof)
    doc = {"study": "regime_map", "command": "test", "machine": {}, "H": 8, "repeats": 1,
           "cells": [{"model": "mlp", "ranks": 2, "rate": "300mbit", "steps": 13, "H": 8,
                      "profile_B_ms": 10.0, "profile_C_ms": 92.0, "comm_over_backward": 9.2, "modelled_s": model_s,
                      "phases": "0,1,2,3",
                      "rows": [], "verdict": {}, "runs": runs}]}
    results = os.path.join(root, "results.json")
    json.dump(doc, open(results, "w"))
    p = subprocess.run(["/usr/bin/python3", os.path.join(experiments, "regime_map.py"), "--remodel", results,
                        "--runs-root", root, "--bin", binary], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "remodel exits 0 (rc %d): %s" % (p.returncode, p.stderr.strip()))
    check("2 of 2 runs modelled differently" in p.stdout, "remodel says how many runs changed:\n" + p.stdout)
    got = json.load(open(results))
    check("remodelled" in got and got["remodelled"]["runs_changed"] == 2, "the document records the remodel")
    r_l, r_d = got["cells"][0]["runs"]
    fu = means["forward"] + means["update"]
    want_l = fu + 1e3 * schedule(prof, "--phases", "0,1,2,3")["localsgd"]
    check(abs(r_l["modelled_ms"] - want_l) < 1e-9, "localsgd modelled %r, want %r" % (r_l["modelled_ms"], want_l))
    delay_args = ["--delay", "2", "--forward-ms", "3.0", "--update-ms", "2.0"]
    want_d = fu + 1e3 * schedule(prof, *delay_args, "--phases", "0,0,0,0")["dreamddp_delay"]
    solver_d = fu + 1e3 * schedule(prof, *delay_args)["dreamddp_delay"]
    check(abs(r_d["modelled_ms"] - want_d) < 1e-9, "delayed run modelled %r, want its log's phases %r (the solver's "
          "pick: %r)" % (r_d["modelled_ms"], want_d, solver_d))
    check(abs(want_d - solver_d) > 1e-6, "the test's logged schedule must differ from the solver's pick")
    rows = {r["config"]: r for r in got["cells"][0]["rows"]}
    check(abs(rows["localsgd:k=8"]["model_error"] - (want_l / 40.0 - 1)) < 1e-12, "the rows follow the runs")
    # A results file whose runs are not under --runs-root is refused with one line and exit 2.
    p = subprocess.run(["/usr/bin/python3", os.path.join(experiments, "regime_map.py"), "--remodel", results,
                        "--runs-root", os.path.join(root, "nowhere"), "--bin", binary],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 2 and "regime_map: error:" in p.stderr, "missing runs: rc %d, %r" % (p.returncode, p.stderr))

    # Not a regime map's results file, or not JSON at all: one line, exit 2, the file untouched.
    for text in ('{"study": "bench_step", "results": []}', "not json"):
        other = os.path.join(root, "other.json")
        open(other, "w").write(text)
        p = subprocess.run(["/usr/bin/python3", os.path.join(experiments, "regime_map.py"), "--remodel", other,
                            "--bin", binary], capture_output=True, text=True, timeout=120)
        check(p.returncode == 2 and p.stderr.count("\n") == 1 and "regime_map: error: --remodel" in p.stderr
              and open(other).read() == text, "bad results file %r: rc %d, %r" % (text, p.returncode, p.stderr))

print("%d failure(s)" % len(failed))
sys.exit(1 if failed else 0)
