#!/usr/bin/python3
"""Simulation studies (experiments/sim_studies.sh): runs `dreamddp simulate` and writes
experiments/results/simulate_<study>.json and experiments/results/simulate.md.

  studies.py --bin build/dreamddp [--study artifact|scaling|hier|stragglers|all] [--results DIR] [--quick]

artifact    the DreamDDP artifact's three GPT-2 profiles (16 workers at 1 and 5 Gbit/s, 8 at 10 Gbit/s), ddp,
            localsgd:k=10, plsgd:h=10, dreamddp:h=10, beside `dreamddp schedule --h 10`'s modelled numbers
scaling     4..256 ranks at 1 and 10 Gbit/s, every policy, GPT-2 profile: samples/s and exposed comm fraction
hier        16 nodes x 8 ranks, 800 Gbit/s inside a node, 1 Gbit/s between nodes: hier vs flat dreamddp:h=8
stragglers  16 ranks, one rank's compute 1.5x slower: localsgd:k=10 vs dreamddp:h=10 (and ddp)
dominance   every artifact profile, sizes from its comm times (--comm-bw) and from GPT-2 small's bytes, 4, 16 and 64
            ranks: the self-profiled dreamddp:h=10 against the better of plsgd:h=10 and localsgd:k=10, with its plan
paper_scale GPT-2 and Llama-2 (124M) from the artifact's GPU profiles at 8, 16 and 32 workers, 1 and 10 Gbit/s:
            ddp, localsgd:k=10, plsgd:h=10, dreamddp:h=10 beside the time model and the artifact's scheduler
copies_cost what averages on copies (delay=, outer=, compress=) cost the simulator: wall time and peak RSS of
            `/usr/bin/time -v` beside the same run without them, 4 ranks x 8 steps and 64 ranks x 100 steps
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments", "lib"))
import provenance  # noqa: E402
from sim_report import report  # noqa: E402
from sim_run import BATCH, POLICIES, STEADY, log, policy_args, schedule, simulate  # noqa: E402
PROFILES = os.path.join(ROOT, "data", "dreamddp-profiles")
GPT2_BYTES = os.path.join(ROOT, "app", "sim", "gpt2_bytes.json")


def study_artifact(binary, quick):
    rows = []
    for name, world, bw in (("gpt2_16_1gbit", 16, "1Gbps"), ("gpt2_16_5gbit", 16, "5Gbps"),
                            ("gpt2_8_10gbit", 8, "10Gbps")):
        prof = os.path.join(PROFILES, name)
        model = schedule(binary, prof, 10)
        for pol in POLICIES:
            args = ["--profile", prof, "--bytes", GPT2_BYTES, "--cluster", f"{world}x1,inter={bw}",
                    "--policy", policy_args(pol, prof), "--steps", "36" if quick else "116", "--batch", str(BATCH)]
            s = simulate(binary, args, steady_from=STEADY)
            key = pol.split(":")[0]
            rows.append({"profile": name, "world": world, "bandwidth": bw, "policy": pol,
                         "simulated_s": s["step_ms"] / 1e3, "modelled_s": model[key],
                         "exposed_comm_fraction": s["exposed_comm_fraction"], "samples_per_s": s["samples_per_s"],
                         "comm_bytes_per_step": s["comm_bytes"] / s["steps"], "command": s["command"],
                         "wall_s": s["wall_s"]})
            log(f"artifact {name} {pol}: simulated {s['step_ms']/1e3:.4f} s, modelled {model[key]:.4f} s")
        # The same profile in the time model's own assumptions (per-layer comm = the profile's c_l, one FIFO
        # channel, no latency): what the simulator gives when it is fed the profile's comm times as they are.
        for pol in POLICIES[:3] + POLICIES[4:]:
            args = ["--profile", prof, "--comm-bw", "1GBps", "--cluster", "2x1,intra=1000TBps,inter=1GBps",
                    "--cfg", "network/model:CM02", "--cfg", "network/crosstraffic:0", "--bucket-cap-mb", "0",
                    "--first-bucket-mb", "0", "--anomaly", "off", "--policy", policy_args(pol, prof),
                    "--steps", "25" if quick else "105"]
            s = simulate(binary, args)
            rows.append({"profile": name, "world": world, "bandwidth": "profile c_l", "policy": pol,
                         "simulated_s": s["step_ms"] / 1e3, "modelled_s": model[pol.split(":")[0]],
                         "exposed_comm_fraction": s["exposed_comm_fraction"], "command": s["command"],
                         "wall_s": s["wall_s"]})
    return rows


def study_scaling(binary, quick):
    prof = os.path.join(PROFILES, "gpt2_16_1gbit")
    rows = []
    worlds = [4, 16, 64] if quick else [4, 8, 16, 32, 64, 128, 256]
    for bw, lat in (("1Gbps", "0us"), ("10Gbps", "0us"), ("1Gbps", "50us"), ("10Gbps", "50us")):
        for n in worlds:
            for pol in POLICIES[:4]:
                args = ["--profile", prof, "--bytes", GPT2_BYTES, "--cluster", f"{n}x1,inter={bw},lat={lat}",
                        "--policy", policy_args(pol, prof), "--steps", "36" if quick else "96", "--batch", str(BATCH)]
                s = simulate(binary, args, steady_from=STEADY)
                rows.append({"world": n, "bandwidth": bw, "lat": lat, "policy": pol, "step_s": s["step_ms"] / 1e3,
                             "samples_per_s": s["samples_per_s"], "exposed_comm_fraction": s["exposed_comm_fraction"],
                             "command": s["command"], "wall_s": s["wall_s"]})
                log(f"scaling {bw} lat={lat} n={n} {pol}: {s['samples_per_s']:.1f} samples/s, exposed "
                    f"{100*s['exposed_comm_fraction']:.1f}% ({s['wall_s']} s)")
    return rows


GPTMINI_PROFILE = os.path.join(ROOT, "experiments", "results", "simulate_gptmini_profile")


def study_scaling_gptmini(binary, quick):
    """gpt-mini (this project's model; backward times measured here by `dreamddp profile --model gpt-mini
    --threads 1`, batch 64, one process) at 4..256 ranks."""
    rows = []
    worlds = [4, 16, 64] if quick else [4, 8, 16, 32, 64, 128, 256]
    for bw, lat in (("1Gbps", "0us"), ("10Gbps", "0us"), ("1Gbps", "50us"), ("10Gbps", "50us")):
        for n in worlds:
            for pol in POLICIES[:4]:
                args = ["--profile", GPTMINI_PROFILE, "--model", "gpt-mini", "--cluster", f"{n}x1,inter={bw},lat={lat}",
                        "--policy", pol, "--steps", "36" if quick else "96", "--batch", "64"]
                s = simulate(binary, args, steady_from=STEADY, batch=64)
                rows.append({"world": n, "bandwidth": bw, "lat": lat, "policy": pol, "step_s": s["step_ms"] / 1e3,
                             "samples_per_s": s["samples_per_s"], "exposed_comm_fraction": s["exposed_comm_fraction"],
                             "command": s["command"], "wall_s": s["wall_s"]})
                log(f"scaling gpt-mini {bw} lat={lat} n={n} {pol}: {s['samples_per_s']:.1f} samples/s")
    return rows


OWN_GPT2_PROFILE = os.path.join(ROOT, "experiments", "results", "gpt2_profile_ours")


def study_own_gpt2(binary, quick):
    """GPT-2 small simulated from this project's own profile (`dreamddp profile --model gpt2`: the preset, batch
    1 x 128 tokens, one thread, on a CPU) beside the artifact's GPT-2 profile (GPUs), the same policies, ranks and
    1 Gbit/s links; each profile's backward times, and the model's own layer sizes (ours) or GPT-2's (artifact)."""
    rows = []
    art = os.path.join(PROFILES, "gpt2_16_1gbit")
    for label, prof, sizes in (("ours", OWN_GPT2_PROFILE, ["--model", "gpt2"]),
                               ("artifact gpt2_16_1gbit", art, ["--bytes", GPT2_BYTES])):
        for n in ([16] if quick else [16, 64]):
            for pol in POLICIES[:4]:
                args = ["--profile", prof] + sizes + ["--cluster", f"{n}x1,inter=1Gbps", "--policy", pol,
                                                      "--steps", "26" if quick else "96", "--batch", "1"]
                s = simulate(binary, args, steady_from=STEADY, batch=1)
                rows.append({"profile": label, "world": n, "bandwidth": "1Gbps", "policy": pol,
                             "step_s": s["step_ms"] / 1e3, "exposed_comm_fraction": s["exposed_comm_fraction"],
                             "comm_bytes_per_step": s["comm_bytes"] / s["steps"], "command": s["command"],
                             "wall_s": s["wall_s"]})
                log(f"own_gpt2 {label} n={n} {pol}: {s['step_ms']/1e3:.4f} s/step ({s['wall_s']} s)")
    return rows


def study_hier(binary, quick):
    prof = os.path.join(PROFILES, "gpt2_16_1gbit")
    rows = []
    cluster = "16x8,intra=800Gbps,inter=1Gbps,lat=50us"
    # hier measures sensitivity during its first 10 steps (lock-step); steady state from step 16, 64 steps (two
    # periods of hier's inter=32, eight of h=8).
    for pol, extra in (("dreamddp:h=8", []), ("hier:nodes=auto", ["--signals", "constant"]),
                       ("hier:nodes=auto,intra=1,inter=16,slow=8", ["--signals", "constant"])):
        args = ["--profile", prof, "--bytes", GPT2_BYTES, "--cluster", cluster, "--policy", policy_args(pol, prof),
                "--steps", "48" if quick else "80", "--batch", str(BATCH)] + extra
        s = simulate(binary, args, steady_from=STEADY)
        rows.append({"cluster": cluster, "policy": pol, "step_s": s["step_ms"] / 1e3,
                     "samples_per_s": s["samples_per_s"], "exposed_comm_fraction": s["exposed_comm_fraction"],
                     "command": s["command"], "wall_s": s["wall_s"]})
        log(f"hier {pol}: {s['step_ms']/1e3:.4f} s/step ({s['wall_s']} s)")
    return rows


def study_stragglers(binary, quick):
    prof = os.path.join(PROFILES, "gpt2_16_1gbit")
    rows = []
    for bw in ("1Gbps", "10Gbps"):
        for pol in ("ddp", "localsgd:k=10", "dreamddp:h=10"):
            for slow in ([], ["--slow", "5=1.5"]):
                # forward ~ half the backward (the profile has backward only), so compute is a real share
                args = ["--profile", prof, "--bytes", GPT2_BYTES, "--cluster", f"16x1,inter={bw}",
                        "--policy", policy_args(pol, prof), "--steps", "36" if quick else "116",
                        "--batch", str(BATCH), "--forward-ms", "44", "--update-ms", "10"] + slow
                s = simulate(binary, args, steady_from=STEADY)
                rows.append({"bandwidth": bw, "policy": pol, "straggler": "rank 5 x1.5" if slow else "none",
                             "step_s": s["step_ms"] / 1e3, "samples_per_s": s["samples_per_s"],
                             "exposed_comm_fraction": s["exposed_comm_fraction"], "command": s["command"],
                             "wall_s": s["wall_s"]})
                log(f"stragglers {bw} {pol} {slow}: {s['step_ms']/1e3:.4f} s/step")
    return rows


def study_dominance(binary, quick):
    """Does the self-profiled dreamddp:h=10 at least match the better baseline everywhere the artifact's profiles
    reach? Each simulation's own timed window (train's: whole periods after profiling)."""
    rows = []
    for name, bw in (("gpt2_16_1gbit", "1Gbps"), ("gpt2_16_5gbit", "5Gbps"), ("gpt2_8_10gbit", "10Gbps")):
        prof = os.path.join(PROFILES, name)
        for sizes in (["--comm-bw", bw], ["--bytes", GPT2_BYTES]):
            for n in ([4, 16] if quick else [4, 16, 64]):
                cell = {}
                for pol in ("localsgd:k=10", "plsgd:h=10", "dreamddp:h=10"):
                    args = ["--profile", prof] + sizes + ["--cluster", f"{n}x1,inter={bw}", "--policy", pol,
                                                          "--steps", "46" if quick else "126", "--batch", str(BATCH)]
                    s = simulate(binary, args, plan=True)
                    cell[pol] = s
                best = min(cell["localsgd:k=10"]["step_ms"], cell["plsgd:h=10"]["step_ms"])
                d = cell["dreamddp:h=10"]
                rows.append({"profile": name, "bandwidth": bw, "sizes": "comm-bw" if sizes[0] == "--comm-bw" else "gpt2 bytes",
                             "world": n, "step_ms": {p: c["step_ms"] for p, c in cell.items()},
                             "dreamddp_vs_best": best / d["step_ms"], "plan": d.get("plan", ""),
                             "commands": [c["command"] for c in cell.values()]})
                log(f"dominance {name} {rows[-1]['sizes']} n={n}: dreamddp {d['step_ms']:.1f} ms, best baseline "
                    f"{best:.1f} ms ({rows[-1]['dreamddp_vs_best']:.3f}x)")
    return rows


def study_copies_cost(binary, quick):
    """Wall time and peak resident memory of the simulation process (`/usr/bin/time -v`), per run."""
    prof = os.path.join(PROFILES, "gpt2_16_1gbit")
    rows = []
    big = (16, 20) if quick else (64, 100)
    for n, steps, pols in ((4, 8, ["localsgd:k=4", "localsgd:k=4,outer=nesterov", "localsgd:k=4,compress=int8"]),
                           (big[0], big[1], ["localsgd:k=4", "localsgd:k=4,compress=int8,outer=nesterov,delay=2"])):
        for pol in pols:
            args = ["--profile", prof, "--cluster", f"{n}x1,inter=1Gbps", "--comm-bw", "1Gbps", "--steps", str(steps),
                    "--policy", pol]
            cmd = ["/usr/bin/time", "-v", binary, "simulate"] + args
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
            s = json.loads(p.stdout.strip().splitlines()[-1])
            t = {}
            for line in p.stderr.splitlines():
                k, _, v = line.strip().partition(": ")
                t[k] = v
            m, sec = t["Elapsed (wall clock) time (h:mm:ss or m:ss)"].rsplit(":", 1)
            wall = float(sec) + 60 * sum(float(x) * 60 ** i for i, x in enumerate(reversed(m.split(":"))))
            rows.append({"world": n, "steps": steps, "policy": pol, "wall_s": wall,
                         "peak_rss_mib": int(t["Maximum resident set size (kbytes)"]) / 1024.0,
                         "step_ms": s["step_ms"], "comm_bytes": s["comm_bytes"],
                         "command": "/usr/bin/time -v dreamddp simulate " + " ".join(a.replace(ROOT + "/", "") for a in args)})
            log(f"copies_cost {n}x{steps} {pol}: {wall:.2f} s, {rows[-1]['peak_rss_mib']:.0f} MiB")
    return rows


# The paper's tables at its scale: GPT-2 and Llama-2 (124M) from the artifact's GPU profiles, at 8, 16 and 32 workers
# and 1 and 10 Gbit/s. Each (model, link) takes the artifact's profile measured on that link, at the worker count
# it was measured with (N_p).
PAPER_PROFILES = ((("gpt2", "1Gbps"), "gpt2_16_1gbit", 16), (("gpt2", "10Gbps"), "gpt2_8_10gbit", 8),
                  (("llama2-124M", "1Gbps"), "llama2-124M_16_1gbit", 16),
                  (("llama2-124M", "10Gbps"), "llama2-124M_16_10gbit", 16))
PAPER_POLICIES = ("ddp", "localsgd:k=10", "plsgd:h=10", "dreamddp:h=10")
# What the artifact's own scheduler printed for these profiles, H = 10 (time/MODEL/N/LINK/scheduling_results.txt of
# the artifact at bf37762, seconds per iteration averaged over 1000 iterations; its SGD is B + C, its FLSGD Local
# SGD). Only at the worker count each profile was measured with.
ARTIFACT_SCHEDULER = {
    "gpt2_16_1gbit": {"ddp": 5.731204, "localsgd": 0.647425, "plsgd": 0.621678, "dreamddp": 0.594321},
    "gpt2_8_10gbit": {"ddp": 0.299607, "localsgd": 0.094232, "plsgd": 0.078104, "dreamddp": 0.076974},
    "llama2-124M_16_1gbit": {"ddp": 6.205553, "localsgd": 0.668712, "plsgd": 0.651456, "dreamddp": 0.627770},
    "llama2-124M_16_10gbit": {"ddp": 1.185053, "localsgd": 0.167393, "plsgd": 0.144117, "dreamddp": 0.129036},
}
# The paper's own statement (arXiv 2502.11058, abstract): on 32 GPUs, ResNet-18, ResNet-50, GPT-2 and Llama-2.
PAPER_CLAIM = {"speedup_min": 1.49, "speedup_max": 3.91, "over": "leading baseline methods", "gpus": 32}


def _ring(n):
    return 2.0 * (n - 1) / n


def study_paper_scale(binary, quick):
    """Simulated s/iter of ddp, localsgd, plsgd and dreamddp (self-profiled) at 8, 16, 32 workers, beside the time
    model (`dreamddp schedule --h 10 --fillin`) on the same profile scaled to that worker count, and the artifact's
    scheduler's own figures at the profile's worker count.

    Sizes: each layer's bytes are those whose ring all-reduce on the profile's link takes the profile's time at the
    profile's worker count N_p (S = c x rate x N_p / 2(N_p - 1)); the cluster is N ranks, one per node, on uplinks of
    that rate (CM02, no cross-traffic, no latency). At N_p the simulated network thus reproduces the profile's c_l;
    at N it takes c_l x ring(N) / ring(N_p), which is also what the model is given."""
    rows = []
    workers = (8, 16) if quick else (8, 16, 32)
    rate = {"1Gbps": 1e9 / 8, "10Gbps": 1e10 / 8}
    with tempfile.TemporaryDirectory(prefix="dd_paper_scale_") as tmp:
        for (model, bw), name, n_p in PAPER_PROFILES:
            prof = os.path.join(PROFILES, name)
            comm = json.load(open(os.path.join(prof, "comm.json")))
            bp = json.load(open(os.path.join(prof, "bp.json")))
            sizes = os.path.join(tmp, name + "_bytes.json")
            json.dump({k: v * rate[bw] / _ring(n_p) for k, v in comm.items()}, open(sizes, "w"))
            for n in workers:
                scaled = os.path.join(tmp, f"{name}_n{n}")
                os.makedirs(scaled, exist_ok=True)
                json.dump(bp, open(os.path.join(scaled, "bp.json"), "w"))
                json.dump({k: v * _ring(n) / _ring(n_p) for k, v in comm.items()},
                          open(os.path.join(scaled, "comm.json"), "w"))
                sch = schedule(binary, scaled, 10)
                for pol in PAPER_POLICIES:
                    args = ["--profile", prof, "--bytes", sizes, "--cluster", f"{n}x1,intra=1000TBps,inter={bw}",
                            "--cfg", "network/model:CM02", "--cfg", "network/crosstraffic:0", "--policy", pol,
                            "--steps", "46" if quick else "116", "--batch", str(BATCH)]
                    s = simulate(binary, args, steady_from=STEADY)
                    key = pol.split(":")[0]
                    art = ARTIFACT_SCHEDULER.get(name, {}).get(key) if n == n_p else None
                    rows.append({"model": model, "bandwidth": bw, "profile": name, "profile_workers": n_p,
                                 "world": n, "policy": pol, "simulated_s": s["step_ms"] / 1e3,
                                 "modelled_s": sch["ddp_overlap"] if key == "ddp" else sch[key],
                                 "modelled_ddp_no_overlap_s": sch["ddp"] if key == "ddp" else None,
                                 "artifact_scheduler_s": art,
                                 "exposed_comm_fraction": s["exposed_comm_fraction"],
                                 "samples_per_s": s["samples_per_s"],
                                 "comm_bytes_per_step": s["comm_bytes"] / s["steps"],
                                 "command": s["command"].replace(sizes, f"BYTES({name}, N_p={n_p})"),
                                 "wall_s": s["wall_s"]})
                    log(f"paper_scale {model} {bw} n={n} {pol}: simulated {s['step_ms'] / 1e3:.4f} s, modelled "
                        f"{rows[-1]['modelled_s']:.4f} s" + (f", artifact {art:.4f} s" if art else ""))
    return rows


STUDIES = {"dominance": study_dominance, "copies_cost": study_copies_cost, "artifact": study_artifact, "scaling": study_scaling, "scaling_gptmini": study_scaling_gptmini,
           "hier": study_hier, "stragglers": study_stragglers, "own_gpt2": study_own_gpt2,
           "paper_scale": study_paper_scale}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin")
    ap.add_argument("--study", default="all", choices=list(STUDIES) + ["all"])
    ap.add_argument("--results", default=os.path.join(ROOT, "experiments", "results"))
    ap.add_argument("--quick", action="store_true", help="fewer steps and ranks (a smoke run)")
    ap.add_argument("--report", action="store_true", help="print the markdown tables of the results and exit")
    a = ap.parse_args()
    if a.report:
        print(report(a.results))
        return 0
    if not a.bin:
        ap.error("--bin is required")
    os.makedirs(a.results, exist_ok=True)
    command = os.environ.get("SIM_STUDIES_COMMAND") or provenance.shell_command(
        ["experiments/sim_studies.py"] + sys.argv[1:])
    clean = provenance.tree_clean(ROOT)  # the code as the run found it; its own results files do not count
    for name in STUDIES if a.study == "all" else [a.study]:
        t0 = time.time()
        start = provenance.start(ROOT)
        start["tree_clean"] = clean
        rows = STUDIES[name](a.bin, a.quick)
        path = os.path.join(a.results, f"simulate_{name}.json")
        doc = {"study": name, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "wall_s": round(time.time() - t0, 1), "rows": rows}
        if name == "paper_scale":
            doc["paper_claim"] = PAPER_CLAIM
            doc["artifact_scheduler"] = {"source": "the artifact's time/MODEL/N/LINK/scheduling_results.txt at "
                                                   "bf37762, H = 10", "s_per_iter": ARTIFACT_SCHEDULER}
        provenance.write_json_atomic(path, provenance.stamp(doc, command, start))
        print(f"{name}: {len(rows)} rows -> {path} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
