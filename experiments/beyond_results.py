#!/usr/bin/python3
"""Collects the studies beyond DreamDDP (delayed merge, outer optimizer, compression) into results files that
analysis/render_results.py renders into the README.

  beyond_results.py convergence OUT_DIR[,OUT_DIR2] RESULTS.json --command "..."   convergence.sh runs (cnn or gpt-mini)
  beyond_results.py seeds RESULTS.json --seed S SRC[,SRC2] [--seed S2 ...] --command "..."
                                                     one table over seeds: each SRC a results file of the command
                                                     above or a convergence.sh directory, every seed with its ddp

The convergence document keeps convergence.sh's rows (final test accuracy after the same samples, loss, samples/s,
MB sent per rank) and adds, per row, the comparison it exists for: the gap to ddp in points, the loss relative to
ddp's, and the bytes relative to the same policy without compression / outer step where that run is present.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import provenance  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg):
    sys.stderr.write("beyond_results: error: %s\n" % msg)
    sys.exit(2)


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


def _runs_of(src):
    """(document, setup lines) of a results file (beyond-convergence) or of a convergence.sh directory. A directory
    run with convergence.sh --train-args names its rows by them ("localsgd:k=8 --avg-optimizer-state"): the same
    policy with other train options is another row, and the run without them is its twin."""
    try:
        if not os.path.isdir(src):
            doc = json.load(open(src))
            if "runs" not in doc:
                raise KeyError("runs")
            return doc, doc.get("run_log", [])
        doc = json.load(open(os.path.join(src, "convergence.json")))
        lines = open(os.path.join(src, "run_log.txt")).read().strip().splitlines()
    except (OSError, ValueError, KeyError) as e:
        die("%s is neither a convergence results file nor a convergence.sh directory (%s)" % (src, e))
    extra = next((l.split(", train ", 1)[1] for l in lines if l.startswith("setup:") and ", train " in l), "")
    if extra:
        for r in doc["runs"]:
            r["twin"], r["policy"] = r["policy"], "%s %s" % (r["policy"], extra)
    return doc, lines


def measured_on(docs):
    """The machine block of the measurement (the first source's, written by convergence.sh), else this machine now.
    A collected file describes where its runs ran, not where they were collected."""
    m = next((d["machine"] for d in docs if isinstance(d.get("machine"), dict)), None)
    if m is None:
        m = provenance.start(REPO)
    m = dict(m)
    return m


def finish(res, command, docs):
    """The provenance fields: the given command (else the source's), the measurement's machine, no peer."""
    machine = measured_on(docs)
    end = machine.get("load_1m_end")
    command = command or next((d["command"] for d in docs if d.get("command")), "")
    provenance.stamp(res, command, machine)
    if end is not None:  # the measurement's own end, not the collection's
        res["machine"]["load_1m_end"] = end
    return res


def convergence(outs, dest, command):
    """`outs`: one or more convergence.sh directories of one run (same setup), rows concatenated."""
    rows, setup, doc, docs = [], [], None, []
    for out in outs.split(","):
        doc, lines = _runs_of(out)
        docs.append(doc)
        rows += doc["runs"]
        setup += lines
    by = {r["policy"]: r for r in rows}
    ddp = by.get("ddp")
    for r in rows:
        if ddp:
            r["gap_to_ddp_points"] = 100 * (r["test_accuracy"] - ddp["test_accuracy"])
            r["loss_vs_ddp"] = r["test_loss"] / ddp["test_loss"] - 1
        plain = r["twin"] if "twin" in r else strip_keys(r["policy"], ("compress", "outer", "delay"))
        # A delay, an outer step or compression turn dreamddp's fill-in off by default: its twin is the bare schedule.
        twins = [] if plain == r["policy"] else [plain + ",fillin=0", plain] if plain.startswith("dreamddp") and "fillin=" not in r["policy"] else [plain]
        base = next((by[t] for t in twins if t in by), None)
        if base is not None and base is not r:
            r["baseline"] = base["policy"]
            r["bytes_vs_baseline"] = r["comm_mb"] / base["comm_mb"] if base["comm_mb"] else None
            r["gap_to_baseline_points"] = 100 * (r["test_accuracy"] - base["test_accuracy"])
    res = finish({"study": "beyond-convergence", "run_log": setup, "network": doc["network"], "runs": rows},
                 command, docs)
    provenance.write_json_atomic(dest, res)
    print("beyond_results: wrote %s (%d runs)" % (dest, len(rows)))


def seeds(dest, by_seed, command):
    """Final accuracy per policy and seed, each seed's gap to the ddp of that seed (same data order and
    initialisation), and their mean, min and max: the statement a single seed cannot make (single runs of the local
    policies move by about a point between seeds)."""
    acc, mb, setup, docs, samples = {}, {}, [], [], set()
    for seed, srcs in by_seed:
        for src in srcs.split(","):
            doc, lines = _runs_of(src)
            docs.append(doc)
            setup += lines
            for r in doc["runs"]:
                acc.setdefault(r["policy"], {})[seed] = r["test_accuracy"]
                mb.setdefault(r["policy"], {})[seed] = r["comm_mb"]
                samples.add(r.get("samples"))
    ddp = acc.get("ddp", {})
    missing = [s for s, _ in by_seed if s not in ddp]
    if missing:
        die("seed(s) %s have no ddp run to compare with" % ", ".join(map(str, missing)))
    rows = []
    for policy, per in acc.items():
        common = sorted(s for s in per if s in ddp)
        gaps = [100 * (per[s] - ddp[s]) for s in common]
        rows.append({"policy": policy, "accuracy": {str(s): per[s] for s in sorted(per)},
                     "seeds": common, "mean_accuracy": sum(per[s] for s in common) / len(common),
                     "mean_gap_points": sum(gaps) / len(gaps), "min_gap_points": min(gaps),
                     "max_gap_points": max(gaps), "comm_mb": sum(mb[policy].values()) / len(mb[policy])})
    res = finish({"study": "beyond-convergence-seeds", "run_log": setup, "seeds": [s for s, _ in by_seed],
                  "samples": samples.pop() if len(samples) == 1 else None, "rows": rows}, command, docs)
    provenance.write_json_atomic(dest, res)
    print("beyond_results: wrote %s (%d policies over seeds %s)" % (dest, len(rows), res["seeds"]))


def main():
    a = sys.argv[1:]
    command = ""
    if "--command" in a:
        i = a.index("--command")
        if i + 1 >= len(a):
            die("--command needs a value (the command line to record)")
        command = a[i + 1]
        del a[i:i + 2]
    if len(a) == 3 and a[0] == "convergence":
        convergence(a[1], a[2], command)
    elif len(a) >= 5 and a[0] == "seeds" and (len(a) - 2) % 3 == 0 and all(x == "--seed" for x in a[2::3]):
        if not all(x.isdigit() for x in a[3::3]):
            die("--seed takes a non-negative integer, got %s" % " ".join(a[3::3]))
        seeds(a[1], [(int(s), srcs) for s, srcs in zip(a[3::3], a[4::3])], command)
    elif a and a[0] in ("-h", "--help"):
        print(__doc__)
    else:
        sys.stderr.write(__doc__.rstrip() + "\n")
        die("expected 'convergence DEST SRC' or 'seeds DEST --seed S SRC[,SRC] ...', got %s (usage above)"
            % (" ".join("'%s'" % x for x in a) or "nothing"))


if __name__ == "__main__":
    main()
