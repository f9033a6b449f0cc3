#!/usr/bin/env bash
# Convergence study: test accuracy and training loss against wall time and against samples for ddp, localsgd:k=8,
# plsgd:h=8, dreamddp:h=8 and hybrid, N ranks under `dreamddp launch` (loopback, or --netem RATE), same seed, data
# order and sample budget for every policy; summary table (final accuracy, gap to ddp, samples/s), then figures.
#
#   experiments/convergence.sh [--model cnn] [--steps 1000] [--batch 32] [--ranks 4] [--eval-every N]
#                              [--eval-samples 5000] [--lr 0.02] [--seed S] [--netem 1gbit] [--out runs/convergence]
#                              [--policies "ddp localsgd:k=8 plsgd:h=8 dreamddp:h=8 hybrid"] [--bin build/dreamddp]
#                              [--train-args "--avg-optimizer-state ..."]   (more train options, every policy)
# lr 0.02 (SGD, momentum 0.9, cosine): at the trainer's default 0.05 even ddp's loss spikes to 4.8 during warm-up
# at this global batch (128), and single runs of the local policies swing by several points with that chaos.
#
# Runs: OUT/<policy>/ (':' '=' ',' made path-safe, e.g. dreamddp-h8) with metrics.h5 (/steps, /eval), summary.json
# and the launch log; the table is also written to OUT/summary.txt and OUT/convergence.json. An existing OUT is
# moved to OUT.<time> first. A policy the binary refuses (exit 2 naming the policy) is skipped with a note.
# The table checks the convergence target (dreamddp:h=8 within 1 point of ddp after the same samples).
# On two busy CPU cores cnn at batch 32 costs ~0.4 s per step with 4 ranks: ~5 min per policy with evaluations
# (every steps/5, on the first 5000 test images, the same for every policy).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" convergence.sh
prov_command -- "$@"
cd "$(dirname "$0")/.."

MODEL=cnn STEPS=1000 BATCH=32 RANKS=4 EVAL_EVERY=0 EVAL_SAMPLES=5000 LR=0.02 SEED=0 NETEM="" OUT=runs/convergence
POLICIES="ddp localsgd:k=8 plsgd:h=8 dreamddp:h=8 hybrid" BIN=${DREAMDDP_BIN:-build/dreamddp} PY=/usr/bin/python3
TRAIN_ARGS=""
while [ $# -gt 0 ]; do
  need_value -h --help -- "$@"
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --eval-every) EVAL_EVERY=$2; shift 2 ;;
    --eval-samples) EVAL_SAMPLES=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --netem) NETEM=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --policies) POLICIES=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_positive STEPS BATCH RANKS
need_nonneg SEED EVAL_EVERY EVAL_SAMPLES
[ "$EVAL_EVERY" = 0 ] && EVAL_EVERY=$(( STEPS / 5 > 0 ? STEPS / 5 : 1 ))
case $MODEL in mlp|cnn|resnet20) DATA=fashion-mnist ;; gpt-mini) DATA=text ;; *) die "--model: unknown model '$MODEL'" ;; esac
need_bin "$BIN"
NET=() NETNAME=loopback
if [ -n "$NETEM" ]; then NET=(--netem "$NETEM"); NETNAME=$NETEM; fi
EXTRA=()
[ -n "$LR" ] && EXTRA+=(--lr "$LR")
# shellcheck disable=SC2206  # word splitting is the point: --train-args "--avg-optimizer-state --nesterov"
[ -n "$TRAIN_ARGS" ] && EXTRA+=($TRAIN_ARGS)

if [ -e "$OUT" ]; then
  keep="$OUT.$(date +%Y%m%d-%H%M%S)"
  mv "$OUT" "$keep"
  echo "convergence.sh: moved the earlier $OUT to $keep"
fi
mkdir -p "$OUT"
prov_start
{
  echo "date: $(date -Is)"
  echo "host: $(hostname), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: tree at $(git rev-parse --short HEAD 2>/dev/null || echo unknown); binary $BIN built $(date -Is -r "$BIN")"
  echo "setup: $MODEL on $DATA, $RANKS ranks x batch $BATCH, $STEPS steps, eval every $EVAL_EVERY on $EVAL_SAMPLES samples, seed $SEED, network $NETNAME${TRAIN_ARGS:+, train $TRAIN_ARGS}"
} > "$OUT/run_log.txt"
echo "convergence: $MODEL on $DATA, $RANKS ranks x batch $BATCH, $STEPS steps ($((STEPS * RANKS * BATCH)) samples)," \
     "eval every $EVAL_EVERY steps, network $NETNAME"

: > "$OUT/runs.txt"
for policy in $POLICIES; do
  name=$(echo "$policy" | sed 's/:/-/; s/[:=]//g; s/,/_/g')
  dir=$OUT/$name
  echo "== $policy -> $dir (load $(cut -d' ' -f1 /proc/loadavg))"
  t0=$SECONDS
  set +e
  "$BIN" launch -n "$RANKS" "${NET[@]}" -- train --model "$MODEL" --data "$DATA" --batch "$BATCH" --steps "$STEPS" \
    --threads 1 --policy "$policy" --eval-every "$EVAL_EVERY" --eval-samples "$EVAL_SAMPLES" --seed "$SEED" "${EXTRA[@]}" \
    --out "$dir" --log-every $((STEPS / 5 > 0 ? STEPS / 5 : 1)) > "$OUT/$name.log" 2>&1
  rc=$?
  set -e
  if [ $rc = 2 ] && grep -qi "policy" "$OUT/$name.log"; then
    echo "   skipped: the binary refuses '$policy': $(grep -i policy "$OUT/$name.log" | head -n 1)"
    echo "$policy skipped (rc 2)" >> "$OUT/run_log.txt"
    continue
  fi
  [ $rc = 0 ] || { tail -n 20 "$OUT/$name.log" >&2; die "$policy failed (exit $rc); log: $OUT/$name.log"; }
  echo "   done in $((SECONDS - t0)) s; $(grep 'eval @' "$OUT/$name.log" | tail -n 1)"
  echo "$policy: $((SECONDS - t0)) s, load after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/run_log.txt"
  echo "$policy $name" >> "$OUT/runs.txt"
done

$PY - "$OUT" "$NETNAME" "$PROV_LIB" <<'PYEOF' | tee "$OUT/summary.txt"
import json, os, sys
import h5py, numpy as np
sys.path.insert(0, sys.argv[3])
import provenance

out, net = sys.argv[1], sys.argv[2]
rows = []
for line in open(os.path.join(out, "runs.txt")):
    policy, name = line.split()
    s = json.load(open(os.path.join(out, name, "summary.json")))
    with h5py.File(os.path.join(out, name, "metrics.h5"), "r") as f:
        ev, steps = f["eval"][:], f["steps"][:]
        batch, world = int(f.attrs["batch"]), int(f.attrs["world"])
    best = float(np.nanmax(ev["test_accuracy"])) if len(ev) else float("nan")
    final = float(ev["test_accuracy"][-1]) if len(ev) else float("nan")
    rows.append(dict(policy=s.get("policy", policy), run=name, samples=int((steps["step"][-1] + 1) * batch * world),
                     wall_s=float(steps["wall_time_s"][-1]), samples_per_s=s["samples_per_s"],
                     final_loss=s["final_loss"], test_accuracy=final, best_accuracy=best,
                     test_loss=float(ev["test_loss"][-1]) if len(ev) else float("nan"),
                     exposed_comm_fraction=s["exposed_comm_fraction"], comm_mb=s["comm_bytes"] / 1e6))
if not rows:
    sys.exit("convergence.sh: no run finished")
base = next((r for r in rows if r["policy"] == "ddp"), None)
print(f"\nConvergence, network {net}: test accuracy after the same samples; samples/s measured after warm-up")
print(f"{'policy':<34}{'samples':>9}{'wall s':>8}{'samples/s':>11}{'final loss':>11}{'test acc':>10}"
      f"{'vs ddp':>8}{'best acc':>10}{'exposed':>9}{'MB/rank':>9}")
for r in rows:
    gap = 100 * (r["test_accuracy"] - base["test_accuracy"]) if base else float("nan")
    r["gap_to_ddp_points"] = gap
    print(f"{r['policy']:<34}{r['samples']:>9}{r['wall_s']:>8.0f}{r['samples_per_s']:>11.0f}{r['final_loss']:>11.4f}"
          f"{100 * r['test_accuracy']:>9.2f}%{gap:>+8.2f}{100 * r['best_accuracy']:>9.2f}%"
          f"{100 * r['exposed_comm_fraction']:>8.1f}%{r['comm_mb']:>9.0f}")
dream = next((r for r in rows if r["policy"].startswith("dreamddp")), None)
if base and dream:
    ok = abs(dream["gap_to_ddp_points"]) <= 1.0 or dream["gap_to_ddp_points"] > 0
    print(f"\ntarget ({dream['policy']} within 1 point of ddp after {dream['samples']} samples): "
          f"{'PASS' if ok else 'FAIL'} ({dream['gap_to_ddp_points']:+.2f} points)")
provenance.write_json_atomic(os.path.join(out, "convergence.json"),
                             provenance.stamp_from_env({"network": net, "runs": rows}))
PYEOF

$PY analysis/make_figures.py "$OUT"
