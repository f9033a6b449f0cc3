"""docs/results/simulator.md, first part: the simulator against measured runs."""
import os
import re
from .common import _absent, _f, _load, _machine, _prov, short_command


# NAME.DATE.json, or NAME.DATEb.json for a second file superseded on one day
_SUPERSEDED = re.compile(r"\.\d{4}-\d{2}-\d{2}[a-z]?\.json$")


def render_sim_validation(results):
    """Every `experiments/sim_validate.sh --json` file of a regime-map cell: simulated over measured step time per
    run, by policy (the profile's path in a dreamddp spec dropped), and the spread over all of them."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_validation_") and f.endswith(".json")
                   and f != "simulate_validation_bp_run.json"  # --bp run on a /tmp profile: its own paragraph
                   and not _SUPERSEDED.search(f))  # NAME.DATE.json: superseded, on the history page
    if not files:
        return _absent('validation of the simulator', 'run `experiments/sim_validate.sh --json ...`')
    docs = [(f[len("simulate_validation_"):-len(".json")], _load(results, f)) for f in files]
    docs = [(c, d) for c, d in docs if d]
    if not docs:
        return _absent("the simulator against measured runs", "run `experiments/sim_validate.sh --json ...`")
    provs = ["%s: simulated by %s" % (c, _prov(d)) + (" Its runs: `%s` — %s." % (
        short_command(d["measured_by"]["command"]), _machine(d["measured_by"]["machine"])) if d.get("measured_by") else "")
             for c, d in docs]
    docs = [(c, d["rows"]) for c, d in docs]
    short = lambda p: ",".join(x for x in p.split(",") if not x.startswith("profile="))
    names = []
    for _, rows in docs:
        for r in rows:
            if short(r["policy"]) not in names:
                names.append(short(r["policy"]))
    out = ["| cell (runs) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    ratios = []
    for cell, rows in docs:
        by = {}
        for r in rows:
            by.setdefault(short(r["policy"]), []).append(r["ratio"])
            ratios.append(r["ratio"])
        out.append("| %s | %s |" % (cell, " | ".join(" / ".join("%.2f" % x for x in by[n]) if n in by else "-"
                                                     for n in names)))
    inside = sum(1 for x in ratios if abs(x - 1) <= 0.10)
    med = _median_summary(docs, short)
    out += ["", "Simulated / measured step time, one entry per measured run (%d runs in %d files, %.2f–%.2fx; within "
                "10%% in %d). The median run of each cell and policy: within 10%% of its simulation in %d of %d, "
                "within 5%% in %d; in %d of those %d pairs the policy's own runs lie more than 5%% apart. "
                "`experiments/sim_validate.sh --profile CELL/profile --json "
                "experiments/results/simulate_validation_CELL.json RUN...` on the cell's own profile; a file's "
                "runs and simulator are of one day." % (
                    len(ratios), len(docs), min(ratios), max(ratios), inside, med[0], med[2], med[1], med[3],
                    med[2]), ""]
    out += ["* " + p for p in provs] + [""]
    return "\n".join(out)


def _median_summary(docs, short):
    """Over every cell and policy (docs: (cell, rows)): (median runs within 10%, within 5%, pairs, pairs whose
    runs' measured step times lie more than 5% apart: max - min over their mean)."""
    w10 = w5 = pairs = spread = 0
    for _, rows in docs:
        by = {}
        for r in rows:
            by.setdefault(short(r["policy"]), []).append(r)
        for runs in by.values():
            ratio = _median_run(runs)[2]
            ms = [r["measured_step_ms"] for r in runs]
            pairs += 1
            w10 += abs(ratio - 1) <= 0.10
            w5 += abs(ratio - 1) <= 0.05
            spread += (max(ms) - min(ms)) / (sum(ms) / len(ms)) > 0.05
    return w10, w5, pairs, spread


def render_sim_charge(results):
    """The contention charge, with and without: each `simulate_charge_CELL.json` (`sim_validate.sh --json`, which
    simulates every run from the cell's profile with its overlap.json and without it), by policy's median run."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_charge_") and f.endswith(".json")
                   and not _SUPERSEDED.search(f))
    docs = [(f[len("simulate_charge_"):-len(".json")], _load(results, f)) for f in files]
    docs = [(c, d) for c, d in docs if d and d.get("rows")]
    if not docs:
        return _absent("the simulator with and without the contention charge",
                       "run `experiments/sim_validate.sh --json experiments/results/simulate_charge_CELL.json ...`")
    short = lambda p: ",".join(x for x in p.split(",") if not x.startswith("profile="))
    out = ["| cell | contention: compute, comm | policy | runs | measured ms, median run (range) | simulated ms, "
           "charged / not | simulated / median run, charged | not charged |", "|---|---|---|---|---|---|---|---|"]
    w, wo, provs = [], [], []
    for cell, d in docs:
        by = {}
        for r in d["rows"]:
            by.setdefault(short(r["policy"]), []).append(r)
        ct = d["rows"][0].get("contention") or {}
        for pol, rows in by.items():
            rows = sorted(rows, key=lambda r: r["measured_step_ms"])
            mid = rows[(len(rows) - 1) // 2: len(rows) // 2 + 1]
            avg = lambda k: sum(r[k] for r in mid) / len(mid)
            a, b = avg("ratio"), avg("ratio_no_contention")
            w.append(a)
            wo.append(b)
            out.append("| %s | %s | %s | %d | %.1f (%.1f–%.1f) | %.1f / %.1f | %s | %s |" % (
                cell, "x%.2f, x%.2f" % (1 + ct.get("compute_slowdown", 0), 1 + ct.get("comm_slowdown", 0)) if ct
                else "none", pol, len(rows), avg("measured_step_ms"), rows[0]["measured_step_ms"],
                rows[-1]["measured_step_ms"], avg("simulated_step_ms"), avg("simulated_step_ms_no_contention"),
                ("%.2f" if abs(a - 1) <= 0.10 else "**%.2f**") % a, ("%.2f" if abs(b - 1) <= 0.10 else "**%.2f**") % b))
        provs.append("%s: simulated by %s" % (cell, _prov(d))
                     + (" Its runs: `%s` — %s." % (short_command(d["measured_by"]["command"]),
                                                    _machine(d["measured_by"]["machine"])) if d.get("measured_by")
                        else ""))
    n5 = lambda xs: sum(1 for x in xs if abs(x - 1) <= 0.05)
    n10 = lambda xs: sum(1 for x in xs if abs(x - 1) <= 0.10)
    out += ["", "Median run of each cell and policy against its simulation from the cell's own profile, with the "
                "profile's contention charged and without it (bold: outside 10%%). Charged: %d of %d within 10%%, %d "
                "within 5%%, mean |error| %.1f%%; not charged: %d within 10%%, %d within 5%%, mean |error| %.1f%%. "
                "The charge moves a median run's simulation by at most %.1f%%." % (
                    n10(w), len(w), n5(w), 100 * sum(abs(x - 1) for x in w) / len(w), n10(wo), n5(wo),
                    100 * sum(abs(x - 1) for x in wo) / len(wo),
                    100 * max(abs(x / y - 1) for x, y in zip(w, wo))), ""]
    out += ["* " + p for p in provs] + [""]
    return "\n".join(out)


# The paper's models: their validation files are simulate_validation_CELL.json whose runs are of these models, and
# beside each, from the same runs with their own compute (`--bp run --step run`), simulate_runcompute_CELL.json.
PAPER_MODELS = ("gpt2", "resnet50")


def _median_run(rows):
    """The median run of one policy's runs by measured step time (the mean of the middle two for an even count):
    (measured ms, simulated ms, simulated / measured, that run's mean compute per step, the compute simulated,
    measured and simulated exposed communication in percent of the step)."""
    rows = sorted(rows, key=lambda r: r["measured_step_ms"])
    mid = rows[(len(rows) - 1) // 2: len(rows) // 2 + 1]
    avg = lambda k: sum(r[k] for r in mid) / len(mid) if all(r.get(k) is not None for r in mid) else None
    pct = lambda k: 100 * avg(k) if avg(k) is not None else None
    return (avg("measured_step_ms"), avg("simulated_step_ms"), avg("ratio"), avg("run_compute_ms_mean"),
            avg("sim_compute_ms"), pct("measured_exposed_comm_fraction"), pct("simulated_exposed_comm_fraction"))


def render_sim_validation_paper(results):
    """The paper's models against the simulator: each cell and policy's median run, simulated from the cell's own
    profile and, from the same runs, with the runs' own forward, backward and update."""
    files = sorted(f for f in os.listdir(results) if f.startswith("simulate_validation_") and f.endswith(".json")
                   and not _SUPERSEDED.search(f))
    docs = []
    for f in files:
        d = _load(results, f)
        if d and d["rows"] and str(d["rows"][0].get("model", "")).split(":")[0] in PAPER_MODELS:
            cell = f[len("simulate_validation_"):-len(".json")]
            docs.append((cell, d, _load(results, "simulate_runcompute_%s.json" % cell)))
    if not docs:
        return _absent("the simulator on the paper's models",
                       "run `experiments/sim_validate.sh --json experiments/results/simulate_validation_CELL.json` "
                       "on a gpt2 or resnet50 cell")
    short = lambda p: ",".join(x for x in p.split(",") if not x.startswith("profile="))
    out = ["| cell | policy | runs | measured ms, median run (range) | simulated ms | simulated / median run | "
           "without the contention charge | with the runs' own compute | compute per step: median run / simulated | "
           "exposed comm: median run, simulated |", "|---|---|---|---|---|---|---|---|---|---|"]
    met, pairs, provs, quiet, slowed = 0, 0, [], [], []
    for cell, d, rc in docs:
        for r in d["rows"]:
            if r.get("run_compute_ms_mean") and r.get("sim_compute_ms"):
                (quiet if r["run_compute_ms_mean"] <= 1.15 * r["sim_compute_ms"] else slowed).append(r["ratio"])
        by, by_rc = {}, {}
        for r in d["rows"]:
            by.setdefault(short(r["policy"]), []).append(r)
        for r in (rc or {}).get("rows", []):
            by_rc.setdefault(short(r["policy"]), []).append(r)
        for pol, rows in by.items():
            meas, sim, ratio, comp, sim_comp, exp_m, exp_s = _median_run(rows)
            pairs += 1
            met += abs(ratio - 1) <= 0.10
            own = _median_run(by_rc[pol])[2] if pol in by_rc else None
            # The same median run simulated without the profile's contention (files that record it).
            mid = sorted(rows, key=lambda r: r["measured_step_ms"])[(len(rows) - 1) // 2: len(rows) // 2 + 1]
            bare = (sum(r["ratio_no_contention"] for r in mid) / len(mid)
                    if all(r.get("ratio_no_contention") is not None for r in mid) else None)
            out.append("| %s | %s | %d | %.1f (%.1f–%.1f) | %.1f | %s | %s | %s | %s | %s, %s |" % (
                cell, pol, len(rows), meas, min(r["measured_step_ms"] for r in rows),
                max(r["measured_step_ms"] for r in rows), sim,
                ("%.2f" if abs(ratio - 1) <= 0.10 else "**%.2f**") % ratio, _f(bare), _f(own),
                _f(comp / sim_comp if comp and sim_comp else None), _f(exp_m, "%.1f%%"), _f(exp_s, "%.1f%%")))
        provs.append("%s: simulated by %s" % (cell, _prov(d)) + (" Its runs: `%s` — %s." % (
            short_command(d["measured_by"]["command"]), _machine(d["measured_by"]["machine"])) if d.get("measured_by") else ""))
        if rc:
            provs.append("%s, the runs' own compute: %s" % (cell, _prov(rc)))
    out += ["", "The median run is within 10%% of the simulation in %d of %d cell and policy pairs (bold: outside). "
                "*With the runs' own compute*: the same runs simulated with their own forward, update and per-layer "
                "backward (medians over the steps after warm-up, `--bp run --step run`) in place of the profile's, "
                "so that what is left is the model of the network and of synchronization. *Compute per step*: the "
                "median run's mean forward + backward + update per step over the compute the simulation was given "
                "from the profile (contention not included). *Without the contention charge*: the same median run "
                "simulated from the profile without its `overlap.json` ('-' where the file predates "
                "`sim_validate.sh` simulating both). *Exposed comm*: the share of the step spent waiting for "
                "communication, in the median run and in its simulation." % (met, pairs), ""]
    inside = lambda xs: sum(1 for x in xs if abs(x - 1) <= 0.10)
    if quiet or slowed:
        out += ["Every run, by its compute: of the %d runs whose mean compute per step stayed within 15%% of the "
                "compute simulated, %d are within 10%% of their simulation (%s); of the %d that computed slower, %d "
                "(%s)." % (len(quiet), inside(quiet), "%.2f–%.2fx" % (min(quiet), max(quiet)) if quiet else "none",
                           len(slowed), inside(slowed),
                           "%.2f–%.2fx" % (min(slowed), max(slowed)) if slowed else "none"), ""]
    out += ["* " + p for p in provs] + [""]
    return "\n".join(out)
