#!/usr/bin/python3
"""torchft fault study: one fault of a rank in the middle of a run (a SIGKILL and its restart, a SIGSTOP, or its link
cut), under torchft 0.2.0's fault
tolerance (LocalSGD; every rank a replica group, the lighthouse in rank 0, Manager min_replica_size=1, the killed
replica started again by its supervisor and healed from a live one) against ours (`train --on-peer-loss shrink`
under `launch --max-restarts`: survivors shrink, the lost rank rejoins), each against its own fault-free run.

  /usr/bin/python3 experiments/torchft_faults.py --out runs/torchft-faults --results experiments/results/torchft_faults.json
      [--ranks 3] [--netem 1gbit] [--model mlp] [--batch 32] [--steps 1600] [--sync-every 8] [--kill-at 25] [--repeats 1]
      [--faults kill,stop,partition] [--partition-s 6] [--restarts 3]

Rank 1 takes each fault of --faults, one per run, --kill-at seconds after the launch (rank 0 hosts torchft's
lighthouse and writes our metrics, so it is spared, as in experiments/chaos.py): kill, SIGKILL (the launcher or the
supervisor starts it again); stop, SIGSTOP for 2 x --timeout, then SIGCONT; partition, its link down for
--partition-s seconds (chaos.py's injections). Both systems use --timeout 3 for collectives. Each repeat runs the
fault-free reference of both systems once, then every fault; the order of the systems alternates per repeat.

Recovery per event. Ours: from metrics.h5 /events (shrink: detect, agree, rebuild, recover; rejoin: admitted
in), plus the time from the kill to the rejoin row's step. torchft: from rank 0's commit log (unix time, manager
step, participants, committed per sync): seconds from the kill to the first committed sync without the lost
replica (the survivors going on) and to the first committed sync with all replicas again (rejoined), and the
syncs that failed to commit meanwhile.

Goodput: samples in the final model per second of wall time (launch to exit) over the fault-free run's. Ours:
chaos.py's count (each step's world size from the shrink and rejoin events, times the batch). torchft: rank 0's
batches_committed (replicas summed over committed syncs) times H times the batch. Needs root. Exit 2 on bad
arguments.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
sys.path.insert(0, HERE)
import provenance  # noqa: E402
import chaos  # noqa: E402  (events, samples_in_model, children_env)
from torchft_study import preflight  # noqa: E402

LOCK = "/tmp/dd-measure.lock"
PEER = os.path.join(REPO, "peers", "torchft_peer.py")


def fail(msg):
    sys.stderr.write("torchft_faults: %s\n" % msg)
    sys.exit(2)


def pids_with_parent(ppid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def run(a, system, fault, d):
    """One run: returns its record. fault: None, or what rank 1 takes at --kill-at seconds (kill, stop, partition)."""
    if system == "ours":
        restarts = ["--max-restarts", str(a.restarts)] if fault else []
        cmd = [a.bin, "launch", "-n", str(a.ranks), "--netem", a.netem] + restarts + [
            "--", "train", "--model", a.model, "--data", "synthetic", "--batch", str(a.batch), "--threads", "1",
            "--steps", str(a.steps), "--policy", "localsgd:k=%d" % a.h, "--optimizer", "sgd", "--lr", "0.01",
            "--momentum", "0.9", "--lr-schedule", "const", "--warmup", "0", "--timeout", str(a.timeout),
            "--eval-samples", "8",
            "--on-peer-loss", "shrink", "--out", d, "--log-every", "200"]
    else:
        cmd = [a.bin, "launch", "-n", str(a.ranks), "--netem", a.netem, "--", "/usr/bin/env", "THREADS=1",
               "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", a.peer_python, PEER, "--algo",
               "localsgd", "--sync-every", str(a.h), "--model", a.model, "--optimizer", "sgd", "--batch",
               str(a.batch), "--steps", str(a.steps - a.h), "--warmup", str(a.h), "--timeout", str(a.timeout),
               "--heartbeat-timeout", "2", "--min-replicas", "1", "--supervise", str(a.restarts) if fault else "0"]
    os.makedirs(os.path.dirname(d), exist_ok=True)
    log = open(d + ".log", "w")
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE if system == "torchft" else log, stderr=log, text=True)
    kill = None
    if fault:
        while p.poll() is None and time.time() < t0 + a.kill_at:
            time.sleep(0.05)
        ranks = chaos.children_env(p.pid)
        if 1 in ranks:
            pid, env = ranks[1]
            if system == "torchft":  # the supervised child, not its supervisor
                kids = pids_with_parent(pid)
                pid = kids[0] if kids else None
            if pid:
                kill = time.time()
                try:
                    chaos.inject_pid(fault, pid, env, a)
                except (OSError, subprocess.CalledProcessError) as e:  # the rank ended meanwhile, or ip failed
                    print("torchft_faults: %s of rank 1 failed: %s" % (fault, e), file=sys.stderr)
                    kill = None
    out = p.communicate(timeout=a.limit_s)[0] if system == "torchft" else (p.wait(timeout=a.limit_s) and "")
    wall = time.time() - t0
    log.close()
    shown = " ".join({a.bin: "$DREAMDDP_BIN", a.peer_python: "$PEER_PYTHON", PEER: "peers/torchft_peer.py"}.get(x)
                     or shlex.quote(provenance.rel_to_repo(x, REPO)) for x in cmd)
    r = {"system": system, "fault": "%s rank 1" % fault if fault else None, "rc": p.returncode,
         "wall_s": round(wall, 2),
         "kill_s_after_launch": round(kill - t0, 2) if kill else None, "command": shown}
    if system == "ours":
        evs = chaos.events(os.path.join(d, "metrics.h5"))
        summary = None
        if p.returncode == 0 and os.path.isfile(os.path.join(d, "summary.json")):
            summary = json.load(open(os.path.join(d, "summary.json")))
        r["samples"] = chaos.samples_in_model("rejoin" if fault else "none", evs, a.steps, a.ranks, a.batch,
                                              summary, d)
        r["events"] = [[s, k, dt] for s, k, dt in evs if k in ("shrink", "rejoin", "shrink-quorum-lost")]
        r["final_loss"] = summary.get("final_loss") if summary else None
    else:
        lines = [l for l in (out or "").splitlines() if l.startswith("{")]
        with open(d + ".json", "w") as f:
            f.write(lines[-1] + "\n" if lines else "")
        j = json.loads(lines[-1]) if lines else None
        r["samples"] = j["batches_committed"] * a.h * a.batch if j else 0
        r["final_loss"] = j["final_loss"] if j else None
        if j:
            r["commits"] = j["commits"]
            if kill:
                after = [c for c in j["commits"] if c[0] > kill]
                down = next((c for c in after if c[3] and c[2] < a.ranks), None)
                # all again: after the survivors went on without it (a sync in flight at the fault may still
                # commit with every replica)
                back = next((c for c in after if c[3] and c[2] == a.ranks and down and c[0] > down[0]), None)
                r["recovery"] = {"to_first_commit_without_lost_s": round(down[0] - kill, 2) if down else None,
                                 "to_first_commit_with_all_again_s": round(back[0] - kill, 2) if back else None,
                                 "failed_commits": len([c for c in after if not c[3]])}
    print("torchft_faults: %-7s %-12s rc %d  %.1f s  samples %d" % (system, r["fault"] or "no fault", p.returncode,
                                                                   wall, r["samples"]), flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="run folders (required; empty or new)")
    ap.add_argument("--results", help="results file (required; must not exist)")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--netem", default="1gbit")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--sync-every", dest="h", type=int, default=8)
    ap.add_argument("--kill-at", type=float, default=25)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--faults", default="kill", help="comma-separated: kill, stop, partition")
    ap.add_argument("--partition-s", type=float, default=6)
    ap.add_argument("--restarts", type=int, default=3, help="restarts of a rank: launch --max-restarts (ours), "
                    "the peer's --supervise (torchft)")
    ap.add_argument("--limit-s", type=float, default=600)
    ap.add_argument("--bin", default=os.environ.get("DREAMDDP_BIN", os.path.join(REPO, "build", "dreamddp")))
    a = ap.parse_args()
    preflight(a, fail)
    if a.ranks < 3:
        fail("--ranks must be at least 3 (ours continues only with more than half of the ranks)")
    if (a.steps % a.h or a.steps <= a.h or min(a.batch, a.repeats, a.restarts) < 1
            or min(a.kill_at, a.partition_s) <= 0):
        fail("--steps must be a multiple of --sync-every above it; --batch, --repeats, --kill-at, --partition-s, "
             "--restarts positive")
    faults = [f for f in a.faults.split(",") if f]
    if not faults or any(f not in ("kill", "stop", "partition") for f in faults) or len(set(faults)) < len(faults):
        fail("--faults: one or more of kill, stop, partition, each once (got %r)" % a.faults)
    a.timeout = 3  # both systems' collectives; a stop lasts twice it (chaos.inject_pid)
    command = "DREAMDDP_BIN=... PEER_PYTHON=... /usr/bin/python3 experiments/torchft_faults.py " + " ".join(
        shlex.quote(provenance.rel_to_repo(x, REPO)) for x in sys.argv[1:])
    start = provenance.start(REPO)
    runs = []
    with open(LOCK, "a") as lk:
        fcntl_lock(lk)
        for rep in range(1, a.repeats + 1):
            systems = ("ours", "torchft") if rep % 2 else ("torchft", "ours")
            for fault in [None] + faults:
                for system in systems:
                    d = os.path.join(a.out, "%s-%s.r%d" % (system, fault or "none", rep))
                    r = run(a, system, fault, d)
                    r.update({"repeat": rep, "load_1m": provenance.load_1m()})
                    runs.append(r)
    for r in runs:
        ref = [x for x in runs if x["system"] == r["system"] and not x["fault"] and x["repeat"] == r["repeat"]]
        ok = r["rc"] == 0 and ref and ref[0]["samples"] and ref[0]["wall_s"]
        r["goodput"] = round((r["samples"] / r["wall_s"]) / (ref[0]["samples"] / ref[0]["wall_s"]), 3) if ok else None
        r["delivered"] = round(r["samples"] / float(a.steps * a.ranks * a.batch), 3)
    doc = {"study": "torchft_faults", "set_up": {k: getattr(a, k) for k in (
        "ranks", "netem", "model", "batch", "steps", "h", "kill_at", "repeats", "faults", "partition_s",
        "restarts")}, "runs": runs}
    peer = None
    for r in runs:
        if r["system"] == "torchft" and r.get("commits") is not None:
            j = json.loads(open(os.path.join(a.out, "torchft-%s.r%d.json" % (
                r["fault"].split()[0] if r["fault"] else "none", r["repeat"]))).read())
            peer = {"script": "peers/torchft_peer.py", "blas": j["blas"], "gemm_gflops": j["gemm_gflops"],
                    "threads": j["threads"], "torch": j["torch"], "torchft": j["peer"][len("torchft-"):]}
            break
    doc = provenance.repo_relative(provenance.stamp(doc, command, start, peer_block_=peer), REPO)
    provenance.write_json_atomic(a.results, doc)
    print("torchft_faults: wrote %s" % a.results)


def fcntl_lock(f):
    import fcntl
    fcntl.flock(f, fcntl.LOCK_EX)


if __name__ == "__main__":
    main()
