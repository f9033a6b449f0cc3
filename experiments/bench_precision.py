#!/usr/bin/python3
"""--precision bf16 against fp32 on the CPU: step time (ours, and PyTorch's CPU autocast when a torch is there),
the oneDNN implementations each precision ran, and the loss of gpt-mini over seeds.

  experiments/bench_precision.py [--models "gpt2 gpt-mini"] [--reps 3] [--threads 1] [--loss-steps 200]
      [--seeds 0,1,2] [--out runs/precision] [--results experiments/results/precision_bf16.json]

Step time: `dreamddp train --data synthetic --optimizer adamw --threads T` per model and precision, fp32 and bf16
alternating REPS times (summary.json step_ms, after the trainer's warm-up steps); the best (lowest) of each is
compared. gpt2 is the preset (124M) at batch 1 x 128 tokens, gpt-mini batch 8. PyTorch: experiments/lib/
torch_autocast_step.py on the peer's same model (PEER_PYTHON, else .venv-peer, else /usr/bin/python3), alternating
likewise. Implementations: one step of gpt-mini and of cnn per precision under ONEDNN_VERBOSE=1, the distinct
(primitive, implementation, source type) of the executed primitives. Loss: gpt-mini on --data text, batch 8,
LOSS_STEPS steps per seed and precision; the mean loss of the last 20 steps, bf16 against the fp32 seeds' range.
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

BATCH = {"gpt2": 1, "gpt-mini": 8, "mlp": 64, "cnn": 64}
STEPS = {"gpt2": 12, "gpt-mini": 25, "mlp": 60, "cnn": 30}


def run(cmd, env=None, timeout=3600):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-2000:]))
    return r


def train(bin_, out, model, precision, threads, extra, env=None):
    if os.path.exists(out):
        shutil.rmtree(out)
    cmd = [bin_, "train", "--model", model, "--threads", str(threads), "--precision", precision, "--out", out] + extra
    r = run(cmd, env)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), r.stderr


def peer_python():
    for p in (os.environ.get("PEER_PYTHON"), os.path.join(REPO, ".venv-peer/bin/python"), "/usr/bin/python3"):
        if p and os.path.exists(p) and subprocess.run([p, "-c", "import torch"], capture_output=True).returncode == 0:
            return p
    return None


def step_times(a, py):
    res = {}
    for model in a.models:
        name = model.split(":")[0]
        cell = {"batch": BATCH[name], "steps": STEPS[name], "ours_ms": {"fp32": [], "bf16": []},
                "torch_ms": {"fp32": [], "bf16": []} if py else None}
        extra = ["--data", "synthetic", "--optimizer", "adamw", "--batch", str(BATCH[name]), "--steps",
                 str(STEPS[name]), "--eval-samples", "1"]
        for rep in range(a.reps):
            for p in ("fp32", "bf16"):
                s, _ = train(a.bin, os.path.join(a.out, "step-%s-%s-%d" % (name, p, rep)), model, p, a.threads, extra)
                cell["ours_ms"][p].append(round(s["step_ms"], 1))
                if py:
                    env = dict(os.environ, THREADS=str(a.threads))
                    line = run([py, os.path.join(HERE, "lib", "torch_autocast_step.py"), model, str(BATCH[name]),
                                str(max(3, STEPS[name] // 4)), p], env).stdout.strip().splitlines()[-1]
                    cell["torch_ms"][p].append(json.loads(line)["step_ms"])
                    cell["torch"] = json.loads(line)["torch"]
                print(model, p, "rep", rep, "ours", cell["ours_ms"][p][-1], "torch",
                      cell["torch_ms"][p][-1] if py else "-", flush=True)
        best = {k: min(v) for k, v in cell["ours_ms"].items()}
        cell["ours_bf16_over_fp32"] = round(best["bf16"] / best["fp32"], 3)
        if py:
            tb = {k: min(v) for k, v in cell["torch_ms"].items()}
            cell["torch_bf16_over_fp32"] = round(tb["bf16"] / tb["fp32"], 3)
            cell["ours_bf16_over_torch_bf16"] = round(best["bf16"] / tb["bf16"], 3)
        res[model] = cell
    return res


def implementations(a):
    """(primitive, implementation, source data type) of every primitive executed in one step, per precision."""
    out = {}
    for model, data in (("gpt-mini", "synthetic"), ("cnn", "synthetic")):
        for p in ("fp32", "bf16"):
            env = dict(os.environ, ONEDNN_VERBOSE="1")
            d = os.path.join(a.out, "verbose-%s-%s" % (model, p))
            if os.path.exists(d):
                shutil.rmtree(d)
            r = run([a.bin, "train", "--model", model, "--data", data, "--batch", "4", "--steps", "1", "--threads",
                     "1", "--precision", p, "--eval-samples", "1", "--out", d], env)
            seen = set()
            for line in r.stdout.splitlines():
                f = line.split(",")
                if len(f) > 7 and f[0] == "onednn_verbose" and f[1] == "exec" and f[3] in ("matmul", "convolution", "gemm_api"):
                    src = f[6].split(" ")[0] if f[6] else ""
                    seen.add("%s %s %s" % (f[3], f[4], src))
            out["%s/%s" % (model, p)] = sorted(seen)
    return out


def losses(a):
    res = {"model": "gpt-mini", "data": "text", "batch": 8, "steps": a.loss_steps, "seeds": a.seeds,
           "last20_mean": {"fp32": [], "bf16": []}, "test_loss": {"fp32": [], "bf16": []}}
    for seed in a.seeds:
        for p in ("fp32", "bf16"):
            out = os.path.join(a.out, "loss-%s-%d" % (p, seed))
            s, _ = train(a.bin, out, "gpt-mini", p, a.threads, ["--data", "text", "--batch", "8", "--steps",
                                                                   str(a.loss_steps), "--seed", str(seed), "--eval-samples", "256"])
            loss = loss_curve(os.path.join(out, "metrics.h5"))
            res["last20_mean"][p].append(round(sum(loss[-20:]) / len(loss[-20:]), 4))
            res["test_loss"][p].append(round(s.get("test_loss", float("nan")), 4))
            print("loss", p, "seed", seed, res["last20_mean"][p][-1], res["test_loss"][p][-1], flush=True)
    for k in ("last20_mean", "test_loss"):
        f, b = res[k]["fp32"], res[k]["bf16"]
        res[k]["bf16_inside_fp32_range"] = all(min(f) <= x <= max(f) for x in b)
        res[k]["bf16_mean_minus_fp32_mean"] = round(sum(b) / len(b) - sum(f) / len(f), 4)
        res[k]["fp32_range"] = round(max(f) - min(f), 4)
    return res


def loss_curve(path):
    import h5py
    with h5py.File(path, "r") as f:
        return [float(x) for x in f["steps"]["loss"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gpt2 gpt-mini")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--loss-steps", type=int, default=200)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default="runs/precision")
    ap.add_argument("--results")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "dreamddp"))
    ap.add_argument("--skip", default="", help="comma list of parts to skip: steps, verbose, loss")
    a = ap.parse_args()
    a.models, a.seeds = a.models.split(), [int(s) for s in a.seeds.split(",")]
    skip = set(filter(None, a.skip.split(",")))
    command = provenance.shell_command(["experiments/bench_precision.py"] + sys.argv[1:], ("PEER_PYTHON",))
    start = provenance.start(REPO)
    os.makedirs(a.out, exist_ok=True)
    py = peer_python()
    doc = {"study": "precision_bf16", "threads": a.threads}
    if "verbose" not in skip:
        doc["onednn_implementations"] = implementations(a)
    if "steps" not in skip:
        doc["step_time"] = step_times(a, py)
    if "loss" not in skip:
        doc["loss"] = losses(a)
    provenance.stamp(doc, command, start)
    print(json.dumps(doc, indent=1))
    if a.results:
        provenance.write_json_atomic(a.results, doc)


if __name__ == "__main__":
    main()
