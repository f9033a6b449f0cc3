#!/usr/bin/python3
"""Sparse layer sync against the quantized codec and none: bytes, samples/s and loss on small runs of 2 ranks.

  topk_compression.py [--bin build/dreamddp] [--steps N] [--seeds 0,1,2] [--out runs/topk]
                      [--codecs "none;int8;topk:p=1;topk:p=5,values=int8"] [--models gpt2,resnet20]
                      [--results experiments/results/topk_compression.json]

Every (model, codec, seed) is one `dreamddp launch -n 2 -- train` run of the same local policy (plsgd:h=4 by
default, --base) with `compress=CODEC` appended (none: the plain average); the runs alternate codecs within a
seed so that load drifts hit every codec alike. Read from each run's summary.json: comm_bytes (what rank 0 sent,
all-reduce equivalent), samples_per_s, final_loss (training loss of the last step) and test_loss (the
rank-averaged model at the end on --eval-samples test samples). The results file holds every run, the per-codec
mean and range over the seeds, each codec's bytes relative to none and to int8, and a markdown table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import provenance  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {
    "gpt2": ["--model", "gpt2:layers=2,d=128,heads=4,ctx=64,vocab=2048", "--data", "text", "--batch", "8",
             "--optimizer", "adamw", "--lr", "0.001"],
    "resnet20": ["--model", "resnet20", "--data", "fashion-mnist", "--batch", "16"],
}


def run_one(binary, model, base, codec, seed, steps, eval_samples, out):
    policy = base + ("" if codec == "none" else ",compress=" + codec)
    if os.path.exists(out):
        shutil.move(out, out + ".old.%d" % int(time.time()))
    cmd = [binary, "launch", "-n", "2", "--", "train"] + MODELS[model] + [
        "--policy", policy, "--steps", str(steps), "--seed", str(seed), "--threads", "1",
        "--eval-every", str(steps), "--eval-samples", str(eval_samples), "--out", out]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        sys.exit("topk_compression: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    s = json.load(open(os.path.join(out, "summary.json")))
    return {"model": model, "codec": codec, "policy": policy, "seed": seed, "steps": steps,
            "comm_bytes": s["comm_bytes"], "samples_per_s": s["samples_per_s"], "final_loss": s["final_loss"],
            "test_loss": s.get("test_loss"), "wall_s": round(time.time() - t0, 1),
            "dir": provenance.rel_to_repo(out, REPO)}


def summarize(runs, codecs, models):
    rows = []
    for m in models:
        by = {c: [r for r in runs if r["model"] == m and r["codec"] == c] for c in codecs}
        mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)
        for c in codecs:
            rs = by[c]
            if not rs:
                continue
            row = {"model": m, "codec": c, "seeds": len(rs), "bytes": mean(rs, "comm_bytes"),
                   "samples_per_s": mean(rs, "samples_per_s"), "test_loss": mean(rs, "test_loss"),
                   "test_loss_min": min(r["test_loss"] for r in rs), "test_loss_max": max(r["test_loss"] for r in rs),
                   "final_loss": mean(rs, "final_loss")}
            for ref in ("none", "int8"):
                if by.get(ref):
                    row["bytes_vs_" + ref] = row["bytes"] / mean(by[ref], "comm_bytes")
            rows.append(row)
    return rows


def markdown(rows, runs_per_seed):
    out = ["| model | compress | bytes sent by rank 0 | vs none | vs int8 | samples/s | test loss, mean (min–max over "
           "seeds) | training loss, last step (mean) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %.0f | %s | %s | %.1f | %.4f (%.4f–%.4f) | %.4f |" % (
            r["model"], r["codec"], r["bytes"],
            "%.2f%%" % (100 * r["bytes_vs_none"]) if "bytes_vs_none" in r else "-",
            "%.1f%%" % (100 * r["bytes_vs_int8"]) if "bytes_vs_int8" in r else "-",
            r["samples_per_s"], r["test_loss"], r["test_loss_min"], r["test_loss_max"], r["final_loss"]))
    return "\n".join(out) + "\n"


def verdicts(rows):
    """Per model and topk codec: the goal (at most 3% of none's bytes, mean test loss inside int8's range over the
    seeds) met or not, with the numbers."""
    out = []
    for r in rows:
        if not r["codec"].startswith("topk"):
            continue
        i8 = next((q for q in rows if q["model"] == r["model"] and q["codec"] == "int8"), None)
        if i8 is None or "bytes_vs_none" not in r:
            continue
        small = r["bytes_vs_none"] <= 0.03
        inside = i8["test_loss_min"] <= r["test_loss"] <= i8["test_loss_max"]
        out.append("- %s, `%s`: %.2f%% of none's bytes (%s 3%%), mean test loss %.4f %s int8's range %.4f–%.4f "
                   "(%+.4f against int8's mean)%s." % (
                       r["model"], r["codec"], 100 * r["bytes_vs_none"], "within" if small else "above",
                       r["test_loss"], "inside" if inside else "outside", i8["test_loss_min"], i8["test_loss_max"],
                       r["test_loss"] - i8["test_loss"], "" if small and inside else ": **goal missed**"))
    return "\n".join(out) + "\n" if out else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "dreamddp"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--base", default="plsgd:h=4")
    ap.add_argument("--codecs", default="none;int8;topk:p=1;topk:p=5,values=int8")
    ap.add_argument("--models", default="gpt2,resnet20")
    ap.add_argument("--eval-samples", type=int, default=512)
    ap.add_argument("--out", default=os.path.join(REPO, "runs", "topk"))
    ap.add_argument("--results", default=None)
    a = ap.parse_args()
    codecs, models = a.codecs.split(";"), a.models.split(",")
    for m in models:
        if m not in MODELS:
            sys.exit("topk_compression: unknown model %s (known: %s)" % (m, ", ".join(MODELS)))
    start = provenance.start(REPO)
    runs = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for m in models:
            for c in codecs:
                d = os.path.join(a.out, "%s-%s-s%d" % (m, c.replace(":", "_").replace(",", "_").replace("=", ""), seed))
                r = run_one(a.bin, m, a.base, c, seed, a.steps, a.eval_samples, d)
                print(json.dumps(r), flush=True)
                runs.append(r)
    rows = summarize(runs, codecs, models)
    md = markdown(rows, len(a.seeds.split(",")))
    print(md)
    print(verdicts(rows))
    if a.results:
        doc = {"base_policy": a.base, "steps": a.steps, "ranks": 2, "models": {m: " ".join(MODELS[m]) for m in models},
               "rows": rows, "runs": runs,
               "markdown": md + "\n" + verdicts(rows) + "\n2 ranks (`launch -n 2`, one thread each), %s plus `compress=CODEC`, %d steps, "
                           "seeds %s; test loss on %d test samples of the rank-averaged model at the end; bytes: "
                           "rank 0's `comm_bytes` (all-reduce equivalent).\n" % (a.base, a.steps, a.seeds,
                                                                                 a.eval_samples)}
        provenance.stamp(doc, " ".join(["experiments/topk_compression.py"] + sys.argv[1:]), start)
        with open(a.results, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
