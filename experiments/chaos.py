#!/usr/bin/python3
"""Chaos study: a 4-rank run on an emulated 1 Gbit/s cluster while faults are injected, under three ways of
handling a lost rank, against the same run without faults (docs/elastic.md, docs/results/elastic.md).

Modes:
  none      no fault (the reference: its samples per second are goodput 1.0)
  rejoin    `train --on-peer-loss shrink` under `launch --max-restarts`: survivors shrink, the lost rank is
            started again and rejoins the live world
  restart   `launch --max-restarts` with `train --checkpoint-every`: the job restarts from its newest checkpoint
  exit      the default: the first lost rank ends the job with exit 3 (the last checkpoint is what is left)

Faults (one every --every seconds from the start of training, ranks 1..N-1 chosen by a seeded generator; rank 0 is
spared because it writes metrics.h5):
  kill       SIGKILL
  stop       SIGSTOP for 2 x --timeout, then SIGCONT
  partition  the rank's link down for --partition-s seconds (ip link set down inside its network namespace)

Goodput: samples that made it into the final model per second of wall time (launch to exit), over the fault-free
run's (the median rate of --baselines such runs, spread over the sitting). Under rejoin the samples of a step are
its world size times the batch (from the shrink and rejoin events); under restart every step of the final lineage
counts once with all ranks; under exit the samples up to the last
checkpoint. Needs root (network namespaces). Usage:

  /usr/bin/python3 experiments/chaos.py --out runs/chaos --results experiments/results/chaos.json
"""
import argparse
import json
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
import provenance  # noqa: E402


def children_env(launcher_pid):
    """{rank: (pid, environ dict)} of the launcher's child processes."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != launcher_pid:
                continue
            with open("/proc/%s/environ" % d, "rb") as f:
                env = dict(kv.split("=", 1) for kv in f.read().decode(errors="replace").split("\0") if "=" in kv)
        except (OSError, IndexError, ValueError):
            continue
        if "RANK" in env:
            out[int(env["RANK"])] = (int(d), env)
    return out


def inject(kind, launcher_pid, rank, a, log):
    ranks = children_env(launcher_pid)
    if rank not in ranks:
        log.append({"t": None, "kind": kind, "rank": rank, "done": False})
        return
    pid, env = ranks[rank]
    t = time.time()
    try:
        inject_pid(kind, pid, env, a)
    except (OSError, subprocess.CalledProcessError) as e:  # the rank ended meanwhile, or ip failed
        log.append({"t": t, "kind": kind, "rank": rank, "done": False, "error": str(e)})
        return
    log.append({"t": t, "kind": kind, "rank": rank, "done": True})


def inject_pid(kind, pid, env, a):
    """One fault into process `pid` (environ `env`): kill, stop (2 x a.timeout) or partition (a.partition_s)."""
    if kind == "kill":
        os.kill(pid, signal.SIGKILL)
    elif kind == "stop":
        os.kill(pid, signal.SIGSTOP)
        time.sleep(2 * a.timeout)
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    elif kind == "partition":
        ns, dev = env.get("DREAMDDP_NETNS"), env.get("GLOO_SOCKET_IFNAME")
        subprocess.run(["ip", "-n", ns, "link", "set", "dev", dev, "down"], check=True)
        time.sleep(a.partition_s)
        subprocess.run(["ip", "-n", ns, "link", "set", "dev", dev, "up"], check=True)


def events(h5):
    try:
        import h5py
        with h5py.File(h5, "r") as f:
            ev = f["events"]
            dec = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
            return [(int(s), dec(k), dec(d)) for s, k, d in zip(ev["step"], ev["kind"], ev["detail"])]
    except (OSError, KeyError):
        return []


def samples_in_model(mode, evs, steps, world, batch, summary, out):
    """Samples that made it into the final model (see the module doc)."""
    if mode in ("none", "restart"):
        return steps * world * batch if summary else 0
    if mode == "exit":
        ck = [s for s, k, _ in evs if k == "checkpoint"]
        return (max(ck) + 1) * world * batch if ck else 0
    # rejoin: the world size of each step, from the shrink and rejoin events ("4 -> 3 ranks")
    changes = sorted((s, int(m.group(1))) for s, k, d in evs if k in ("shrink", "rejoin")
                     for m in [re.search(r"-> (\d+) ranks", d)] if m)
    total, cur, last = 0, world, 0
    for s, w in changes:
        total += (s - last) * cur
        cur, last = w, s
    total += (steps - last) * cur
    return total * batch if summary else 0


def run_one(a, model, steps, policy, mode, fault, seed, tag=""):
    out = os.path.join(a.out, "%s_%s_%s_%s%s" % (model, re.sub(r"[^a-z0-9]+", "_", policy), mode, fault, tag))
    if os.path.exists(out):
        sys.exit("chaos: %s exists; pass another --out (an earlier study is never overwritten)" % out)
    train = ["train", "--model", model, "--data", a.data, "--batch", str(a.batch), "--steps", str(steps),
             "--threads", "1", "--policy", policy, "--eval-every", "0", "--timeout", str(a.timeout),
             "--seed", str(a.seed), "--out", out, "--log-every", "50"]
    launch = [a.bin, "launch", "-n", str(a.ranks), "--netem", a.netem]
    if mode == "rejoin":
        launch += ["--max-restarts", "100"]
        train += ["--on-peer-loss", "shrink"]
        if a.heartbeat is not None:
            train += ["--heartbeat", str(a.heartbeat)]
    elif mode == "restart":
        launch += ["--max-restarts", "100"]
        train += ["--checkpoint-every", str(a.checkpoint_every)]
    elif mode == "exit":
        train += ["--checkpoint-every", str(a.checkpoint_every)]
    os.makedirs(a.out, exist_ok=True)
    logpath = out + ".log"
    t0 = time.time()
    with open(logpath, "w") as logf:
        p = subprocess.Popen(launch + ["--"] + train, stdout=subprocess.DEVNULL, stderr=logf)
        faults, rng, nxt = [], random.Random(seed), t0 + a.every
        limit = t0 + a.limit_s
        while p.poll() is None:
            now = time.time()
            if now > limit:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                break
            if mode != "none" and now >= nxt:
                inject(fault, p.pid, rng.randrange(1, a.ranks), a, faults)
                nxt = max(nxt + a.every, time.time() + 1)
                continue
            time.sleep(0.1)
        rc = p.wait()
    wall = time.time() - t0
    summary = None
    if os.path.isfile(os.path.join(out, "summary.json")) and rc == 0:
        summary = json.load(open(os.path.join(out, "summary.json")))
    evs = events(os.path.join(out, "metrics.h5"))
    samples = samples_in_model(mode, evs, steps, a.ranks, a.batch, summary or (mode == "exit"), out)
    rec = []
    for s, k, d in evs:
        m = re.search(r"detect ([0-9.]+) s, agree ([0-9.]+) s, rebuild ([0-9.]+) s, recover ([0-9.]+) s", d)
        if m:
            rec.append({"step": s, "kind": k, "detect_s": float(m.group(1)), "agree_s": float(m.group(2)),
                        "rebuild_s": float(m.group(3)), "recover_s": float(m.group(4))})
        m = re.search(r"admitted in ([0-9.]+) s", d)
        if m:
            rec.append({"step": s, "kind": k, "admit_s": float(m.group(1))})
    restarts = sum(1 for _, k, _ in evs if k == "restart")
    r = {"model": model, "steps": steps, "policy": policy, "mode": mode, "fault": fault if mode != "none" else None, "rc": rc, "wall_s": round(wall, 2),
         "faults": faults, "samples": samples, "accuracy": summary.get("test_accuracy") if summary else None,
         "recoveries": rec, "restarts": restarts, "timed_out": wall >= a.limit_s,
         "events": [[s, k, d] for s, k, d in evs if k in ("shrink", "rejoin", "restart", "shrink-quorum-lost")]}
    print("chaos: %-4s %-14s %-8s %-9s rc %d  %.1f s  %d faults  samples %d  acc %s" % (
        model, policy, mode, fault, rc, wall, len(faults), samples, r["accuracy"]), flush=True)
    return r


def policies_of(a):
    """--policies: comma-separated, or ';'-separated where a policy has commas of its own (one such policy: end it
    with ';', e.g. 'dreamddp:h=8,profile=D;')."""
    return [p for p in a.policies.split(";" if ";" in a.policies else ",") if p]


def overhead(a, start):
    """--overhead N: the fault-free cost of being ready for one. The same run with the default (--on-peer-loss
    exit) and with shrink (the values an in-place average of the state overwrites kept until it completes, a look
    for joiners every period), alternating, N times each, the order swapped every repeat (exit first in even
    repeats, shrink first in odd ones); the summary's samples/s (timed steps only) of each."""
    model, steps = a.models.split(",")[0].partition("=")[::2]
    rows = []
    for rep in range(a.overhead):
        for policy in policies_of(a):
            for mode in (("exit", "shrink") if rep % 2 == 0 else ("shrink", "exit")):
                out = os.path.join(a.out, "overhead_%s_%s_%s_%d" % (model, re.sub(r"[^a-z0-9]+", "_", policy), mode,
                                                                    rep))
                if os.path.exists(out):
                    sys.exit("chaos: %s exists; pass another --out" % out)
                cmd = [a.bin, "launch", "-n", str(a.ranks), "--netem", a.netem, "--", "train", "--model", model,
                       "--data", a.data, "--batch", str(a.batch), "--steps", steps or "600", "--threads", "1",
                       "--policy", policy, "--eval-every", "0", "--timeout", str(a.timeout), "--seed", str(a.seed),
                       "--out", out, "--on-peer-loss", mode]
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                sm = json.load(open(os.path.join(out, "summary.json")))
                rows.append({"policy": policy, "mode": mode, "repeat": rep, "samples_per_s": sm["samples_per_s"],
                             "step_ms": sm["step_ms"]})
                print("chaos: overhead %-14s %-6s repeat %d: %.0f samples/s" % (policy, mode, rep,
                                                                               sm["samples_per_s"]), flush=True)
    return {"study": "shrink_overhead", "set_up": {"model": model, "steps": int(steps or 600), "data": a.data,
                                                   "batch": a.batch, "ranks": a.ranks, "netem": a.netem,
                                                   "repeats": a.overhead}, "runs": rows}


def write_results(path, doc):
    if not path:
        return
    if os.path.exists(path):  # appeared while the study ran: keep both
        path += ".new"
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print("chaos: wrote %s" % path)


def plan_of(a, steps):
    """The runs, in order: (model, policy, mode, fault, tag). Per model and policy the first fault-free run comes
    before the faulted ones, any more (--baselines) after them, so that the reference spans the sitting."""
    plan = []
    for model in steps:
        for policy in policies_of(a):
            for mode in a.modes.split(","):
                for fault in (["kill"] if mode == "none" else a.faults.split(",")):
                    plan.append((model, policy, mode, fault, ""))
            if "none" in a.modes.split(","):
                plan += [(model, policy, "none", "kill", "_%d" % b) for b in range(2, a.baselines + 1)]
    return plan + [tuple(x.split("/")) + ("",) for x in a.extra.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "dreamddp"))
    ap.add_argument("--out", help="runs go under here (required; must not hold an earlier study's runs)")
    ap.add_argument("--results", help="write the results file here")
    ap.add_argument("--policies", default="localsgd:k=8,dreamddp:h=8",
                    help="comma-separated; separate with ; where a policy has commas ('dreamddp:h=8,profile=DIR;')")
    ap.add_argument("--modes", default="none,rejoin,restart,exit")
    ap.add_argument("--faults", default="kill", help="fault kinds for the modes with faults (kill,stop,partition)")
    ap.add_argument("--extra", default="", help="more MODEL/POLICY/MODE/FAULT runs, e.g. mlp/localsgd:k=8/rejoin/stop")
    ap.add_argument("--models", default="mlp", help="models, with their step counts: mlp=3600,cnn=600")
    ap.add_argument("--data", default="fashion-mnist")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--netem", default="1gbit")
    ap.add_argument("--timeout", type=float, default=3)
    ap.add_argument("--heartbeat", type=float, default=None,
                    help="train --heartbeat S for the rejoin runs (default: the binary's, a tenth of --timeout, >= 1 s)")
    ap.add_argument("--baselines", type=int, default=1, metavar="N",
                    help="fault-free runs per model and policy (the first before the faulted ones, the rest after); "
                         "goodput is over their median rate")
    ap.add_argument("--every", type=float, default=20, help="seconds between faults")
    ap.add_argument("--partition-s", type=float, default=10)
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit-s", type=float, default=900, help="a run still going after this is stopped")
    ap.add_argument("--overhead", type=int, default=0, metavar="N",
                    help="instead: the fault-free cost of --on-peer-loss shrink, N alternating repeats")
    a = ap.parse_args()
    if not a.out:
        ap.error("--out DIR is required")
    if os.geteuid() != 0:
        ap.exit(2, "chaos: needs root (the emulated cluster's network namespaces)\n")
    if not os.access(a.bin, os.X_OK):
        ap.exit(2, "chaos: --bin %s: not an executable (make build)\n" % a.bin)
    start = provenance.start(REPO)
    cmd = "/usr/bin/python3 experiments/chaos.py " + " ".join(
        shlex.quote(x if not x.startswith("/") else provenance.rel_to_repo(x, REPO)) for x in sys.argv[1:])
    if not 1 <= a.baselines <= 10:
        ap.exit(2, "chaos: --baselines %d: expected 1..10\n" % a.baselines)
    if a.results and os.path.exists(a.results):
        ap.exit(2, "chaos: %s exists; move it to the history first\n" % a.results)
    if a.overhead:
        write_results(a.results, provenance.stamp(overhead(a, start), cmd, start))
        return
    steps = {}
    for m in a.models.split(","):
        name, _, n = m.partition("=")
        steps[name] = int(n or 1200)
    runs = []
    for i, (model, policy, mode, fault, tag) in enumerate(plan_of(a, steps)):
        runs.append(run_one(a, model, steps[model], policy, mode, fault, a.seed + i, tag))
    for r in runs:
        # Every run: the share of the requested samples in its final model. Goodput only for a run that finished
        # every requested step (one that ended short has not earned a ratio of rates), over the median rate of the
        # model and policy's finished fault-free runs.
        r["delivered"] = round(r["samples"] / float(r["steps"] * a.ranks * a.batch), 3)
        ref = [x["samples"] / x["wall_s"] for x in runs if x["model"] == r["model"] and x["policy"] == r["policy"]
               and x["mode"] == "none" and x["rc"] == 0 and not x["timed_out"] and x["samples"] and x["wall_s"]]
        finished = r["rc"] == 0 and not r["timed_out"]
        if finished and ref:
            r["goodput"] = round((r["samples"] / r["wall_s"]) / statistics.median(ref), 3)
        else:
            r["goodput"] = None
    doc = {"study": "chaos", "set_up": {k: getattr(a, k) for k in (
        "models", "data", "batch", "ranks", "netem", "timeout", "heartbeat", "every", "partition_s",
        "checkpoint_every", "seed", "baselines")}, "runs": runs}
    write_results(a.results, provenance.stamp(doc, cmd, start))


if __name__ == "__main__":
    main()
