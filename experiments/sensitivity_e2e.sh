#!/usr/bin/env bash
# The sensitivity probe end to end against PyTorch on resnet18 (analysis/probe_e2e.py): PyTorch starts from our
# theta(0), trains on the same Fashion-MNIST batches (resized to 3 x IMAGE x IMAGE) with the same SGD, probes by the
# rule of docs/design.md "What the probe measures", and every cosine is compared with ours within a bound from a
# float32/float64 pair of the PyTorch run. Prints the table per delay (ours, PyTorch, mean |difference|, worst
# layer) that docs/results/sensitivity.md shows.
#
#   experiments/sensitivity_e2e.sh [--model resnet18:image=32] [--steps 50] [--batch 64] [--lr 0.05] [--every 20]
#       [--probe-batch 64] [--seed 0] [--threads 2] [--out runs/sensitivity_e2e] [--bin build/dreamddp] [--save FILE]
#
# SGD momentum 0.9, constant lr from step 0 (--warmup 0), probes from step 0, delays 1, 2, 4, 8. The float64
# replica is what costs: on two cores resnet18 at image 32 trains at ~60 samples/s in float32 (ours and PyTorch)
# and ~8 in float64, so the defaults (50 steps, 3 probes, probe batch 64: ~4,200 samples) take ~15 min.
# Output: OUT/e2e.txt (the check's report), OUT/e2e.json (with --save FILE also there); exit status that of
# probe_e2e.py (1: a number outside its bound).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" sensitivity_e2e.sh
prov_command -- "$@"
cd "$(dirname "$0")/.."

MODEL=resnet18:image=32 STEPS=50 BATCH=64 LR=0.05 EVERY=20 PROBE_BATCH=64 SEED=0 THREADS=2
OUT=runs/sensitivity_e2e BIN=${DREAMDDP_BIN:-build/dreamddp} PY=/usr/bin/python3 SAVE=""
while [ $# -gt 0 ]; do
  need_value -h --help -- "$@"
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --probe-batch) PROBE_BATCH=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --save) SAVE=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_positive --got STEPS BATCH EVERY PROBE_BATCH THREADS
need_nonneg --got SEED
need_bin "$BIN" "build it, or pass --bin"
"$PY" -c 'import torch, torchvision, h5py' 2>/dev/null ||
  die "$PY lacks torch, torchvision or h5py (Debian python3-torch, python3-torchvision, python3-h5py)"
mkdir -p "$OUT"
prov_start

TRAIN=(--model "$MODEL" --data fashion-mnist --batch "$BATCH" --steps "$STEPS" --lr "$LR" --momentum 0.9
       --lr-schedule const --warmup 0 --threads "$THREADS" --seed "$SEED" --eval-samples 16
       --sensitivity "delays=1/2/4/8,every=$EVERY,batch=$PROBE_BATCH")
echo "sensitivity_e2e: dreamddp train ${TRAIN[*]}" | tee "$OUT/e2e.txt"
start=$(date +%s)
set +e
"$PY" analysis/probe_e2e.py -v --bin "$BIN" --work "$OUT/work" --torch-threads "$THREADS" --json "$OUT/e2e.json" \
  -- "${TRAIN[@]}" 2>&1 | tee -a "$OUT/e2e.txt"
rc=${PIPESTATUS[0]}
set -e
echo "sensitivity_e2e: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/e2e.txt"
if [ -f "$OUT/e2e.json" ]; then
  prov_stamp "$OUT/e2e.json"
  [ -z "$SAVE" ] || { cp "$OUT/e2e.json" "$SAVE"; }
fi
exit "$rc"
