#!/usr/bin/python3
"""Peak resident memory per rank, by model and policy: `dreamddp launch -n RANKS -- train` for a few steps of each,
and rank 0's `peak_rss_mb` from its summary.json (every rank holds the whole model; their peaks differ by the data
shard only).

  experiments/memory.py [--models "gpt2 llama resnet18 resnet50"] [--policies "ddp localsgd:k=8 dreamddp:h=8
                        dreamddp:h=8,delay=2"] [--ranks 2] [--steps 12] [--out runs/memory]
                        [--results experiments/results/peak_rss.json] [--bin build/dreamddp]

Batch per rank: 1 sequence of 128 tokens for gpt2 and llama (AdamW), 32 images of 3x32x32 for the ResNets (SGD),
one thread per rank, synthetic data, loopback. An existing --out is moved aside (OUT.<time>), never overwritten.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments", "lib"))
import provenance  # noqa: E402

BATCH = {"gpt2": 1, "llama": 1, "gpt-mini": 8, "resnet18": 32, "resnet50": 32, "mlp": 64, "cnn": 64,
         "resnet20": 64}


def die(msg):
    sys.stderr.write("memory: error: %s\n" % msg)
    sys.exit(2)


def safe(name):
    return "".join(c if c.isalnum() else "-" for c in name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gpt2 llama resnet18 resnet50")
    ap.add_argument("--policies", default="ddp localsgd:k=8 dreamddp:h=8 dreamddp:h=8,delay=2")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--out", default=os.path.join("runs", "memory"))
    ap.add_argument("--results")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "dreamddp"))
    a = ap.parse_args()
    models, policies = a.models.split(), a.policies.split()
    if not models or not policies:
        die("--models and --policies need at least one entry")
    unknown = [m for m in models if m.split(":")[0] not in BATCH]
    if unknown:
        die("--models: unknown model %s (expected one of %s)" % (", ".join(unknown), ", ".join(BATCH)))
    if not 1 <= a.ranks <= 16:
        die("--ranks must be in [1, 16]")
    if not 1 <= a.steps <= 10000:
        die("--steps must be in [1, 10000]")
    if not os.access(a.bin, os.X_OK):
        die("%s: not an executable (build it with `make build`, or pass --bin)" % a.bin)
    if os.path.exists(a.out):
        os.rename(a.out, "%s.%s" % (a.out, time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(a.out)
    start = provenance.start(ROOT)
    command = provenance.shell_command(["experiments/memory.py"] + sys.argv[1:])
    rows = []
    total = len(models) * len(policies)
    for i, m in enumerate(models):
        for j, p in enumerate(policies):
            fam = m.split(":")[0]
            run = os.path.join(a.out, "%s_%s" % (safe(m), safe(p)))
            cmd = [a.bin, "launch", "-n", str(a.ranks), "--", "train", "--model", m, "--data", "synthetic",
                   "--batch", str(BATCH[fam]), "--steps", str(a.steps), "--threads", "1", "--policy", p,
                   "--eval-samples", "16", "--out", run]
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True)
            n = i * len(policies) + j + 1
            if r.returncode != 0:
                tail = (r.stderr.strip().splitlines() or ["?"])[-1]
                print("[%d/%d] %s %s: exit %d: %s" % (n, total, m, p, r.returncode, tail), flush=True)
                rows.append({"model": m, "policy": p, "exit": r.returncode, "error": tail})
                continue
            s = json.load(open(os.path.join(run, "summary.json")))
            rows.append({"model": m, "policy": p, "batch": BATCH[fam], "params": s["params"],
                         "peak_rss_mb": s.get("peak_rss_mb"), "step_ms": s["step_ms"],
                         "run": provenance.rel_to_repo(run, ROOT), "wall_s": round(time.time() - t0, 1)})
            print("[%d/%d] %s %s: rank 0 peak %.0f MB (%d parameters, %.0f s)" % (
                n, total, m, p, s.get("peak_rss_mb") or 0, s["params"], time.time() - t0), flush=True)
    doc = provenance.stamp({"study": "peak_rss", "ranks": a.ranks, "steps": a.steps, "threads": 1, "rows": rows},
                           command, start)
    path = a.results or os.path.join(a.out, "peak_rss.json")
    provenance.write_json_atomic(path, doc)
    print("memory: wrote %s" % path)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
