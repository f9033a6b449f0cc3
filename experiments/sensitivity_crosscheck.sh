#!/usr/bin/env bash
# Sensitivity cross-check (CI-unfriendly, ~10-15 min on 2 busy cores): one probed cnn run on Fashion-MNIST, then
# analysis/torch_sensitivity.py both: (a) EXACT — the first --exact-probes probes recomputed in PyTorch from the
# trainer's own parameters at t0 and t0+d (deterministic re-runs with --save-params), expected within 1e-3;
# (b) STATISTICAL — an independent PyTorch training of the same definition (same init rule and seed, data order,
# SGD settings, probe batch and probe steps), its cosine-vs-delay table against ours.
#
#   experiments/sensitivity_crosscheck.sh [--steps 200] [--batch 64] [--every 40] [--probe-batch 1024]
#       [--exact-probes 2] [--ranks 1] [--threads 2] [--out runs/sensitivity_crosscheck] [--bin build/dreamddp]
#
# The schedule is constant lr 0.05 (momentum 0.9) after a 2% warm-up given explicitly, because the exact check
# re-runs the trainer with fewer --steps and the default cosine schedule depends on --steps. --ranks R > 1 runs ours
# as R ranks (dreamddp launch, ddp) and simulates R ddp ranks in PyTorch. Output: OUT/crosscheck.txt (the tables),
# OUT/crosscheck.json; exit status that of torch_sensitivity.py (1: the exact check failed).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" sensitivity_crosscheck.sh
cd "$(dirname "$0")/.."

STEPS=200 BATCH=64 EVERY=40 PROBE_BATCH=1024 EXACT_PROBES=2 RANKS=1 THREADS=2
OUT=runs/sensitivity_crosscheck BIN=${DREAMDDP_BIN:-build/dreamddp} PY=/usr/bin/python3
while [ $# -gt 0 ]; do
  need_value -h --help -- "$@"
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --probe-batch) PROBE_BATCH=$2; shift 2 ;;
    --exact-probes) EXACT_PROBES=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_nonneg --got STEPS BATCH EVERY PROBE_BATCH EXACT_PROBES RANKS THREADS
need_bin "$BIN" "build it, or pass --bin"
"$PY" -c 'import torch, h5py' 2>/dev/null || die "$PY lacks torch or h5py (Debian python3-torch, python3-h5py)"
mkdir -p "$OUT"

WARMUP=$((STEPS / 50))
TRAIN=(--model cnn --data fashion-mnist --steps "$STEPS" --batch "$BATCH" --policy ddp --lr 0.05 --momentum 0.9
       --lr-schedule const --warmup "$WARMUP" --threads "$THREADS" --eval-samples 2000 --seed 0
       --sensitivity "delays=1/2/4/8,every=$EVERY,batch=$PROBE_BATCH")
echo "sensitivity_crosscheck: ${RANKS} rank(s) of: dreamddp train ${TRAIN[*]}" | tee "$OUT/crosscheck.txt"
start=$(date +%s)
set +e
"$PY" analysis/torch_sensitivity.py both -v --bin "$BIN" --work "$OUT/work" --ranks "$RANKS" \
  --probes "$EXACT_PROBES" --torch-threads "$THREADS" --json "$OUT/crosscheck.json" -- "${TRAIN[@]}" \
  2>&1 | tee -a "$OUT/crosscheck.txt"
rc=${PIPESTATUS[0]}
set -e
echo "sensitivity_crosscheck: exit $rc after $(( $(date +%s) - start )) s; tables in $OUT/crosscheck.txt" | tee -a "$OUT/crosscheck.txt"
exit "$rc"
