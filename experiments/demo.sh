#!/usr/bin/env bash
# make demo: DDP, Local SGD, PLSGD and DreamDDP side by side on Fashion-MNIST, local ranks over Gloo.
#
# As root (with ip and tc) it runs on the emulated cluster, in the regime of the regime map where layer-wise sync
# makes a real difference (DEMO_NET, default below; README "Regime map"): every rank in its own network namespace,
# links shaped to that rate. Without root it runs on loopback and says so: on loopback communication is nearly
# free, so the policies differ by little and DreamDDP has nothing to hide.
# The table and the accuracy-vs-time figure say what happened, including where DreamDDP does not win. Each policy's
# samples/s is given from launch to exit (the whole command, as a user times it; the verdict is taken from it) and
# in the trainer's timed window (the steps after warm-up, and for dreamddp after its profiling and trial steps).
# Each policy runs DEMO_REPEATS times, in alternating order (forward, then backward); the table gives the medians
# and every run's launch-to-exit time: on a shared 2-core machine one run of each can differ by a tenth.
#
# Environment: DEMO_NET (rate, e.g. 1gbit; "loopback" forces loopback), DEMO_RANKS (default 2: one core per rank
# on a 2-core machine), DEMO_STEPS (default 304, a multiple of 8), DEMO_MODEL (default mlp), DEMO_REPEATS (default 2,
# 1..9), DEMO_RESULTS=FILE (also write the table as JSON, e.g. experiments/results/demo.json for the README),
# DREAMDDP_BIN.
# Runs go to runs/demo/<policy>/ (the first repeat; the others to runs/demo/repeats/<policy>.r<K>/), figures to
# runs/demo/figures/; an earlier runs/demo is kept as runs/demo.<time>.
set -euo pipefail
case ${1-} in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  "") ;;
  *) echo "demo: takes no arguments, got '$1' (configure it with the DEMO_* variables: see --help)" >&2; exit 2 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" demo
prov_command DEMO_NET DEMO_RANKS DEMO_STEPS DEMO_MODEL DEMO_REPEATS DEMO_RESULTS -- "$@"
cd "$(dirname "$0")/.."
BIN=${DREAMDDP_BIN:-build/dreamddp}
PY=/usr/bin/python3
# 38 whole periods of H=8: from launch to exit every periodic policy averages every layer the same number of times
# (a partial period at the end would hold some of plsgd's and dreamddp's phases and none of Local SGD's averages).
STEPS=${DEMO_STEPS:-304}
MODEL=${DEMO_MODEL:-mlp}
RANKS=${DEMO_RANKS:-2}
REPEATS=${DEMO_REPEATS:-2}
# The regime map (README) measured dreamddp's largest gain over DDP with the link at about this rate for the mlp.
DEFAULT_NET=1gbit
OUT=runs/demo
[[ $STEPS =~ ^[1-9][0-9]*$ && $STEPS -ge 24 ]] || { echo "demo: DEMO_STEPS must be an integer >= 24" >&2; exit 2; }
((STEPS % 8 == 0)) || echo "demo: note: $STEPS steps are not whole periods of 8; the last, partial one favours Local SGD" >&2
[[ $RANKS =~ ^[1-9][0-9]?$ && $RANKS -ge 2 ]] || { echo "demo: DEMO_RANKS must be an integer in 2..99" >&2; exit 2; }
[[ $REPEATS =~ ^[1-9]$ ]] || { echo "demo: DEMO_REPEATS must be an integer in 1..9" >&2; exit 2; }
[ -x "$BIN" ] || { echo "demo: no dreamddp binary at $BIN (make build)" >&2; exit 2; }
if [ -e "$OUT" ]; then
  keep="$OUT.$(date +%Y%m%d-%H%M%S)"
  mv "$OUT" "$keep"
  echo "demo: kept the earlier demo run as $keep"
fi
mkdir -p "$OUT"
prov_start

NET=()
NETNAME=${DEMO_NET:-$DEFAULT_NET}
if [ "$NETNAME" != loopback ]; then
  if [ "$(id -u)" = 0 ] && command -v tc >/dev/null && ip netns list >/dev/null 2>&1; then
    NET=(--netem "$NETNAME")
  else
    echo "demo: NOTE: the emulated cluster needs root with ip and tc; running on LOOPBACK instead of $NETNAME."
    echo "demo:       On loopback communication is nearly free, so DreamDDP has little to hide and the policies"
    echo "demo:       differ by little: the regime map in README.md shows where the difference is real."
    NETNAME=loopback
  fi
fi
echo "demo: $MODEL on Fashion-MNIST, $RANKS ranks x batch 64, $STEPS steps per policy, 1 thread per rank," \
  "network: $NETNAME, $REPEATS repeat(s) in alternating order"

POLICIES=(ddp localsgd:k=8 plsgd:h=8 dreamddp:h=8)
for ((rep = 1; rep <= REPEATS; rep++)); do
  order=("${POLICIES[@]}")
  ((rep % 2)) || order=(dreamddp:h=8 plsgd:h=8 localsgd:k=8 ddp)  # alternating: backward on even repeats
  for policy in "${order[@]}"; do
    name=${policy%%:*}
    dir=$OUT/$name
    ((rep == 1)) || { mkdir -p "$OUT/repeats"; dir=$OUT/repeats/$name.r$rep; }
    echo "== $policy (repeat $rep of $REPEATS)"
    t0=$(date +%s.%N)
    "$BIN" launch -n "$RANKS" "${NET[@]}" -- train --model "$MODEL" --data fashion-mnist --batch 64 --steps "$STEPS" \
      --threads 1 --policy "$policy" --eval-every $((STEPS / 3)) --out "$dir" --log-every $((STEPS / 6)) \
      | tail -n 1 > "$dir.summary-line.json"
    echo "$t0 $(date +%s.%N)" > "$dir.launch-to-exit"  # as a user times it: the whole command
  done
done

$PY analysis/make_figures.py "$OUT" >/dev/null
$PY - "$OUT" "$NETNAME" "$RANKS" "$STEPS" "${DEMO_RESULTS:-}" "$REPEATS" "${POLICIES[@]}" <<'PYEOF'
import json, os, statistics, sys
sys.path.insert(0, "experiments/lib")
import provenance
out, net, ranks, steps, save, repeats = sys.argv[1:7]
policies = sys.argv[7:]
rows = []
for p in policies:
    name = p.split(":")[0]
    dirs = [os.path.join(out, name)] + [os.path.join(out, "repeats", "%s.r%d" % (name, k))
                                        for k in range(2, int(repeats) + 1)]
    runs = []
    for d in dirs:
        s = json.load(open(os.path.join(d, "summary.json")))
        t0, t1 = (float(x) for x in open(d + ".launch-to-exit").read().split())
        runs.append((s, t1 - t0))
    s = runs[0][0]  # the first repeat: its accuracy, bytes and window (the same in every repeat)
    samples = int(steps) * int(ranks) * s["batch"]
    wall = statistics.median(t for _, t in runs)
    rows.append({"policy": s["policy"], "samples_per_s": statistics.median(x["samples_per_s"] for x, _ in runs),
                 "timed_steps": s["timed_steps"], "launch_to_exit_s": wall,
                 "launch_to_exit_runs": [round(t, 3) for _, t in runs], "samples_per_s_end_to_end": samples / wall,
                 "exposed": statistics.median(x["exposed_comm_fraction"] for x, _ in runs),
                 "mb_per_rank": s["comm_bytes"] / 1e6, "test_accuracy": s.get("test_accuracy")})
by = {r["policy"].split(":")[0]: r for r in rows}
# The verdict is taken from launch to exit, as a user times a run: start-up, warm-up, any profiling or trial
# steps, the evaluations and the exit all count. The timed window (the trainer's samples/s) is shown beside it.
key = "samples_per_s_end_to_end"
ddp = by["ddp"][key]
best_name = max(("localsgd", "plsgd"), key=lambda n: by[n][key])
best = by[best_name][key]
dd = by["dreamddp"][key]
win = {n: by[n]["samples_per_s"] for n in by}
print(f"\nDDP, Local SGD, PLSGD and DreamDDP: {ranks} ranks, network {net}, {steps} steps each, median of "
      f"{repeats} alternating repeat(s)")
print(f"{'policy':<16}{'launch to exit':>16}{'samples/s':>11}{'vs ddp':>8}{'timed window':>14}{'samples/s':>11}"
      f"{'exposed comm':>14}{'MB sent/rank':>14}{'test acc':>10}  runs, s")
for r in rows:
    acc = "-" if r["test_accuracy"] is None else f"{100 * r['test_accuracy']:.2f}%"
    a, b = r["timed_steps"]
    print(f"{r['policy']:<16}{r['launch_to_exit_s']:>15.2f}s{r[key]:>11.0f}{r[key] / ddp:>7.2f}x"
          f"{'steps %d-%d' % (a, b - 1):>14}{r['samples_per_s']:>11.0f}"
          f"{100 * r['exposed']:>13.1f}%{r['mb_per_rank']:>14.0f}{acc:>10}  "
          + ", ".join("%.2f" % t for t in r["launch_to_exit_runs"]))
print("launch to exit: the whole `dreamddp launch` command (median of the runs), start-up, evaluations and exit "
      "included; timed window: "
      "the trainer's samples/s over the steps shown, which leaves out the steps before them (warm-up, and for "
      "dreamddp its profiling and trial steps) and the evaluations.")
ratio = dd / best
verdict = ("wins" if ratio >= 1.02 else "ties" if ratio >= 0.98 else "loses")
wratio = win["dreamddp"] / max(win["localsgd"], win["plsgd"])
print(f"\nFrom launch to exit dreamddp:h=8 runs at {dd / ddp:.2f}x DDP and {ratio:.2f}x the better of Local SGD / "
      f"PLSGD ({best_name}): it {verdict} against its own baselines here (in the timed window alone: {wratio:.2f}x).")
spread = max((max(r["launch_to_exit_runs"]) - min(r["launch_to_exit_runs"])) / r["launch_to_exit_s"] for r in rows)
if int(repeats) > 1:
    print(f"The runs of one policy lie up to {100 * spread:.0f}% apart from launch to exit"
          + (f": dreamddp's {abs(ratio - 1) * 100:.0f}% is within that spread." if abs(ratio - 1) < spread else "."))
if net == "loopback":
    print("On loopback communication costs little, so hiding it buys little; see the regime map (README.md).")
elif verdict != "wins":
    print("Where communication per step is far above backward, layer-wise sync can only spread it over H steps, "
          "as Local SGD does: the regime map (README.md) shows where it pays and where it ties.")
print(f"figures: {out}/figures/ (accuracy against wall time, one step's overlap timeline)")
if save:
    provenance.write_json_atomic(save, provenance.stamp_from_env(
        {"study": "demo", "network": net, "ranks": int(ranks), "steps": int(steps), "repeats": int(repeats),
         "rows": rows,
         "dreamddp_vs_ddp": dd / ddp, "spread": spread, "dreamddp_vs_best_baseline": ratio, "best_baseline": best_name,
         "verdict": verdict, "verdict_from": key, "dreamddp_vs_best_baseline_timed_window": wratio}))
PYEOF
