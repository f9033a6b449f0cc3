#!/usr/bin/env bash
# Validation of `dreamddp simulate` against measured runs: for each measured run directory (metrics.h5 and
# summary.json of `dreamddp train`, e.g. under `dreamddp launch`), simulates the same policy, world, steps, model
# and batch, and prints measured vs simulated step_ms and their ratio.
#
#   experiments/sim_validate.sh [--profile DIR] [--bp run|profile] [--step run|profile] [--bin build/dreamddp]
#                               [--json FILE] [--measured-by FILE] RUNDIR...
#
# The simulation's inputs come from the run and its setting only:
#   per-layer backward times           the profile's bp.json; --bp run takes the run's own /layer_ready instead
#                                      (median over its logged steps after step 0; on a loaded 2-core machine
#                                      the backward of a quiet step, without the comm thread competing)
#                                      (the results name that profile RUN_BP(RUN/metrics.h5, PROFILE): it is
#                                      written to a temporary folder, not kept)
#   per-layer comm times               --profile DIR (bp.json/comm.json, e.g. `dreamddp profile` in the run's
#                                      setting), else RUNDIR/profile/ if present, else measured now with
#                                      `dreamddp launch -n WORLD -- profile --model M --batch B --threads T`
#   forward and update time per step   the profile's step.json (written by `dreamddp profile`); for a profile
#                                      without one, or with --step run, the run's /steps medians (steps after
#                                      warm-up)
#   the network                        c = alpha + bytes x per_byte from the profile's comm times over the
#                                      layers' bytes (per_byte: the largest layers' rate; alpha: what the small
#                                      layers take beyond it), turned into a WORLDx1 cluster with SimGrid's CM02
#                                      model (no correction factors): link bandwidth 2(n-1)/n / per_byte, latency
#                                      alpha / 2(n-1) per ring step (a ring all-reduce of S bytes then takes c(S))
# Shared cores: a profile whose ranks outnumbered its machine's cores times its passes one rank at a time (its
# meta.json says so); the simulation then runs every rank's compute on one machine of that many cores
# (`simulate --shared-cores C,threads=T`), where ranks computing at once share them, as in the run.
# With --bp run --step run every compute time comes from the run itself, so what is left between simulated and
# measured is the model of synchronization and the network alone, not how far the machine's speed drifted
# between the profile and the run.
# Contention: every run is simulated twice, with the profile's overlap.json (compute slower while bulk collectives
# run, transfers slower while the rank computes) and without it; the table shows both ratios. With --bp run the
# charge is the communication side only: the run's own backward already holds the compute side.
# --json FILE also writes the table as JSON, with the compute per step the simulation was given (forward + backward
# + update, no contention) beside the run's own (its median and mean over the steps after warm-up): a run that
# computed slower than its profile, on the whole or in some steps, shows there. --measured-by FILE (a results file
# of the measurement, e.g. the --results of experiments/regime_map.sh that ran RUNDIR...) adds its command and
# machine to it as measured_by.
# Exit 0 when every run was simulated (a ratio far from 1 is a finding, not a failure).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" sim_validate.sh
prov_command -- "$@"
BIN=${DREAMDDP_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/dreamddp} PROFILE="" JSON="" BP=profile STEP=profile
MEASURED_BY=""
RUNS=()
while [ $# -gt 0 ]; do
  case $1 in
    --profile|--bin|--json|--bp|--step|--measured-by) need_value -- "$@" ;;
  esac
  case $1 in
    --profile) PROFILE=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --measured-by) MEASURED_BY=$2; shift 2 ;;
    --bp) BP=$2; shift 2; [ "$BP" = run ] || [ "$BP" = profile ] || die "--bp must be run or profile" ;;
    --step) STEP=$2; shift 2; [ "$STEP" = run ] || [ "$STEP" = profile ] || die "--step must be run or profile" ;;
    -h|--help) usage_from_header; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) RUNS+=("$1"); shift ;;
  esac
done
[ ${#RUNS[@]} -gt 0 ] || die "give at least one measured run directory (see --help)"
need_bin "$BIN"
for r in "${RUNS[@]}"; do
  [ -f "$r/metrics.h5" ] && [ -f "$r/summary.json" ] || die "$r: not a run directory (needs metrics.h5 and summary.json)"
done
[ -z "$PROFILE" ] || [ -f "$PROFILE/bp.json" ] || die "--profile $PROFILE: no bp.json there"
if [ -n "$MEASURED_BY" ]; then
  [ -n "$JSON" ] || die "--measured-by goes with --json (it is recorded there)"
  /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if isinstance(d, dict) and isinstance(d.get("command"), str) and isinstance(d.get("machine"), dict) else 1)' \
    "$MEASURED_BY" 2>/dev/null || die "--measured-by $MEASURED_BY: not a results file with a command and a machine"
fi
prov_start
exec /usr/bin/python3 - "$BIN" "$PROFILE" "$JSON" "$BP" "$STEP" "$MEASURED_BY" "${RUNS[@]}" <<'PYEOF'
import json, os, subprocess, sys, tempfile
sys.path.insert(0, os.environ["PROV_LIB"])
import provenance
import h5py
import numpy as np

binary, profile_arg, json_out, bp_from, step_from, measured_by = sys.argv[1:7]
runs = sys.argv[7:]
tmp = tempfile.mkdtemp(prefix="dd_sim_validate_")


def attr(a, k, d=None):
    v = a.get(k, d)
    if isinstance(v, bytes):
        v = v.decode()
    if hasattr(v, "item"):
        v = v.item()
    return v


def network_fit(S, c):
    """(per_byte, alpha) of c(S) = alpha + S per_byte. The bandwidth comes from the largest layers (S >= half the
    largest: the median of c/S), the latency from the small ones (S <= a tenth of the largest: the median of what
    is left of c, at least 0). A least-squares line through all layers is not this: on a shaped link a large
    transfer hides the per-step latency, so the line's slope comes out steeper than any large layer's rate and its
    intercept absorbs the difference (1.045 Gbit/s fitted on a 1 Gbit/s link, whose large layers ran at 0.94)."""
    S, c = np.asarray(S, float), np.asarray(c, float)
    big, small = S >= 0.5 * S.max(), S <= 0.1 * S.max()
    per_byte = max(float(np.median(c[big] / S[big])), 1e-15)
    rest = c - S * per_byte
    alpha = max(float(np.median(rest[small])) if small.any() else float(rest.min()), 0.0)
    return per_byte, alpha


rows = []
print(f"{'run':<36} {'policy':<26} {'world':>5} {'steps':>5} {'measured_ms':>12} {'simulated_ms':>12} {'sim/meas':>8} "
      f"{'no_charge_ms':>12} {'sim/meas':>8}")
for run in runs:
    with h5py.File(os.path.join(run, "metrics.h5"), "r") as f:
        a = dict(f.attrs)
        steps = f["steps"][:]
        layer_bytes = f["layers"]["bytes"][:].astype(float)
        ready = f["layer_ready"][:] if "layer_ready" in f else None
    s = json.load(open(os.path.join(run, "summary.json")))
    model, policy = attr(a, "model"), attr(a, "policy")
    world, nsteps, batch = int(attr(a, "world", 1)), int(attr(a, "steps")), int(attr(a, "batch"))
    threads = int(attr(a, "threads", 1))
    warm = min(5, nsteps // 10)
    st = steps[steps["step"] >= warm]
    fwd, upd = float(np.median(st["forward_ms"])), float(np.median(st["update_ms"]))
    comp = st["forward_ms"] + st["backward_ms"] + st["update_ms"]  # the run's compute per step (rank 0)
    prof = profile_arg or (os.path.join(run, "profile") if os.path.isfile(os.path.join(run, "profile", "bp.json")) else "")
    if not prof:
        prof = os.path.join(tmp, os.path.basename(os.path.abspath(run)) + "_profile")
        cmd = [binary, "launch", "-n", str(world), "--", "profile", "--model", model, "--batch", str(batch),
               "--threads", str(threads), "--out", prof]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"sim_validate.sh: {' '.join(cmd)} failed: {p.stderr.strip()[-400:]}")
    comm_dir = prof
    comm = json.load(open(os.path.join(prof, "comm.json")), object_pairs_hook=lambda kv: dict(kv))
    step_source = "run"
    if step_from == "profile" and os.path.isfile(os.path.join(prof, "step.json")):
        st_prof = json.load(open(os.path.join(prof, "step.json")))
        fwd, upd, step_source = st_prof["forward_s"] * 1e3, st_prof["update_s"] * 1e3, "profile"
    bp_source = "profile"
    if bp_from == "run" and ready is not None and len(ready):
        # The run's own backward per layer: ready_l - ready_{l+1} (backward runs L-1 .. 0), rank 0, steps > 0.
        r0 = ready[(ready["rank"] == ready["rank"].min()) & (ready["step"] > 0)]
        L = len(layer_bytes)
        per = []
        for stp in np.unique(r0["step"]):
            t = np.zeros(L)
            rows_s = r0[r0["step"] == stp]
            if len(rows_s) != L:
                continue
            t[rows_s["layer"]] = rows_s["ready_s"]
            nxt = np.concatenate([t[1:], [0.0]])
            per.append(t - nxt)
        if per:
            bp = np.median(np.array(per), axis=0)
            derived = os.path.join(tmp, os.path.basename(os.path.abspath(run)) + "_run_bp")
            os.makedirs(derived, exist_ok=True)
            json.dump(dict(zip(comm.keys(), [float(x) for x in bp])), open(os.path.join(derived, "bp.json"), "w"))
            json.dump(comm, open(os.path.join(derived, "comm.json"), "w"))
            prof, bp_source = derived, "run"
    # A derived profile lives in a temporary folder: the results name what it was made of instead.
    shown = prof if bp_source != "run" else "RUN_BP(%s/metrics.h5, %s)" % (run, comm_dir)
    # The contention charged: the profile's overlap.json (compute and communication sides); with --bp run only the
    # communication side, the run's backward already being as slow as contention made it.
    cont = None
    ov_path = os.path.join(comm_dir, "overlap.json")
    if os.path.isfile(ov_path):
        ov = json.load(open(ov_path))
        cont = {"compute_slowdown": float(ov.get("compute_slowdown", 0.0)),
                "comm_slowdown": float(ov.get("comm_slowdown", 0.0))}
        if bp_source == "run":
            cont["compute_slowdown"] = 0.0
            json.dump(cont, open(os.path.join(prof, "overlap.json"), "w"))
    # The same profile without overlap.json: the simulation without the charge.
    bare = os.path.join(tmp, os.path.basename(os.path.abspath(run)) + "_no_contention")
    os.makedirs(bare, exist_ok=True)
    for fn in os.listdir(prof):
        if fn != "overlap.json" and not os.path.exists(os.path.join(bare, fn)):
            os.symlink(os.path.abspath(os.path.join(prof, fn)), os.path.join(bare, fn))
    c = np.array([float(v or 0) for v in comm.values()])
    bp_sum = sum(float(v or 0) for v in json.load(open(os.path.join(prof, "bp.json"))).values())
    if len(c) != len(layer_bytes):
        sys.exit(f"sim_validate.sh: {prof} has {len(c)} layers, the run's model {len(layer_bytes)}")
    per_byte, alpha = network_fit(layer_bytes, c) if world > 1 else (0.0, 0.0)
    n = max(world, 2)
    bw = 2 * (n - 1) / n / per_byte
    lat = alpha / (2 * (n - 1))
    args = [binary, "simulate", "--profile", prof, "--model", model,
            "--cluster", f"{world}x1,intra=1000TBps,inter={bw:.6g}Bps,lat={lat * 1e6:.6g}us",
            "--cfg", "network/model:CM02", "--cfg", "network/crosstraffic:0", "--policy", policy,
            "--steps", str(nsteps), "--batch", str(batch), "--forward-ms", f"{fwd:.6g}", "--update-ms", f"{upd:.6g}"]
    # the run's last period as it ran (runs recorded before the option made the plan's averages there)
    args += ["--last-period", str(attr(a, "last_period", "scheduled"))]
    if policy.startswith("hier") or policy.startswith("threshold") or policy.startswith("hybrid"):
        args += ["--signals", "constant"]
    # A profile timed one rank at a time (its meta.json: the ranks outnumbered the machine's cores): the
    # simulation shares the cores again among the ranks computing at once. Not with the run's own backward, which
    # already holds that sharing.
    meta_path = os.path.join(comm_dir, "meta.json")
    pmeta = json.load(open(meta_path)) if os.path.isfile(meta_path) else {}
    machine = pmeta.get("machine") or {}
    shared = ""
    if machine.get("passes") == "one rank at a time" and bp_source != "run":
        shared = f"{int(machine['cores'])},threads={int(pmeta.get('threads', threads))}"
        args += ["--shared-cores", shared]
    def simulated(a):
        p = subprocess.run(a, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"sim_validate.sh: {' '.join(a)} failed: {p.stderr.strip()[-400:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])
    sim = simulated(args)
    sim0 = simulated([bare if x == prof else x for x in args]) if cont else sim
    meas = float(s["step_ms"])
    ratio = sim["step_ms"] / meas if meas > 0 else float("nan")
    ratio0 = sim0["step_ms"] / meas if meas > 0 else float("nan")
    print(f"{os.path.basename(os.path.abspath(run))[:36]:<36} {policy[:26]:<26} {world:>5} {nsteps:>5} {meas:>12.3f} "
          f"{sim['step_ms']:>12.3f} {ratio:>8.3f} {sim0['step_ms']:>12.3f} {ratio0:>8.3f}")
    rows.append({"run": run, "policy": policy, "model": model, "world": world, "steps": nsteps, "batch": batch,
                 "measured_step_ms": meas, "simulated_step_ms": sim["step_ms"], "ratio": ratio,
                 "contention": cont, "shared_cores": shared or None,
                 "simulated_step_ms_no_contention": sim0["step_ms"],
                 "ratio_no_contention": ratio0,
                 "simulated_exposed_comm_fraction_no_contention": sim0["exposed_comm_fraction"],
                 "measured_exposed_comm_fraction": s.get("exposed_comm_fraction"),
                 "simulated_exposed_comm_fraction": sim["exposed_comm_fraction"],
                 "forward_ms": fwd, "update_ms": upd, "fit_alpha_s": alpha, "fit_per_byte_s": per_byte,
                 "sim_compute_ms": fwd + upd + bp_sum * 1e3,
                 "run_compute_ms_median": float(np.median(comp)), "run_compute_ms_mean": float(np.mean(comp)),
                 "profile": shown, "backward_from": bp_source, "forward_update_from": step_source,
                 "command": " ".join(args[1:]).replace(prof, shown)})
print(json.dumps({"validation": [{k: r[k] for k in ("run", "policy", "world", "measured_step_ms",
                                                    "simulated_step_ms", "ratio", "simulated_step_ms_no_contention",
                                                    "ratio_no_contention")} for r in rows]}))
if json_out:
    repo = os.path.dirname(os.path.dirname(os.environ["PROV_LIB"]))
    doc = provenance.stamp_from_env({"rows": rows})
    if measured_by:
        m = json.load(open(measured_by))
        doc["measured_by"] = {"command": m["command"], "machine": m["machine"]}
    provenance.write_json_atomic(json_out, provenance.repo_relative(doc, repo))
PYEOF
