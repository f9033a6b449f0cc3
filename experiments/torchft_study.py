#!/usr/bin/python3
"""torchft study: our periodic and layer-wise policies against torchft 0.2.0's LocalSGD, DiLoCo and Streaming
DiLoCo on the same emulated cluster, model, data shapes, batch and optimizer, alternating run by run.

  /usr/bin/python3 experiments/torchft_study.py --out runs/torchft --results experiments/results/torchft.json
      [--nets 1gbit,100mbit] [--repeats 2] [--steps 24] [--warmup 8] [--model SPEC] [--optimizer adamw] [--batch 1]
      [--ranks 2] [--ours POLICY;POLICY;...] [--torchft ALGO;ALGO;...] [--figure docs/figures/torchft.png]

Each (network, repeat) is one group of runs that holds the machine-wide lock (/tmp/dd-measure.lock, flock) for
its duration only; odd repeats run the list in order, even ones reversed, ours and torchft's interleaved. Ours:
`dreamddp launch -n R --netem NET -- train --data synthetic ... --policy P` with a constant learning rate (sgd
0.01 momentum 0.9, or adamw 1e-3, as the peer); its samples/s is the summary's (whole periods after the first).
torchft: the same launch running peers/torchft_peer.py (rank 0 hosts the lighthouse); its samples/s is over the
inner steps after --warmup. Loss curves: rank 0's training loss against seconds since its first step ended.

Every run is appended to OUT/records.jsonl (and the set-up to OUT/study.json) as it ends:
`torchft_study.py --from-records OUT RESULTS PNG` writes the results file and the figure of a study that was
stopped early; `--figure-only RESULTS PNG` redraws the figure.

Environment: DREAMDDP_BIN (default build/dreamddp), PEER_PYTHON (default .venv-peer/bin/python). Needs root (the
emulated cluster's namespaces). Exit 2 on bad arguments, nothing written.
"""
import argparse
import fcntl
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
import provenance  # noqa: E402
import peer_rules  # noqa: E402

LOCK = "/tmp/dd-measure.lock"
PEER = os.path.join(REPO, "peers", "torchft_peer.py")
# torchft algorithms: name -> (torchft_peer.py arguments, our policy it matches)
TORCHFT = {
    "localsgd": ["--algo", "localsgd"],
    "diloco": ["--algo", "diloco"],
    "streaming": ["--algo", "diloco", "--fragments", "4", "--fragment-sync-delay", "1"],
}


def preflight(a, fail):
    """The checks both torchft scripts make before any run: --out and --results given, root, a results file that
    would not be overwritten, an empty --out, the binary and the peer's interpreter (peer_rules.peer_python)."""
    a.peer_python = peer_rules.peer_python(REPO)
    if not a.out or not a.results:
        fail("--out DIR and --results FILE are required")
    if os.geteuid() != 0:
        fail("needs root (the emulated cluster's network namespaces)")
    if os.path.exists(a.results):
        fail("%s exists; move it aside first" % a.results)
    if os.path.exists(a.out) and os.listdir(a.out):
        fail("--out %s is not empty" % a.out)
    if not os.access(a.bin, os.X_OK):
        fail("no dreamddp binary at %s (DREAMDDP_BIN)" % a.bin)
    if not os.access(a.peer_python, os.X_OK):
        fail("no peer interpreter at %s (PEER_PYTHON, or make deps-peer)" % a.peer_python)


def fail(msg):
    sys.stderr.write("torchft_study: %s\n" % msg)
    sys.exit(2)


def safe(s):
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-")


def steps_curve(h5):
    """[[seconds since step 1 ended, step, loss]] from our metrics.h5 /steps."""
    import h5py
    with h5py.File(h5, "r") as f:
        s = f["steps"]
        t, st, loss = s["wall_time_s"][:], s["step"][:], s["loss"][:]
    if not len(t):
        return []
    return [[round(float(a - t[0]), 3), int(b), round(float(c), 4)] for a, b, c in zip(t, st, loss)]


def run_ours(a, net, policy, outdir):
    d = os.path.join(outdir, net, "ours-" + safe(policy) + ".r%d" % a._rep)
    opt = ["--optimizer", a.optimizer, "--lr", "0.001" if a.optimizer == "adamw" else "0.01",
           "--lr-schedule", "const", "--warmup", "0"] + (["--momentum", "0.9"] if a.optimizer == "sgd" else [])
    cmd = [a.bin, "launch", "-n", str(a.ranks), "--netem", net, "--", "train", "--model", a.model, "--data",
           "synthetic", "--batch", str(a.batch), "--threads", "1", "--steps", str(a.warmup + a.steps), "--policy",
           policy, "--eval-samples", "8", "--out", d, "--log-every", "8"] + opt
    os.makedirs(os.path.dirname(d), exist_ok=True)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    run_s = time.time() - t0
    with open(d + ".log", "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError("ours %s on %s failed (rc %d), log %s.log" % (policy, net, p.returncode, d))
    s = json.load(open(os.path.join(d, "summary.json")))
    return {"system": "dreamddp", "method": policy, "class": "dreamddp train --policy " + policy,
            "samples_per_s": round(s["samples_per_s"], 3), "step_ms": round(s["step_ms"], 1),
            "final_loss": round(s["final_loss"], 4), "comm_bytes": s.get("comm_bytes"),
            "exposed_comm_fraction": s.get("exposed_comm_fraction"), "timed_steps": s.get("timed_steps"),
            "run_s": round(run_s, 1), "curve": steps_curve(os.path.join(d, "metrics.h5")),
            "command": shown(a, cmd), "run_dir": d}


def shown(a, cmd):
    """The command line as a reader reruns it: the binary and the peer's interpreter by their variables."""
    names = {a.bin: "$DREAMDDP_BIN", a.peer_python: "$PEER_PYTHON", PEER: "peers/torchft_peer.py"}
    return " ".join(names.get(x) or shlex.quote(provenance.rel_to_repo(x, REPO)) for x in cmd)


def run_torchft(a, net, algo, outdir):
    d = os.path.join(outdir, net, "torchft-" + algo + ".r%d" % a._rep)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    args = TORCHFT[algo] + ["--sync-every", str(a.h), "--model", a.model, "--optimizer", a.optimizer, "--batch",
                            str(a.batch), "--steps", str(a.steps), "--warmup", str(a.warmup)]
    cmd = [a.bin, "launch", "-n", str(a.ranks), "--netem", net, "--", "/usr/bin/env", "THREADS=1",
           "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", a.peer_python, PEER] + args
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    run_s = time.time() - t0
    with open(d + ".log", "w") as f:
        f.write(p.stdout + p.stderr)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError("torchft %s on %s failed (rc %d), log %s.log" % (algo, net, p.returncode, d))
    j = json.loads(lines[-1])
    cls = "%s(%s)" % (j["class"], ", ".join("%s=%s" % kv for kv in j["settings"].items()))
    return {"system": "torchft", "method": algo, "class": cls, "samples_per_s": j["samples_per_s"],
            "step_ms": j["step_ms"], "final_loss": j["final_loss"], "run_s": round(run_s, 1),
            "curve": j["loss_curve"], "commits": len([c for c in j["commits"] if c[3]]),
            "failed_commits": len([c for c in j["commits"] if not c[3]]), "peer_line": {
                k: j[k] for k in ("peer", "torch", "blas", "gemm_gflops", "threads")},
            "command": shown(a, cmd), "run_dir": d}


def peer_gemm_alone(python):
    """The peer's one-thread GEMM rate measured alone at the start (torch_ddp.one_thread_gemm_gflops, the rate
    torchft_peer.py reports in its run): judges the peer beside its in-run rate (peer_rules.judge_peer)."""
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import torch_ddp; torch.set_num_threads(1); "
            "print(torch_ddp.one_thread_gemm_gflops())")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([python, "-c", code, os.path.join(REPO, "peers")], capture_output=True, text=True, env=env,
                       timeout=300)
    try:
        return float(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="run folders go here (required; empty or new)")
    ap.add_argument("--results", help="the results file to write (required; must not exist)")
    ap.add_argument("--figure", default=os.path.join(REPO, "docs", "figures", "torchft.png"))
    ap.add_argument("--nets", default="1gbit,100mbit")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=24, help="timed steps (after --warmup)")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--sync-every", dest="h", type=int, default=8)
    ap.add_argument("--model", default="gpt2:layers=12,d=512,heads=8,ctx=128,vocab=8192")
    ap.add_argument("--optimizer", default="adamw", choices=["sgd", "adamw"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--ours", default="localsgd:k=8;dreamddp:h=8;dreamddp:h=8,delay=1,outer=nesterov;"
                    "dreamddp:h=8,delay=1,outer=nesterov,compress=int8")
    ap.add_argument("--torchft", default="localsgd;diloco;streaming")
    ap.add_argument("--bin", default=os.environ.get("DREAMDDP_BIN", os.path.join(REPO, "build", "dreamddp")))
    a = ap.parse_args()
    preflight(a, fail)
    if min(a.repeats, a.steps, a.h, a.batch, a.ranks) < 1 or a.warmup < 0:
        fail("--repeats, --steps, --h, --batch, --ranks must be positive, --warmup non-negative")
    ours = [p for p in a.ours.split(";") if p]
    tft = [x for x in a.torchft.split(";") if x]
    for x in tft:
        if x not in TORCHFT:
            fail("--torchft: %r is not one of %s" % (x, ", ".join(TORCHFT)))
    nets = [n for n in a.nets.split(",") if n]
    command = "DREAMDDP_BIN=... PEER_PYTHON=... /usr/bin/python3 experiments/torchft_study.py " + " ".join(
        shlex.quote(provenance.rel_to_repo(x, REPO)) for x in sys.argv[1:])
    start = provenance.start(REPO)
    our_gemm = peer_rules.our_gemm_gflops(a.bin)
    peer_alone = peer_gemm_alone(a.peer_python)
    print("torchft_study: GEMM ours %.1f GFLOP/s, the peer's alone %s, load %s" % (
        our_gemm, peer_alone, start["load_1m"]), flush=True)
    order = []
    for i in range(max(len(ours), len(tft))):
        if i < len(ours):
            order.append(("ours", ours[i]))
        if i < len(tft):
            order.append(("torchft", tft[i]))
    meta = {"command": command, "start": start, "our_gemm": our_gemm, "peer_alone": peer_alone, "set_up": {
        "model": a.model, "optimizer": a.optimizer, "lr": 0.001 if a.optimizer == "adamw" else 0.01,
        "lr_schedule": "const", "batch": a.batch, "ranks": a.ranks, "h": a.h, "warmup_steps": a.warmup,
        "timed_steps": a.steps, "data": "synthetic", "threads_per_rank": 1, "repeats": a.repeats, "nets": nets,
        "our_gemm_gflops": our_gemm, "peer_gemm_gflops_alone": peer_alone, "ours": ours,
        "torchft": {k: TORCHFT[k] for k in tft}}}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "study.json"), "w") as f:
        json.dump(meta, f, indent=1)
    runs = []
    for net in nets:
        for rep in range(1, a.repeats + 1):
            a._rep = rep
            seq = order if rep % 2 else order[::-1]
            with open(LOCK, "a") as lk:
                t_wait = time.time()
                fcntl.flock(lk, fcntl.LOCK_EX)
                print("torchft_study: %s repeat %d (lock after %.0f s)" % (net, rep, time.time() - t_wait), flush=True)
                for system, what in seq:
                    load = provenance.load_1m()
                    r = (run_ours if system == "ours" else run_torchft)(a, net, what, a.out)
                    r.update({"network": net, "repeat": rep, "load_1m": load, "noisy": peer_rules.noisy(load)})
                    runs.append(r)
                    with open(os.path.join(a.out, "records.jsonl"), "a") as f:  # --from-records can finish a cut study
                        f.write(json.dumps(r) + "\n")
                    print("  %-8s %-48s %8.3f samples/s  %7.0f ms/step  loss %.3f  %4.0f s  load %.1f" % (
                        r["system"], r["method"], r["samples_per_s"], r["step_ms"], r["final_loss"], r["run_s"],
                        load), flush=True)
                fcntl.flock(lk, fcntl.LOCK_UN)
    finish(meta, runs, a.results, a.figure)


def finish(meta, runs, results, figure_path):
    """The results file (one row per network, system and method: medians over repeats) and the figure."""
    our_gemm, peer_alone = meta["our_gemm"], meta.get("peer_alone")
    rows = []
    for key in dict.fromkeys((r["network"], r["system"], r["method"]) for r in runs):
        rs = [r for r in runs if (r["network"], r["system"], r["method"]) == key]
        row = {"network": key[0], "system": key[1], "method": key[2], "class": rs[0]["class"],
               "samples_per_s": statistics.median(r["samples_per_s"] for r in rs),
               "samples_per_s_runs": [r["samples_per_s"] for r in rs],
               "step_ms": statistics.median(r["step_ms"] for r in rs),
               "final_loss_runs": [r["final_loss"] for r in rs], "load_1m_runs": [r["load_1m"] for r in rs],
               "noisy": any(r["noisy"] for r in rs), "commands": [r["command"] for r in rs]}
        if key[1] == "torchft":
            judged = [peer_rules.judge_peer(r["peer_line"], our_gemm, peer_alone) for r in rs]
            row.update({"peer_ok": all(j[0] for j in judged), "peer_note": "; ".join(sorted({j[1] for j in judged})),
                        "peer_gemm_gflops_runs": [r["peer_line"]["gemm_gflops"] for r in rs],
                        "commits_runs": [r["commits"] for r in rs],
                        "failed_commits_runs": [r["failed_commits"] for r in rs]})
        else:
            row.update({"exposed_comm_fraction_runs": [r["exposed_comm_fraction"] for r in rs],
                        "comm_bytes": rs[0]["comm_bytes"], "timed_steps": rs[0]["timed_steps"]})
        rows.append(row)
    line = next((r["peer_line"] for r in runs if r["system"] == "torchft"), None)
    peer = None
    if line:
        peer = {"script": "peers/torchft_peer.py", "blas": line["blas"], "gemm_gflops": line["gemm_gflops"],
                "threads": line["threads"], "torch": line["torch"], "torchft": line["peer"][len("torchft-"):]}
    set_up = dict(meta["set_up"])
    set_up["repeats_done"] = {n: len({r["repeat"] for r in runs if r["network"] == n}) for n in set_up["nets"]}
    doc = {"study": "torchft", "set_up": set_up, "results": rows,
           "runs": [{k: v for k, v in r.items() if k not in ("run_dir",)} for r in runs]}
    for k in ("note",):
        if meta.get(k):
            doc[k] = meta[k]
    doc = provenance.repo_relative(provenance.stamp(doc, meta["command"], meta["start"], peer_block_=peer), REPO)
    os.makedirs(os.path.dirname(os.path.abspath(results)), exist_ok=True)
    provenance.write_json_atomic(results, doc)
    print("torchft_study: wrote %s" % results)
    figure(doc, figure_path)


def figure(doc, path):
    """Loss against wall time (one panel per network, repeat 1) and samples/s bars (median, runs as dots)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nets = doc["set_up"]["nets"]
    fig, axes = plt.subplots(1, len(nets) + 1, figsize=(5.2 * (len(nets) + 1), 5.0))
    methods = list(dict.fromkeys((r["system"], r["method"]) for r in doc["results"]))
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    for ax, net in zip(axes, nets):
        for r in doc["runs"]:
            if r["network"] != net or r["repeat"] != 1 or not r["curve"]:
                continue
            t = [c[0] for c in r["curve"]]
            y = [c[2] for c in r["curve"]]
            ax.plot(t, y, "-" if r["system"] == "dreamddp" else "--", color=colors[(r["system"], r["method"])],
                    lw=1.3, label="%s %s" % ("ours" if r["system"] == "dreamddp" else "torchft", r["method"]))
        ax.set_title("%s: training loss (rank 0), repeat 1" % net, fontsize=9)
        ax.set_xlabel("seconds since step 1")
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    ax = axes[-1]
    width = 0.8 / max(1, len(methods))
    for i, m in enumerate(methods):
        for k, net in enumerate(nets):
            row = next((r for r in doc["results"] if r["network"] == net and (r["system"], r["method"]) == m), None)
            if not row:
                continue
            x = k + (i - (len(methods) - 1) / 2) * width
            ax.bar(x, row["samples_per_s"], width, color=colors[m],
                   label=("ours " if m[0] == "dreamddp" else "torchft ") + m[1] if k == 0 else None,
                   hatch="" if m[0] == "dreamddp" else "//", edgecolor="black", lw=0.4)
            ax.plot([x] * len(row["samples_per_s_runs"]), row["samples_per_s_runs"], "k.", ms=3)
    ax.set_xticks(range(len(nets)))
    ax.set_xticklabels(nets)
    ax.set_ylabel("samples/s (median of repeats; dots: runs)")
    ax.set_title("throughput, %d ranks" % doc["set_up"]["ranks"], fontsize=9)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("%s, batch %d, %s: ours vs torchft %s" % (doc["set_up"]["model"], doc["set_up"]["batch"],
                                                          doc["set_up"]["optimizer"],
                                                          (doc.get("peer") or {}).get("torchft", "?")), fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    print("torchft_study: figure %s" % path)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--figure-only":  # --figure-only RESULTS PNG: redraw from a file
        figure(json.load(open(sys.argv[2])), sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "--from-records":  # --from-records OUT RESULTS PNG: a cut study
        recs = [json.loads(l) for l in open(os.path.join(sys.argv[2], "records.jsonl")) if l.strip()]
        finish(json.load(open(os.path.join(sys.argv[2], "study.json"))), recs, sys.argv[3], sys.argv[4])
    else:
        main()
