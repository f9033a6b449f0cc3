#!/usr/bin/python3
"""Prints the tables of docs/results/artifact.md from experiments/results/artifact.json.

  experiments/artifact_tables.py [experiments/results/artifact.json]

The file records the DreamDDP authors' PyTorch code beside dreamddp:h=8 (docs/results/artifact.md says how it was
made); this only formats it: the runs in order, the medians per hold, and the schedules each side chose.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    path = argv[1] if len(argv) > 1 else os.path.join(HERE, "results", "artifact.json")
    if len(argv) > 2 or path in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if path in ("-h", "--help") else 2
    try:
        d = json.load(open(path))
        runs, holds, sch = d["runs"], d["per_hold"], d["schedules"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.stderr.write("artifact_tables: error: %s: not an artifact results file (%s)\n" % (path, e))
        return 2

    print("Timed runs (2 ranks, 1 Gbit/s, resnet20, batch 32/rank, H=8, steps 9-200 timed; bwd: backward per step,")
    print("wait: communication not hidden per step (artifact: the slower rank's wait for its all-reduces after")
    print("backward; ours: rank 0's exposed communication); loss: mean training loss of steps 161-200):")
    print("%-4s %-9s %-24s %-9s %-9s %-11s %9s %8s %8s %8s %7s %-13s %s" % (
        "hold", "system", "policy", "run", "start", "load", "samples/s", "step ms", "bwd ms", "wait ms", "loss",
        "test acc", "schedule run"))
    for r in runs:
        acc = r.get("test_accuracy")
        acc = "%.4f" % acc if acc is not None else "/".join("%.4f" % a for a in r["test_accuracy_per_rank"])
        if "split_ms_rank0" in r:
            bwd, wait = r["split_ms_rank0"]["backward_ms"], r["split_ms_rank0"]["exposed_comm_ms"]
        else:
            bwd, wait = max(r["backward_ms_per_rank"]), max(r["wait_ms_per_step_per_rank"])
        print("%-4s %-9s %-24s %-9s %-9s %-11s %9.1f %8.1f %8.1f %8.1f %7.4f %-13s %s" % (
            r["hold"], r["system"], r["policy"][:24], r["run"], (r["start_utc"] or "?")[11:19],
            "%.2f-%.2f" % (r["load_1m_start"], r["load_1m_end"]), r["samples_per_s"], r["step_ms"], bwd, wait,
            r["loss_last40"], acc, r["schedule_run"]))
    print()
    print("Per hold (median samples/s; each hold alternates the two systems):")
    print("%-4s %-24s %5s %9s %5s %9s %8s %s" % ("hold", "ours", "runs", "ours", "runs", "artifact", "ratio",
                                                   "load range"))
    for v in holds:
        print("%-4s %-24s %5d %9.1f %5d %9.1f %7.2fx %.2f-%.2f" % (
            v["hold"], v["policy"], v["dreamddp"]["runs"], v["dreamddp"]["median"], v["artifact"]["runs"],
            v["artifact"]["median"], v["ratio_of_medians"], v["load_1m_range"][0], v["load_1m_range"][1]))
    print()
    print("Schedules, modelled seconds per iteration (backward + exposed communication):")
    a = sch["artifact_scheduler_modelled_s_per_iter"]
    o = sch["ours_solver_on_artifact_profile"]
    print("  artifact's profile (B %.4f s, C %.4f s): artifact's scheduler DreamDDP %.6f, PLSGD %.6f, FLSGD %.6f;"
          % (sch["artifact_profile"]["B_s"], sch["artifact_profile"]["C_s"], a["DreamDDP"], a["PLSGD"], a["FLSGD"]))
    print("    our solver dreamddp %.6f (bound %.6f), localsgd %.6f; the artifact's schedule under our model %.6f"
          % (o["dreamddp_s"], o["lower_bound_s"], o["localsgd_s"], o["artifact_schedule_under_our_model_s"]))
    b = sch["artifact_scheduler_on_ours_profile"]["modelled_s_per_iter"]
    q = sch["ours_solver_on_ours_profile"]
    print("  our profile (B %.4f s, C %.4f s, %s): our solver dreamddp %.6f, localsgd %.6f;"
          % (sch["ours_profile"]["B_s"], sch["ours_profile"]["C_s"], sch["ours_profile"]["contention"],
             q["dreamddp_s"], q["localsgd_s"]))
    print("    artifact's scheduler DreamDDP %.6f, PLSGD %.6f (no contention term)" % (b["DreamDDP"], b["PLSGD"]))
    print("  artifact's schedule (phase = iteration mod H; its own profile):")
    for p, layers in sorted(sch["artifact_schedule"]["layers_by_phase"].items(), key=lambda kv: int(kv[0])):
        print("    phase %s: %d module(s): %s" % (p, len(layers), ", ".join(layers) if len(layers) < 4 else
                                                 "%s ... %s" % (", ".join(layers[:2]), layers[-1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
