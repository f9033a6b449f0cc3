#!/usr/bin/env bash
# Run-to-run spread of the sensitivity probe: the same training and probe definition under several seeds (each seed
# its own initialization, data order and probe batch), and per delay the mean cosine of each run (over probes and
# layers), their spread, and for the two runs furthest apart at each delay the share of layers on the same side.
# It answers whether two runs of one definition can differ at one delay by a given amount in every layer.
#
#   experiments/sensitivity_seeds.sh [--model resnet18:image=16] [--seeds "0 1 2 3 4"] [--steps 310] [--batch 64]
#       [--lr 0.05] [--every 20] [--probe-batch 128] [--threads 2] [--out runs/sensitivity_seeds]
#       [--bin build/dreamddp] [--save FILE] [--reported D:A:B,...] [--reported-what TEXT]
#
# Defaults: SGD momentum 0.9, constant lr 0.05 from step 0 (--warmup 0), batch 64, 310 steps, probes every 20
# steps from step 0 (16 probes), delays 1, 2, 4, 8; resnet18 at image 16 so that five seeds fit in ~15 min on two
# cores. Runs: OUT/seed-S/metrics.h5 (a seed whose run is there is not trained again); the table in
# OUT/summary.txt and OUT/seeds.json (also --save FILE). --reported sets the mean cosines A and B of two other runs
# at delay D beside the table (e.g. two implementations compared), --reported-what says what they are.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" sensitivity_seeds.sh
prov_command -- "$@"
cd "$(dirname "$0")/.."

MODEL=resnet18:image=16 SEEDS="0 1 2 3 4" STEPS=310 BATCH=64 LR=0.05 EVERY=20 PROBE_BATCH=128 THREADS=2
OUT=runs/sensitivity_seeds BIN=${DREAMDDP_BIN:-build/dreamddp} PY=/usr/bin/python3 SAVE="" REPORTED="" REPORTED_WHAT=""
while [ $# -gt 0 ]; do
  need_value -h --help -- "$@"
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --probe-batch) PROBE_BATCH=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --save) SAVE=$2; shift 2 ;;
    --reported) REPORTED=$2; shift 2 ;;
    --reported-what) REPORTED_WHAT=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_positive --got STEPS BATCH EVERY PROBE_BATCH THREADS
[ "$(echo $SEEDS | wc -w)" -ge 2 ] || die "--seeds must name at least two seeds"
[ -z "$REPORTED" ] || [[ $REPORTED =~ ^[0-9]+:-?[0-9.]+:-?[0-9.]+(,[0-9]+:-?[0-9.]+:-?[0-9.]+)*$ ]] ||
  die "--reported '$REPORTED': expected DELAY:A:B[,DELAY:A:B...]"
need_bin "$BIN" "build it, or pass --bin"
"$PY" -c 'import h5py, numpy' 2>/dev/null || die "$PY lacks h5py or numpy (Debian python3-h5py)"
mkdir -p "$OUT"
prov_start

for s in $SEEDS; do
  [ -f "$OUT/seed-$s/metrics.h5" ] && { echo "seed $s: kept $OUT/seed-$s"; continue; }
  echo "seed $s: training ..."
  "$BIN" train --model "$MODEL" --data fashion-mnist --batch "$BATCH" --steps "$STEPS" --lr "$LR" --momentum 0.9 \
    --lr-schedule const --warmup 0 --threads "$THREADS" --seed "$s" --eval-samples 500 --log-every 50 \
    --sensitivity "delays=1/2/4/8,every=$EVERY,batch=$PROBE_BATCH" --out "$OUT/seed-$s.tmp" --overwrite \
    > "$OUT/seed-$s.log" 2>&1
  mv "$OUT/seed-$s.tmp" "$OUT/seed-$s"
done

"$PY" - "$OUT" "$SAVE" "$REPORTED" "$REPORTED_WHAT" $SEEDS <<'EOF'
import json, os, sys
import h5py
import numpy as np
out, save, reported, reported_what, seeds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
runs = {}
for s in seeds:
    with h5py.File(os.path.join(out, "seed-%s" % s, "metrics.h5"), "r") as f:
        runs[s] = f["sensitivity/cosine"][:].astype(np.float64)    # [probe, layer, delay]
        delays = [int(d) for d in f["sensitivity/delays"][:]]
        probes = [int(p) for p in f["sensitivity/probe_steps"][:]]
        layers = len(f["layers"])
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
lines = ["%s, %s steps x batch %s, lr %s const, %d probes (t0 = %d..%d), %d layers; seeds %s"
         % (attrs.get("model"), attrs.get("steps"), attrs.get("batch"), attrs.get("lr"), len(probes), probes[0],
            probes[-1], layers, " ".join(seeds)),
         "| delay | " + " | ".join("seed %s" % s for s in seeds) + " | mean | sd | max - min | widest pair | layers on one side |",
         "|---|" + "---|" * (len(seeds) + 5)]
per_delay = []
for j, d in enumerate(delays):
    m = {s: float(np.nanmean(runs[s][:, :, j])) for s in seeds}
    vals = np.array(list(m.values()))
    a = max(seeds, key=lambda s: m[s])
    b = min(seeds, key=lambda s: m[s])
    la, lb = np.nanmean(runs[a][:, :, j], axis=0), np.nanmean(runs[b][:, :, j], axis=0)
    same = float(np.mean(la > lb))
    per_delay.append({"delay": d, "per_seed": m, "mean": float(vals.mean()), "sd": float(vals.std(ddof=1)),
                      "range": float(vals.max() - vals.min()), "widest_pair": [a, b],
                      "share_of_layers_higher_in_first": same})
    lines.append("| %d | " % d + " | ".join("%.3f" % m[s] for s in seeds) +
                 " | %.3f | %.3f | %.3f | %s vs %s | %d of %d |" % (vals.mean(), vals.std(ddof=1), vals.max() - vals.min(),
                                                                  a, b, int(round(same * layers)), layers))
text = "\n".join(lines)
print(text)
open(os.path.join(out, "summary.txt"), "w").write(text + "\n")
doc = {"model": attrs.get("model"), "steps": int(attrs.get("steps")), "batch": int(attrs.get("batch")),
       "lr": float(attrs.get("lr")), "probes": probes, "delays": delays, "layers": layers, "seeds": seeds,
       "per_delay": per_delay}
if reported:
    doc["reported"] = {int(d): [float(a), float(b)] for d, a, b in (item.split(":") for item in reported.split(","))}
    doc["reported_what"] = reported_what
for path in [os.path.join(out, "seeds.json")] + ([save] if save else []):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
EOF
[ -z "$SAVE" ] || prov_stamp "$SAVE"
prov_stamp "$OUT/seeds.json"
