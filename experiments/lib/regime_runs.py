"""The regime map's cells and runs (experiments/regime_map.py): cell names and batches, running a command with a
time limit, and reading what a run and the schedule solver wrote."""
import json
import os
import subprocess
import sys
import time


BATCH = {"mlp": 64, "cnn": 64, "resnet20": 64, "gpt-mini": 8, "resnet18": 32, "resnet50": 32, "gpt2": 1, "llama": 1}


def family(spec):
    """The model family of a spec ('gpt2:layers=4,d=384' -> 'gpt2'): it picks the per-rank batch."""
    return spec.partition(":")[0]


def parse_cell(text):
    """'MODEL[:key=value,...]:RANKS:RATE' -> (model spec, ranks, rate); the spec may hold colons of its own."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        die("--cells: '%s' is not model:ranks:rate (e.g. mlp:2:1gbit, gpt2:layers=4,d=384:2:300mbit)" % text)
    return parts[0], int(parts[1]), parts[2]


def cell_dirname(model, ranks, rate):
    """A cell's folder: the spec's ':' ',' '=' folded so that the name is one plain path component."""
    return "%s-n%d-%s" % (model.replace(":", "_").replace(",", "_").replace("=", ""), ranks, rate)


def config_period(name):
    """H of a periodic configuration ('dreamddp:h=4,delay=2' -> 4, 'localsgd:k=8' -> 8), None for ddp and others."""
    policy, _, rest = name.partition(":")
    key = {"localsgd": "k", "plsgd": "h", "dreamddp": "h"}.get(policy)
    for item in rest.split(",") if key else []:
        if item.startswith(key + "="):
            v = item.split("=", 1)[1]
            return int(v) if v.isdigit() else None  # not a period: the binary refuses the spec with its own line
    return {"localsgd": 8, "plsgd": 8, "dreamddp": 8}.get(policy)  # the policies' default period


def modelled_as(name, ran, H):
    """The configuration a run is modelled as: a dreamddp run whose solver fell back to Local SGD's schedule (its
    log says so, `ran`) is modelled as localsgd with its own period."""
    return "localsgd:k=%d" % (config_period(name) or H) if ran == "localsgd" else name


def die(msg):
    sys.stderr.write("regime_map: error: %s\n" % msg)
    sys.exit(2)


def rate_bps(rate):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, m in units.items():
        if rate.endswith(u):
            try:
                return float(rate[:-len(u)]) * m
            except ValueError:
                break
    die("rate '%s' is not a number with kbit, mbit or gbit (e.g. 100mbit, 1gbit)" % rate)


def run(cmd, log, timeout):
    """Runs cmd with stdout+stderr to `log`; returns (rc, seconds). A timeout kills the launcher's process group."""
    t0 = time.time()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = "timeout"
    return rc, time.time() - t0


def tail(path, n=5):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def last_json(path):
    for line in reversed(open(path, errors="replace").read().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def read_profile(prof):
    """A cell's profile: per-layer backward and all-reduce seconds (bp.json, comm.json), in forward order."""
    return json.load(open(os.path.join(prof, "bp.json"))), json.load(open(os.path.join(prof, "comm.json")))


def ran_phases(log, layers):
    """The phases of the last plan rank 0 printed ("  phase: fc1=0 fc2=1 ..."), in `layers`' order, as --phases
    takes them; None when there is no log or it has no complete plan."""
    if not os.path.exists(log):
        return None
    lines = [l for l in open(log, errors="replace").read().splitlines() if l.startswith("  phase: ")]
    if not lines:
        return None
    got = dict(kv.split("=", 1) for kv in lines[-1].split()[1:] if "=" in kv)
    return ",".join(got[n] for n in layers) if all(n in got for n in layers) else None


def ran_schedule(log):
    """What a dreamddp run ran after its profile (and trial), from the last plan rank 0 printed: "localsgd" (Local
    SGD's schedule, which contention made faster, modelled or measured) or "layerwise"."""
    lines = open(log, errors="replace").read().splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("dreamddp: schedule")]
    if not starts:
        return "layerwise"
    plan = [lines[starts[-1]]]
    for l in lines[starts[-1] + 1:]:
        if not l.startswith("  "):
            break
        plan.append(l)
    return "localsgd" if any("runs Local SGD's schedule" in l for l in plan) else "layerwise"


def ran_without_fill(log, layers, phases):
    """True when a dreamddp run ran the cell's phases layer-wise with no fill-in (its last plan says "fill-in ...
    none"): then it ran exactly what dreamddp:h=H,fillin=0 runs, and what the peer's `partial` runs on the same
    phases."""
    if not os.path.exists(log) or ran_schedule(log) != "layerwise" or ran_phases(log, layers) != phases:
        return False
    fills = [l for l in open(log, errors="replace").read().splitlines() if l.startswith("  fill-in")]
    return bool(fills) and fills[-1].rstrip().endswith(" none (no neighbour of a phase's layers fits its idle channel)")


def step_means(run_dir):
    """Mean forward/backward/update ms of the timed steps (after the trainer's warm-up), from metrics.h5."""
    import h5py
    with h5py.File(os.path.join(run_dir, "metrics.h5"), "r") as f:
        st = f["/steps"][:]
    warm = min(6, len(st) // 10 if len(st) >= 20 else 0)
    return {k: float(st[k + "_ms"][warm:].mean()) for k in ("forward", "backward", "update")}
