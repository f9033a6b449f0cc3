#!/usr/bin/python3
"""Collects the issue-15 studies (past DreamDDP: delayed merge, outer optimizer, compression) into results files that
analysis/render_results.py renders into the README.

  beyond_results.py convergence OUT_DIR[,OUT_DIR2] RESULTS.json --command "..."   convergence.sh sittings (cnn or gpt-mini)

The convergence document keeps convergence.sh's rows (final test accuracy after the same samples, loss, samples/s,
MB sent per rank) and adds, per row, the comparison it exists for: the gap to ddp in points, the loss relative to
ddp's, and the bytes relative to the same policy without compression / outer step where that run is present.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import sitting  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strip_keys(policy, keys):
    """The policy spec without the given merge keys (outer's own lr/momentum go with it)."""
    name, _, rest = policy.partition(":")
    items, skip = [], False
    for it in rest.split(",") if rest else []:
        k = it.split("=", 1)[0]
        if k in keys:
            skip = k == "outer"
            continue
        if skip and k in ("lr", "momentum"):
            continue
        skip = False
        items.append(it)
    return name + (":" + ",".join(items) if items else "")


def convergence(outs, dest, command):
    """`outs`: one or more convergence.sh directories of one sitting (same setup), rows concatenated."""
    rows, setup, doc = [], [], None
    for out in outs.split(","):
        doc = json.load(open(os.path.join(out, "convergence.json")))
        rows += doc["runs"]
        setup += open(os.path.join(out, "sitting.txt")).read().strip().splitlines()
    by = {r["policy"]: r for r in rows}
    ddp = by.get("ddp")
    for r in rows:
        if ddp:
            r["gap_to_ddp_points"] = 100 * (r["test_accuracy"] - ddp["test_accuracy"])
            r["loss_vs_ddp"] = r["test_loss"] / ddp["test_loss"] - 1
        plain = strip_keys(r["policy"], ("compress", "outer", "delay"))
        # A delay, an outer step or compression turn dreamddp's fill-in off by default: its twin is the bare schedule.
        twins = [] if plain == r["policy"] else [plain + ",fillin=0", plain] if plain.startswith("dreamddp") and "fillin=" not in r["policy"] else [plain]
        base = next((by[t] for t in twins if t in by), None)
        if base is not None and base is not r:
            r["baseline"] = base["policy"]
            r["bytes_vs_baseline"] = r["comm_mb"] / base["comm_mb"] if base["comm_mb"] else None
            r["gap_to_baseline_points"] = 100 * (r["test_accuracy"] - base["test_accuracy"])
    res = {"study": "beyond-convergence", "command": command, "machine": sitting.machine(REPO), "sitting": setup,
           "network": doc["network"], "runs": rows}
    json.dump(res, open(dest, "w"), indent=1)
    print("beyond_results: wrote %s (%d runs)" % (dest, len(rows)))


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "convergence":
        sys.exit(__doc__)
    command = ""
    if "--command" in sys.argv:
        command = sys.argv[sys.argv.index("--command") + 1]
    convergence(sys.argv[2], sys.argv[3], command)


if __name__ == "__main__":
    main()
