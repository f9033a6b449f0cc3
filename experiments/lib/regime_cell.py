"""One cell of the regime map (experiments/regime_map.py): its profile and schedule, the runs of every
configuration, ours and the PyTorch peer's, the schedule model's step time of each, and the cell's verdicts."""
import json
import math
import os
import shutil
import statistics
import subprocess
import time

import peer_rules
from regime_runs import (BATCH, cell_dirname, config_period, die, family, last_json, modelled_as, ran_phases,
    ran_schedule, ran_without_fill, rate_bps, read_profile, run, step_means, tail)


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

    def profile(self, cdir, model, ranks, rate, b, H):
        """The cell's profile and schedule: (backward and communication times per layer, the schedule model's
        step times, the phases of the schedule)."""
        prof = os.path.join(cdir, "profile")
        rc, _ = run(self.launch(ranks, rate) + ["profile", "--model", model, "--batch", str(b), "--threads", "1",
                                                "--steps", "10", "--out", prof], os.path.join(cdir, "profile.log"),
                    600)
        if rc != 0:
            die("profile failed in %s (rc %s):\n%s" % (cdir, rc, tail(os.path.join(cdir, "profile.log"))))
        bp, cm = read_profile(prof)
        sched_file = os.path.join(cdir, "schedule.json")
        p = subprocess.run([self.bin, "schedule", "--profile", prof, "--h", str(H), "--fillin", "--out", sched_file],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            die("schedule failed in %s: %s" % (cdir, p.stderr.strip()))
        model_s = json.loads(p.stdout.strip().splitlines()[-1])
        sched = json.load(open(sched_file))
        layers = list(bp.keys())  # forward order (the profile's order)
        phases = ",".join(str(sched["schedule"][n]) for n in layers)
        return bp, cm, model_s, phases

    def configs(self, H, phases, prof):
        """(system, configuration, policy spec or peer arguments) of every run in a cell."""
        a = self.a
        # --self-profiled: dreamddp profiles itself inside the timed launch (its default start), as a user runs it
        prof_opt = "" if a.self_profiled else ",profile=" + prof
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
        return configs

    def run_ours(self, ranks, rate, model, b, n, what, rdir, t_budget, name, bp, cm, phases, H):
        """One run of ours in a cell: (its row, its seconds from launch to exit)."""
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
        return r, secs

    def run_peer(self, ranks, rate, model, b, n, what, rdir, t_budget, name, our_gemm):
        """One run of the PyTorch peer in a cell: (its row, its seconds from launch to exit)."""
        a = self.a
        warm = 5 if name == "ddp" else a.h  # whole periods after the first, as our trainer times them
        store = "/tmp/dd-regime-store-%d-%d" % (os.getpid(), len(self.runs))
        env = ["/usr/bin/env", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "THREADS=1"]
        cmd = self.launch(ranks, rate) + env + [a.peer_py, a.peer, "--model", model, "--batch", str(b),
                                                "--steps", str(n - warm), "--warmup", str(warm),
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
        return r, secs

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
        bp, cm, model_s, phases = self.profile(cdir, model, ranks, rate, b, H)
        B, C = sum(bp.values()), sum(cm.values())
        prof = os.path.join(cdir, "profile")
        # Steps: m whole periods from step 0, so that from launch to exit every periodic policy averages every layer
        # exactly m times (a partial period at the end would hold some layer-wise phases and no Local SGD average).
        # The trainer times whole periods from the first boundary after its warm-up (and after dreamddp's start),
        # the peer after --warmup H. m >= 6 (12 when dreamddp profiles itself: its start and a possible trial take
        # up to 8 periods), and about budget seconds of a local policy's step. ddp has no period: it runs about
        # budget seconds, at least 21 steps.
        est_local = 2.5 * B + C / H
        periods = int(min(a.max_steps // H, max(12 if a.self_profiled else 6, math.ceil(a.budget_s / est_local / H))))
        steps = periods * H
        steps_ddp = int(min(steps, max(21, math.ceil(a.budget_s / (2.5 * B + C)))))
        print("== cell %s: C/B = %.2f (B %.1f ms, C %.1f ms), %d steps per run (ddp %d), phases %s" % (
            os.path.basename(cdir), C / B, B * 1e3, C * 1e3, steps, steps_ddp, phases), flush=True)
        configs = self.configs(H, phases, prof)
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
                    r, secs = self.run_ours(ranks, rate, model, b, n, what, rdir, t_budget, name, bp, cm, phases, H)
                else:
                    r, secs = self.run_peer(ranks, rate, model, b, n, what, rdir, t_budget, name, our_gemm)
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
