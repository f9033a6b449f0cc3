#!/usr/bin/python3
"""The regime map: where layer-wise partial sync pays off and where it does not, measured.

For every cell (model, ranks, link rate) on the emulated cluster (`dreamddp launch --netem RATE`, one network
namespace per rank, one thread per rank):
  1. `dreamddp profile` measures the cell's per-layer backward and all-reduce times (CELL/profile/{bp,comm}.json);
     `dreamddp schedule --h H --fillin` solves the DreamDDP schedule on it and models every policy's time per step;
  2. ours (ddp, localsgd:k=H, plsgd:h=H, dreamddp:h=H on that profile with and without fill-in) and the PyTorch peer
     (DDP, PeriodicModelAverager k=H, and --algo partial with the phases our solver chose) run the same number of
     steps, in alternating order (reversed on every second repetition);
  3. the cell records the measured communication/backward ratio C/B of its profile (the x-axis: place your own
     cluster on it), each run's samples/s, and next to it the step time the schedule model predicts for that run's
     own profile (forward + update measured in the run, backward + communication modelled).
The peer must run at its best: its gemm_gflops is checked against our GEMM rate (experiments/lib/peer_rules.py) and a
misconfigured peer gets no ratio. Runs started while the load average exceeded the core count are marked noisy.

Writes OUT/regime.json (every run and every cell) and, with --results FILE, the same document for the README
(analysis/render_results.py) and analysis/fig_regime.py. Nothing of an earlier run is overwritten: an existing
OUT is refused unless --resume-cells (cells already measured are kept and skipped).
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
import provenance  # noqa: E402
import peer_rules  # noqa: E402

PY = "/usr/bin/python3"
PEER_PY = None  # set in main() when the peer runs: .venv-peer (make deps-peer), PEER_PYTHON, or Debian's python3-torch
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


class Run:
    def __init__(self, a):
        self.a = a
        self.bin = a.bin
        self.runs = []
        self.prev_ranks = 0

    def modelled(self, rdir, bp, cm, means, phases, H, name, log_phases=None):
        """The schedule model's step time for this run's own profile: the cell's per-layer all-reduce times, the
        per-layer backward times scaled to the backward this run measured (it includes the CPU that communication
        took from compute), this run's forward and update; the phases the run used. The period is the
        configuration's own (dreamddp:h=4 is modelled with H = 4 in a cell whose H is 8). A delayed dreamddp run
        solves its own schedule: the phases its log printed (log_phases) are modelled when given, so a run
        remodelled by a later binary is modelled with what it ran, not what that binary would pick."""
        base, delayed = name.partition(":")[0], ",delay=" in name
        if base not in ("ddp", "localsgd", "plsgd", "dreamddp") or (base == "plsgd" and delayed):
            return None  # no model for this configuration
        own = config_period(name)
        if own is not None and own != H:
            H, phases = own, None  # the cell's phases are for its H; the policy's own schedule is modelled
        d = os.path.join(rdir, "model_profile")
        os.makedirs(d, exist_ok=True)
        k = means["backward"] / 1e3 / sum(bp.values())
        json.dump({n: t * k for n, t in bp.items()}, open(os.path.join(d, "bp.json"), "w"), indent=1)
        # compress=: the codec's bytes on the wire (core/sync/merge/codec.h encoded_bytes: int8 one byte per value + a
        # float32 scale per 256 values, bf16 two bytes per value); the model does not see the CPU that encoding takes.
        ratio = {"int8": (1 + 4 / 256) / 4, "bf16": 0.5}.get(name.split("compress=")[1].split(",")[0], 1.0) if "compress=" in name else 1.0
        json.dump({n: t * ratio for n, t in cm.items()}, open(os.path.join(d, "comm.json"), "w"), indent=1)
        # The cell's contention, communication side only: this run's measured backward already holds what
        # communication took from it.
        ov = os.path.join(os.path.dirname(rdir), "profile", "overlap.json")  # the cell's profile
        comm_slow = json.load(open(ov))["comm_slowdown"] if os.path.exists(ov) else 0.0
        json.dump({"compute_slowdown": 0.0, "comm_slowdown": comm_slow}, open(os.path.join(d, "overlap.json"), "w"))
        # The layers' sizes: the model fuses adjacent layers into buckets that pay the latency once, as the engine does.
        sizes = os.path.join(os.path.dirname(rdir), "profile", "bytes.json")
        if os.path.exists(sizes) and ratio == 1.0:
            shutil.copyfile(sizes, os.path.join(d, "bytes.json"))
        elif os.path.exists(os.path.join(d, "bytes.json")):
            os.remove(os.path.join(d, "bytes.json"))
        cmd = [self.bin, "schedule", "--profile", d, "--h", str(H)]
        if delayed:  # the schedule that policy ran (or picks on this profile), with its channel across iterations
            cmd += ["--delay", name.split("delay=")[1].split(",")[0], "--forward-ms", str(means["forward"]),
                    "--update-ms", str(means["update"])]
            if log_phases is not None and base == "dreamddp":
                cmd += ["--phases", log_phases]
        elif phases is not None:
            cmd += ["--phases", phases]
        if name == "dreamddp:h=%d" % H:
            cmd.append("--fillin")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            die("schedule failed on %s: %s" % (d, p.stderr.strip()))
        m = json.loads(p.stdout.strip().splitlines()[-1])
        # By the policy, not the exact name: localsgd:k=8,compress=int8 is Local SGD's blocking schedule with the
        # codec's bytes (it was once looked up as dreamddp's in-step schedule, 1-2% apart on the mlp cells).
        key = {"ddp": "ddp_overlap", "localsgd": "localsgd_delay" if delayed else "localsgd", "plsgd": "plsgd",
               "dreamddp": "dreamddp_delay" if delayed else "dreamddp"}[base]
        fused = m.get("fused", {})  # with the cell's sizes: buckets pay the fitted latency once (in-step schedules)
        return means["forward"] + means["update"] + 1e3 * fused.get(key, m[key])

    def launch(self, ranks, rate):
        net = [] if rate == "loopback" else ["--netem", rate]
        return [self.bin, "launch", "-n", str(ranks)] + net + ["--"]

    def cell(self, model, ranks, rate, our_gemm):
        a = self.a
        cdir = os.path.join(a.out, cell_dirname(model, ranks, rate))
        done = os.path.join(cdir, "cell.json")
        if os.path.exists(done):
            print("== %s: measured in an earlier call, kept" % os.path.basename(cdir), flush=True)
            return json.load(open(done))
        if os.path.exists(cdir):
            shutil.move(cdir, cdir + ".incomplete-%d" % int(time.time()))
        os.makedirs(cdir)
        b = BATCH[family(model)]
        H = a.h
        # 1. Profile and schedule of this cell.
        prof = os.path.join(cdir, "profile")
        rc, _ = run(self.launch(ranks, rate) + ["profile", "--model", model, "--batch", str(b), "--threads", "1",
                                                "--steps", "10", "--out", prof], os.path.join(cdir, "profile.log"),
                    600)
        if rc != 0:
            die("profile failed in %s (rc %s):\n%s" % (cdir, rc, tail(os.path.join(cdir, "profile.log"))))
        bp, cm = read_profile(prof)
        B, C = sum(bp.values()), sum(cm.values())
        sched_file = os.path.join(cdir, "schedule.json")
        p = subprocess.run([self.bin, "schedule", "--profile", prof, "--h", str(H), "--fillin", "--out", sched_file],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            die("schedule failed in %s: %s" % (cdir, p.stderr.strip()))
        model_s = json.loads(p.stdout.strip().splitlines()[-1])
        sched = json.load(open(sched_file))
        layers = list(bp.keys())  # forward order (the profile's order)
        phases = ",".join(str(sched["schedule"][n]) for n in layers)
        # 2. Steps. The trainer times the steps after 5 warm-up steps (runs of >= 50 steps), the peer after
        # --warmup 5: with 5 + m*H steps both time m whole periods, each holding exactly m syncs of every layer
        # (Local SGD's averages, every phase), whatever the offset. m >= 6, and about budget seconds of a local
        # policy's step. ddp has no period: it runs about budget seconds, at least 21 steps.
        est_local = 2.5 * B + C / H
        periods = int(min(a.max_steps // H, max(6, math.ceil(a.budget_s / est_local / H))))
        steps = 5 + periods * H
        steps_ddp = int(min(steps, max(21, math.ceil(a.budget_s / (2.5 * B + C)))))
        print("== cell %s: C/B = %.2f (B %.1f ms, C %.1f ms), %d steps per run (ddp %d), phases %s" % (
            os.path.basename(cdir), C / B, B * 1e3, C * 1e3, steps, steps_ddp, phases), flush=True)
        prof_opt = ",profile=" + prof
        configs = [("ours", "ddp", "ddp"), ("torch", "ddp", ["--algo", "ddp"]),
                   ("ours", "localsgd:k=%d" % H, "localsgd:k=%d" % H),
                   ("torch", "localsgd:k=%d" % H, ["--algo", "localsgd", "--k", str(H)]),
                   ("ours", "plsgd:h=%d" % H, "plsgd:h=%d" % H),
                   ("ours", "dreamddp:h=%d" % H, "dreamddp:h=%d%s" % (H, prof_opt)),
                   ("torch", "partial:h=%d" % H, ["--algo", "partial", "--k", str(H), "--phases", phases]),
                   ("ours", "dreamddp:h=%d,fillin=0" % H, "dreamddp:h=%d,fillin=0%s" % (H, prof_opt)),
                   ("ours", "dreamddp:h=%d,delay=%d" % (H, a.delay), "dreamddp:h=%d,delay=%d%s" % (H, a.delay, prof_opt))]
        if a.configs:  # an explicit list of our configurations (dreamddp ones run on the cell's profile)
            configs = [c for c in configs if c[0] == "torch"] + [
                ("ours", n, n + (prof_opt if n.startswith("dreamddp") else "")) for n in a.configs.split()]
        if a.no_peer:
            configs = [c for c in configs if c[0] == "ours"]
        runs = []
        for rep in range(1, a.repeats + 1):
            order = configs if rep % 2 else list(reversed(configs))
            for system, name, what in order:
                load = peer_rules.load1()
                rdir = os.path.join(cdir, ("%s-%s" % (system, name)).replace(":", "_").replace(",", "_").replace(
                    "=", "") + ".r%d" % rep)
                n = steps_ddp if name == "ddp" else steps
                t_budget = 120 + 20 * n * (2.5 * B + C)
                if system == "ours":
                    cmd = self.launch(ranks, rate) + [
                        "train", "--model", model, "--data", "synthetic", "--batch", str(b), "--threads", "1",
                        "--steps", str(n), "--policy", what, "--log-every", "1000000", "--eval-samples", "16",
                        "--out", rdir]
                    os.makedirs(os.path.dirname(rdir), exist_ok=True)
                    rc, secs = run(cmd, rdir + ".log", t_budget)
                    if rc != 0:
                        die("%s failed (rc %s):\n%s" % (" ".join(cmd), rc, tail(rdir + ".log")))
                    s = json.load(open(os.path.join(rdir, "summary.json")))
                    means = step_means(rdir)
                    ran = ran_schedule(rdir + ".log") if name.startswith("dreamddp") else None
                    r = {"system": "ours", "config": name, "spec": what, "samples_per_s": s["samples_per_s"],
                         "step_ms": s["step_ms"], "exposed_comm_fraction": s["exposed_comm_fraction"],
                         "comm_bytes": s["comm_bytes"], "means_ms": means,
                         "modelled_ms": self.modelled(rdir, bp, cm, means, phases, H, modelled_as(name, ran, H),
                                                      ran_phases(rdir + ".log", list(bp)))}
                    if ran:
                        r["ran"] = ran
                    if name == "dreamddp:h=%d" % H:
                        r["no_fill_in"] = ran_without_fill(rdir + ".log", list(bp), phases)
                else:
                    store = "/tmp/dd-regime-store-%d-%d" % (os.getpid(), len(self.runs))
                    env = ["/usr/bin/env", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "THREADS=1"]
                    cmd = self.launch(ranks, rate) + env + [PEER_PY, a.peer, "--model", model, "--batch", str(b),
                                                            "--steps", str(n - 5), "--warmup", "5",
                                                            "--store", store] + what
                    os.makedirs(rdir, exist_ok=True)
                    rc, secs = run(cmd, os.path.join(rdir, "launch.log"), t_budget)
                    if os.path.exists(store):
                        os.remove(store)
                    res = last_json(os.path.join(rdir, "launch.log")) if rc == 0 else None
                    ok, note = peer_rules.judge_peer(res, our_gemm, self.peer_alone)
                    if res is None:
                        print("   peer %s did not run (rc %s): %s" % (name, rc, tail(os.path.join(rdir, "launch.log"), 2).strip()))
                    r = {"system": "torch", "config": name, "spec": " ".join(what),
                         "samples_per_s": res["samples_per_s"] if res else None,
                         "step_ms": res["step_ms"] if res else None, "peer": peer_rules.peer_config(res),
                         "peer_ok": ok, "peer_note": note}
                # The 1-minute load average still carries this run's previous run (its `ranks` processes): only
                # load beyond that is someone else's.
                r.update({"rep": rep, "dir": rdir, "load_1m": load, "noisy": peer_rules.noisy(load - self.prev_ranks),
                          "run_s": secs})
                self.prev_ranks = ranks
                runs.append(r)
                self.runs.append(r)
                sps = r["samples_per_s"]
                print("   %-5s %-24s %8s samples/s  load %.2f%s" % (
                    system, name, "%.0f" % sps if sps else "-", load, "  NOISY" if r["noisy"] else ""), flush=True)
        cell = summarize(model, ranks, rate, steps, B, C, model_s, phases, runs, H)
        cell["steps_ddp"] = steps_ddp
        big = max(cm, key=cm.get)
        cell["largest_layer"] = {"name": big, "comm_ms": cm[big] * 1e3, "share_of_C": cm[big] / C}
        json.dump(cell, open(done, "w"), indent=1)
        return cell


def summarize(model, ranks, rate, steps, B, C, model_s, phases, runs, H):
    """Medians per configuration, modelled step time next to each of ours, and the verdicts of the cell."""
    byc = {}
    for r in runs:
        byc.setdefault((r["system"], r["config"]), []).append(r)
    modelled_key = {"ddp": "ddp_overlap", "localsgd:k=%d" % H: "localsgd", "plsgd:h=%d" % H: "plsgd",
                    "dreamddp:h=%d" % H: "dreamddp", "dreamddp:h=%d,fillin=0" % H: "dreamddp"}
    rows = []
    for (system, name), rs in byc.items():
        sps = [r["samples_per_s"] for r in rs if r["samples_per_s"]]
        row = {"system": system, "config": name, "samples_per_s": statistics.median(sps) if sps else None,
               "samples_per_s_runs": [r["samples_per_s"] for r in rs],
               "step_ms": statistics.median([r["step_ms"] for r in rs if r["step_ms"]]) if sps else None,
               "noisy": any(r["noisy"] for r in rs)}
        if system == "ours":
            row["exposed_comm_fraction"] = statistics.median([r["exposed_comm_fraction"] for r in rs])
            row["measured_backward_ms"] = statistics.median([r["means_ms"]["backward"] for r in rs])
            if any("ran" in r for r in rs):
                row["ran"] = sorted({r["ran"] for r in rs if "ran" in r})
            ms = [r["modelled_ms"] for r in rs if r["modelled_ms"] is not None]
            if ms:
                m = statistics.median(ms)
                row["modelled_step_ms"] = m
                row["model_error"] = m / row["step_ms"] - 1
            # The same with the profile's own backward (no contention), for reference.
            if name in modelled_key:
                row["modelled_step_ms_profile_backward"] = (
                    statistics.median([r["means_ms"]["forward"] for r in rs]) +
                    statistics.median([r["means_ms"]["update"] for r in rs]) + 1e3 * model_s[modelled_key[name]])
        else:
            row["peer_ok"] = all(r["peer_ok"] for r in rs)
            row["peer_note"] = "; ".join(sorted({r["peer_note"] for r in rs}))
            row["peer"] = next((r["peer"] for r in rs if r["peer"]), {})
        rows.append(row)
    val = {(r["system"], r["config"]): r["samples_per_s"] for r in rows if r["samples_per_s"]
           and (r["system"] == "ours" or r["peer_ok"])}
    lsgd, pl = val.get(("ours", "localsgd:k=%d" % H)), val.get(("ours", "plsgd:h=%d" % H))
    dd, dd0 = val.get(("ours", "dreamddp:h=%d" % H)), val.get(("ours", "dreamddp:h=%d,fillin=0" % H))
    # dreamddp:h=H that ran the cell's phases with no fill-in (every repeat) ran what fillin=0 runs.
    dd_runs = [r for r in runs if r["system"] == "ours" and r["config"] == "dreamddp:h=%d" % H]
    dd0_from_dd = dd0 is None and dd is not None and dd_runs and all(r.get("no_fill_in") for r in dd_runs)
    if dd0_from_dd:
        dd0 = dd
    ddd = next((v for (sy, n), v in val.items() if sy == "ours" and ",delay=" in n), None)
    # The best dreamddp with a delay (no compression), and the best with compression, against Local SGD.
    delayed = {n: v for (sy, n), v in val.items() if sy == "ours" and n.startswith("dreamddp") and ",delay=" in n
               and "compress=" not in n}
    compressed = {n: v for (sy, n), v in val.items() if sy == "ours" and "compress=" in n}
    best_delay = max(delayed, key=delayed.get) if delayed else None
    best_comp = max(compressed, key=compressed.get) if compressed else None
    best = max(x for x in (lsgd, pl) if x) if (lsgd or pl) else None
    verdict = {
        "best_baseline": "localsgd" if best == lsgd else "plsgd",
        "dreamddp_vs_best_baseline": dd / best if dd and best else None,
        "dreamddp_fillin0_vs_best_baseline": dd0 / best if dd0 and best else None,
        "dreamddp_fillin0_is_dreamddp": bool(dd0_from_dd),
        "dreamddp_delay_vs_localsgd": ddd / lsgd if ddd and lsgd else None,
        "best_delay_config": best_delay,
        "best_delay_vs_localsgd": delayed[best_delay] / lsgd if best_delay and lsgd else None,
        "best_compressed_config": best_comp,
        "best_compressed_vs_localsgd": compressed[best_comp] / lsgd if best_comp and lsgd else None,
        "ours_ddp_vs_torch_ddp": (val[("ours", "ddp")] / val[("torch", "ddp")]
                                  if ("torch", "ddp") in val and ("ours", "ddp") in val else None),
        "ours_localsgd_vs_torch_localsgd": (lsgd / val[("torch", "localsgd:k=%d" % H)]
                                            if lsgd and ("torch", "localsgd:k=%d" % H) in val else None),
        "ours_dreamddp_vs_torch_partial": (dd0 / val[("torch", "partial:h=%d" % H)]
                                           if dd0 and ("torch", "partial:h=%d" % H) in val else None),
    }
    verdict.update(goal_check(runs, dd, lsgd, pl, B, C, H))
    return {"model": model, "ranks": ranks, "rate": rate, "rate_bps": rate_bps(rate) if rate != "loopback" else None,
            "steps": steps, "H": H, "profile_B_ms": B * 1e3, "profile_C_ms": C * 1e3, "comm_over_backward": C / B,
            "modelled_s": model_s, "phases": phases, "rows": rows, "verdict": verdict, "runs": runs,
            "contention": {k: model_s[k] for k in ("compute_slowdown", "comm_slowdown") if k in model_s}}


def goal_check(runs, dd, lsgd, pl, B, C, H):
    """dreamddp:h=H against each baseline (the goal: >= 1.2x localsgd:k=H and >= 1.0x plsgd:h=H), and the most a
    perfect overlap could give over Local SGD on this cell: Local SGD's step F + B + U + C/H (its whole-model
    average amortized over H steps) against F + max(B, C/H) + U (each period's communication hidden behind
    backward), with F and U measured in the Local SGD runs and B, C from the cell's profile."""
    out = {"dreamddp_vs_localsgd": dd / lsgd if dd and lsgd else None,
           "dreamddp_vs_plsgd": dd / pl if dd and pl else None}
    out["goal_met"] = bool(out["dreamddp_vs_localsgd"] and out["dreamddp_vs_plsgd"] and
                           out["dreamddp_vs_localsgd"] >= 1.2 and out["dreamddp_vs_plsgd"] >= 1.0)
    ls = [r["means_ms"] for r in runs if r["system"] == "ours" and r["config"] == "localsgd:k=%d" % H]
    if ls:
        F = statistics.median([m["forward"] for m in ls])
        U = statistics.median([m["update"] for m in ls])
        Bm, Cm = B * 1e3, C * 1e3
        out["overlap_bound_vs_localsgd"] = (F + Bm + U + Cm / H) / (F + max(Bm, Cm / H) + U)
        out["bound_terms_ms"] = {"F": F, "B": Bm, "U": U, "C_over_H": Cm / H}
    return out


def remodel(a):
    """--remodel RESULTS: the schedule model's step time of every run in a results file again, from the runs' own
    folders (under --runs-root) and the current binary, without measuring anything; the cells' rows and verdicts
    follow. For a results file measured before a fix to the model or to how a run is modelled."""
    try:
        doc = json.load(open(a.remodel))
    except (OSError, ValueError) as e:
        die("--remodel: cannot read %s: %s" % (a.remodel, e))
    if not isinstance(doc, dict) or doc.get("study") != "regime_map" or not isinstance(doc.get("cells"), list):
        die("--remodel: %s is not a regime map's results file (no \"study\": \"regime_map\" with cells)" % a.remodel)
    s = Run(a)
    changed = 0
    for c in doc["cells"]:
        ours = [r for r in c["runs"] if r["system"] == "ours"]
        if not ours:
            continue
        cdir = os.path.dirname(os.path.join(a.runs_root, ours[0]["dir"]))
        prof = os.path.join(cdir, "profile")
        if not os.path.isfile(os.path.join(prof, "bp.json")):
            die("%s: no profile of cell %s-n%d-%s (its runs are not under --runs-root %s)"
                % (prof, c["model"], c["ranks"], c["rate"], a.runs_root))
        bp, cm = read_profile(prof)
        for r in ours:
            rdir = os.path.join(a.runs_root, r["dir"])
            if r["config"] == "dreamddp:h=%d" % c["H"]:
                r["no_fill_in"] = ran_without_fill(rdir + ".log", list(bp), c["phases"])
            m = s.modelled(rdir, bp, cm, r["means_ms"], c["phases"], c["H"],
                           modelled_as(r["config"], r.get("ran"), c["H"]),
                           ran_phases(rdir + ".log", list(bp)))
            if m != r["modelled_ms"]:
                print("   %-18s %-34s model %8.2f -> %8.2f ms (measured %.2f)" % (
                    "%s n%d %s" % (c["model"], c["ranks"], c["rate"]), r["config"], r["modelled_ms"] or float("nan"),
                    m or float("nan"), r["step_ms"]), flush=True)
                changed += 1
            r["modelled_ms"] = m
        fresh = summarize(c["model"], c["ranks"], c["rate"], c["steps"], c["profile_B_ms"] / 1e3,
                          c["profile_C_ms"] / 1e3, c["modelled_s"], c["phases"], c["runs"], c["H"])
        c.update({k: fresh[k] for k in ("rows", "verdict")})
    doc["remodelled"] = {"date": peer_rules.machine(REPO)["date"], "commit": peer_rules.git_commit(REPO),
                         "runs_changed": changed}
    return doc, changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--models", default="mlp")
    ap.add_argument("--ranks", default="2 4")
    ap.add_argument("--rates", default="100mbit 300mbit 1gbit 3gbit 10gbit")
    ap.add_argument("--cells", default="", help="explicit cells 'model:ranks:rate ...' instead of the full grid")
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--delay", type=int, default=2, help="T of the dreamddp:h=H,delay=T configuration (< H)")
    ap.add_argument("--budget-s", type=float, default=6.0, help="about this many seconds of ddp per run")
    ap.add_argument("--max-steps", type=int, default=405)
    ap.add_argument("--out", default=os.path.join(REPO, "runs", "regime"))
    ap.add_argument("--resume-cells", action="store_true", help="OUT exists: keep its measured cells, add the rest")
    ap.add_argument("--results", default="", help="also write the document here (e.g. experiments/results/regime_map.json)")
    ap.add_argument("--bin", default=os.environ.get("DREAMDDP_BIN", os.path.join(REPO, "build", "dreamddp")))
    ap.add_argument("--peer", default=os.environ.get("DREAMDDP_PEER", os.path.join(REPO, "peers", "torch_ddp.py")))
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--configs", default="", help="our configurations instead of the default ones, e.g. "
                    "'localsgd:k=8 dreamddp:h=8 dreamddp:h=8,delay=2 dreamddp:h=8,delay=2,compress=int8'")
    ap.add_argument("--remodel", default="", metavar="RESULTS",
                    help="measure nothing: model every run of RESULTS again with --bin (rewrites RESULTS; git keeps "
                    "the old)")
    ap.add_argument("--runs-root", default=REPO, help="--remodel: the folder the runs' dirs in RESULTS are relative to")
    a = ap.parse_args()
    if a.remodel:
        a.bin = os.path.abspath(a.bin)
        if not os.access(a.bin, os.X_OK):
            die("no dreamddp binary at %s (make build, or --bin)" % a.bin)
        if not os.path.isfile(a.remodel):
            die("--remodel: no results file %s" % a.remodel)
        doc, changed = remodel(a)
        json.dump(provenance.repo_relative(doc, REPO), open(a.remodel, "w"), indent=1)
        print("regime_map: %d of %d runs modelled differently; %s rewritten" % (
            changed, sum(len(c["runs"]) for c in doc["cells"]), a.remodel))
        print_table(doc)
        return
    for name in ("h", "repeats", "max_steps", "delay"):
        if getattr(a, name) < 1:
            die("--%s must be >= 1" % name.replace("_", "-"))
    if a.delay >= a.h:
        die("--delay must be below --h")
    if not (a.budget_s > 0):
        die("--budget-s must be > 0")
    a.out = os.path.abspath(a.out)
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        die("no dreamddp binary at %s (make build, or --bin)" % a.bin)
    if not a.no_peer:
        if not os.path.isfile(a.peer):
            die("no PyTorch peer at %s (--peer, or --no-peer)" % a.peer)
        a.peer = os.path.abspath(a.peer)
        global PEER_PY
        PEER_PY = peer_rules.peer_python()
        if subprocess.run([PEER_PY, "-c", "import torch"], capture_output=True).returncode != 0:
            die("the peer needs python3-torch (make deps-peer), or pass --no-peer")
    if os.geteuid() != 0 or not shutil.which("tc"):
        die("the regime map needs the emulated cluster: run as root with iproute2 (ip, tc)")
    if os.path.exists(a.out) and os.listdir(a.out) and not a.resume_cells:
        die("%s exists and is not empty: pick another --out, or --resume-cells to complete it" % a.out)
    if a.cells:
        cells = [parse_cell(c) for c in a.cells.split()]
    else:
        cells = [(m, int(n), r) for m in a.models.split() for n in a.ranks.split() for r in a.rates.split()]
    for m, n, r in cells:
        if family(m) not in BATCH:
            die("unknown model '%s' (%s, with options where CONTRACT.md's models take them)" % (m, ", ".join(BATCH)))
        if n < 2 or n > 16:
            die("ranks must be in 2..16, got %d" % n)
        rate_bps(r)
    os.makedirs(a.out, exist_ok=True)
    s = Run(a)
    our_gemm = peer_rules.our_gemm_gflops(a.bin)
    alone = None if a.no_peer else peer_rules.peer_gemm_alone(a.peer)
    if not a.no_peer and alone is None:
        print("# the peer does not run alone here (netlib BLAS? see torch_ddp.py): its ratios will be withheld")
    s.peer_alone = alone["gemm_gflops"] if alone else 0.0
    meta = provenance.start(REPO)
    cmd = provenance.shell_command([os.environ.get("REGIME_MAP_ENTRY", "experiments/regime_map.py")] + sys.argv[1:],
                                   ("DREAMDDP_PEER",))
    print("# regime map: %d cells, %d repeats, H=%d; our GEMM %.1f GFLOP/s, the peer's alone %.1f (%s); %s, %d cores, "
          "load %.2f" % (len(cells), a.repeats, a.h, our_gemm, s.peer_alone, (alone or {}).get("blas", "-"),
                         meta["cpu"], meta["cores"], meta["load_1m"]), flush=True)
    doc = {"study": "regime_map", "ours_gemm_gflops": our_gemm,
           "peer_alone": peer_rules.peer_config(alone), "H": a.h,
           "repeats": a.repeats, "cells": []}
    peer_script = None if a.no_peer else provenance.rel_to_repo(a.peer, REPO)
    provenance.stamp(doc, cmd, meta, peer=alone, peer_script=peer_script)
    for m, n, r in cells:
        doc["cells"].append(s.cell(m, n, r, our_gemm))
        json.dump(doc, open(os.path.join(a.out, "regime.json"), "w"), indent=1)
    doc["ours_gemm_gflops_end"] = peer_rules.our_gemm_gflops(a.bin)
    provenance.stamp(doc, cmd, meta, peer=alone, peer_script=peer_script)
    json.dump(doc, open(os.path.join(a.out, "regime.json"), "w"), indent=1)
    if a.results:
        json.dump(provenance.repo_relative(doc, REPO), open(a.results, "w"), indent=1)
    print_table(doc)


def print_table(doc):
    H = doc["H"]
    print("\n%-18s %6s  %-24s %10s %10s %10s %7s" % ("cell", "C/B", "config", "samples/s", "step ms",
                                                     "model ms", "error"))
    for c in doc["cells"]:
        name = "%s n%d %s" % (c["model"], c["ranks"], c["rate"])
        for r in c["rows"]:
            sps = "%.0f" % r["samples_per_s"] if r["samples_per_s"] else "-"
            step = "%.1f" % r["step_ms"] if r["step_ms"] else "-"
            mod = "%.1f" % r["modelled_step_ms"] if "modelled_step_ms" in r else ""
            err = "%+.0f%%" % (100 * r["model_error"]) if "model_error" in r else ""
            flag = ("" if r["system"] == "ours" or r["peer_ok"] else "  (peer misconfigured: no ratio)") + (
                "  noisy" if r["noisy"] else "")
            print("%-18s %6.2f  %-24s %10s %10s %10s %7s%s" % (name, c["comm_over_backward"],
                                                              r["system"] + " " + r["config"], sps, step, mod, err,
                                                              flag))
        v = c["verdict"]
        f = lambda x: "%.2f" % x if x else "-"
        print("%-18s        dreamddp:h=%d / best of localsgd, plsgd = %s (fillin=0: %s; delay / localsgd: %s); "
              "ours/torch: ddp %s, localsgd %s, dreamddp vs partial %s" % (
                  "", H, f(v["dreamddp_vs_best_baseline"]), f(v["dreamddp_fillin0_vs_best_baseline"]),
                  f(v.get("dreamddp_delay_vs_localsgd")),
                                                       f(v["ours_ddp_vs_torch_ddp"]),
                                                       f(v["ours_localsgd_vs_torch_localsgd"]),
                                                       f(v["ours_dreamddp_vs_torch_partial"])))


if __name__ == "__main__":
    main()
