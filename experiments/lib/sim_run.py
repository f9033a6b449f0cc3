"""Running the simulator for experiments/sim_studies.py: one simulated run (or the schedule solver) as JSON, with
the policies the studies compare and the step window they read."""
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
BATCH = 8  # per-rank sequences (samples/s); the artifact's per-worker batch is not in its profiles


def simulate(binary, args, steady_from=None, batch=BATCH, plan=False):
    """Runs one simulation; returns its summary, plus steady-state step_ms over steps >= steady_from, and with
    `plan` the plan rank 0 printed (its last one)."""
    with tempfile.TemporaryDirectory(prefix="dd_sim_study_") as out:
        cmd = [binary, "simulate"] + args + ["--out", os.path.join(out, "run")]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
        s = json.loads(p.stdout.strip().splitlines()[-1])
        s["wall_s"] = round(time.time() - t0, 2)
        s["command"] = "dreamddp simulate " + " ".join(a.replace(ROOT + "/", "") for a in args)
        if plan:
            lines = [l for l in p.stderr.splitlines() if not l.startswith(("simulate:", "simulated ", "sync: policy"))]
            s["plan"] = "\n".join(lines[-3:])
        if steady_from is not None:
            with h5py.File(os.path.join(out, "run", "metrics.h5"), "r") as f:
                st = f["steps"][:]
            # Never before the run's own timed window (whole periods): a dreamddp that measures both schedules (its
            # trial) settles later than the fixed steady state, and is then timed over that window.
            first, end = int(s["timed_steps"][0]), int(s["timed_steps"][1])
            if first > steady_from:
                steady_from = first
                st = st[st["step"] < end]
            sel = st[st["step"] >= steady_from]
            prev = st[st["step"] == steady_from - 1]["wall_time_s"]
            span = sel["wall_time_s"][-1] - (prev[0] if len(prev) else 0)
            s["step_ms"] = span / len(sel) * 1e3
            tot = np.diff(np.concatenate([[prev[0] if len(prev) else 0], sel["wall_time_s"]])) * 1e3
            s["exposed_comm_fraction"] = float(sel["exposed_comm_ms"].sum() / tot.sum())
            s["samples_per_s"] = batch * s["world"] / (s["step_ms"] / 1e3)
        return s


def schedule(binary, prof, h):
    p = subprocess.run([binary, "schedule", "--profile", prof, "--h", str(h), "--fillin"], capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# dreamddp:h=10 profiles itself in the simulation (6 lock-step steps, then the engine's comm estimate on the
# simulated network); "+profile" schedules from the profile directory's comm times instead (the artifact's).
POLICIES = ["ddp", "localsgd:k=10", "plsgd:h=10", "dreamddp:h=10", "dreamddp:h=10+profile"]
STEADY = 16  # steady state: steps >= 16 (after dreamddp's and hier's profiling steps), or the run's timed window
# where that starts later (dreamddp:h=10's trial, where it runs one, ends at step 60: runs are long enough for it,
# and then timed over whole periods)


def policy_args(pol, prof):
    return pol.replace("+profile", ",profile=" + prof)
