#!/usr/bin/env bash
# Layer-sensitivity study: how fast each layer's gradient goes stale (cos(g_l(t0), g_l(t0+d)), d = 1, 2, 4, 8) for
# cnn and resnet20 on Fashion-MNIST and gpt-mini on text, on a fixed probe batch, plus one run probing the
# training minibatch (cnn); summary table per model and layer group, then the figures. With --models "resnet18
# resnet50 gpt2 llama" it is the study on the paper's models, and the summary also judges the paper's claims.
#
#   experiments/sensitivity.sh [--steps N] [--every N] [--probe-batch B] [--models "cnn resnet20 gpt-mini"]
#                              [--no-minibatch] [--ranks R] [--threads T] [--out runs/sensitivity] [--bin build/dreamddp]
#                              [--save FILE] [--lr-schedule cosine|const]
#
# Per model (defaults; --steps/--every/--probe-batch/--lr-schedule override all models): training steps x batch, probe every N
# steps (delays 1,2,4,8, so 6-8 probes), probe batch:
#   cnn       300 x 64 images, every 50, probe batch 256     resnet20  300 x 32 images, every 50, probe batch 128
#   gpt-mini  240 x 8 sequences of 128 bytes, every 30, probe batch 32 sequences
# The paper's models (Fashion-MNIST resized to 3 x 32 x 32; 1-5 minutes each on one core, 4 probes), trained with
# a constant learning rate after the default warm-up (--lr-schedule const; SGD momentum for the ResNets at
# lr 0.0125, the usual 0.1 per 256 images scaled to batch 32, AdamW at its default for the language models), and
# probed from step first=every/2 on:
# the claims are about early training, and in so short a run the cosine schedule would have decayed the learning
# rate toward zero by the last probes, while a probe at step 0 measures the freshly initialized network:
#   resnet18  320 x 32 images, every 80 from 40, probe batch 128    resnet50  240 x 32 images, every 60 from 30,
#             probe batch 64
#   gpt2      scaled to gpt2:layers=2,d=128,heads=4,vocab=50257,ctx=128 on text (AdamW): 80 x 8 sequences,
#             every 20 from 10, probe batch 16 sequences
#   llama     scaled to llama:layers=2,d=128,heads=4,ffn=512,vocab=32000,ctx=128 on text (AdamW), the same sizes
# plus cnn with probe=minibatch (the training minibatch's gradient at t0 vs t0+d: sampling noise included).
#
# Runs: OUT/<model>-fixed/ (and OUT/cnn-minibatch/), each with metrics.h5 (/sensitivity/cosine[probe, layer,
# delay]) and summary.json; the table is also written to OUT/summary.txt and OUT/sensitivity.json. An existing OUT is moved to
# OUT.<time> first (nothing is overwritten). Defaults fit two CPU cores (~20-25 min in all on a busy machine):
# one process with --threads 2 (--ranks R > 1: R ranks under `dreamddp launch`, cosine is then the mean over ranks).
# --save FILE also writes OUT/sensitivity.json's document to FILE (e.g. experiments/results/sensitivity_paper.json).
#
# The paper's claims (judged when a run of the model they name is present; the thresholds are the paper's):
#   (a) a conv block early in the network (the stem or a block of the first stage) stays above cosine 0.85 at
#       delay 8 (ResNet-50 in the paper; judged on each ResNet run);
#   (b) the last fully connected layer (fc) drops below 0.6 at delay 2;
#   (c) the embedding stays smooth for several steps (above 0.85 at delay 4) while the output head turns at
#       delay 1 (below 0.6); judged on a language model whose head is a layer of its own (llama); gpt2's head is
#       the token embedding (tied), so one cosine covers both and the claim is "not measurable here" on it.
# Cosines are means over probes (and ranks); a group's cosine is the unweighted mean of its layers'. The summary
# also keeps each group's lowest and highest cosine over the probes, and the claims' numbers at each probe.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" sensitivity.sh
prov_command -- "$@"
cd "$(dirname "$0")/.."

STEPS="" EVERY="" PROBE_BATCH="" SCHEDULE="" MODELS="cnn resnet20 gpt-mini"
MINIBATCH=1 RANKS=1 THREADS=2 OUT=runs/sensitivity BIN=${DREAMDDP_BIN:-build/dreamddp} PY=/usr/bin/python3 SAVE=""
while [ $# -gt 0 ]; do
  need_value --no-minibatch -h --help -- "$@"
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --probe-batch) PROBE_BATCH=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --no-minibatch) MINIBATCH=0; shift ;;
    --ranks) RANKS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --save) SAVE=$2; shift 2 ;;
    --lr-schedule) SCHEDULE=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_positive --optional --got --raw-name STEPS EVERY PROBE_BATCH RANKS THREADS
for m in $MODELS; do
  case $m in cnn|resnet20|gpt-mini|mlp|resnet18|resnet50|gpt2|llama) ;;
    *) die "--models: unknown model '$m' (cnn resnet20 gpt-mini mlp resnet18 resnet50 gpt2 llama)" ;; esac
done
case $SCHEDULE in ""|cosine|const) ;; *) die "--lr-schedule: cosine or const, got '$SCHEDULE'" ;; esac
need_bin "$BIN"
if [ -n "$SAVE" ] && [ -e "$SAVE" ]; then die "--save $SAVE exists (nothing is overwritten; move it away first)"; fi

if [ -e "$OUT" ]; then
  keep="$OUT.$(date +%Y%m%d-%H%M%S)"
  mv "$OUT" "$keep"
  echo "sensitivity.sh: moved the earlier $OUT to $keep"
fi
mkdir -p "$OUT"
prov_start
{
  echo "date: $(date -Is)"
  echo "host: $(hostname), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: tree at $(git rev-parse --short HEAD 2>/dev/null || echo unknown); binary $BIN built $(date -Is -r "$BIN")"
  echo "command: $0 $*"
} > "$OUT/run_log.txt"

# Per-model defaults: model spec, steps batch every probe-batch data eval-samples lr-schedule first-probe optimizer
# lr (- for the optimizer's default; evaluation only reports the final accuracy).
defaults() {
  case $1 in
    cnn|mlp) echo "$1 300 64 50 256 fashion-mnist 2000 cosine 0 sgd -" ;;
    resnet20) echo "resnet20 300 32 50 128 fashion-mnist 2000 cosine 0 sgd -" ;;
    gpt-mini) echo "gpt-mini 240 8 30 32 text 128 cosine 0 adamw -" ;;
    resnet18) echo "resnet18:image=32,classes=10 320 32 80 128 fashion-mnist 500 const half sgd 0.0125" ;;
    resnet50) echo "resnet50:image=32,classes=10 240 32 60 64 fashion-mnist 500 const half sgd 0.0125" ;;
    gpt2) echo "gpt2:layers=2,d=128,heads=4,vocab=50257,ctx=128 80 8 20 16 text 64 const half adamw -" ;;
    llama) echo "llama:layers=2,d=128,heads=4,ffn=512,vocab=32000,ctx=128 80 8 20 16 text 64 const half adamw -" ;;
  esac
}

# One training run with the probe on. $1 run name, $2 model, $3 probe kind (fixed|minibatch).
run() {
  local name=$1 model=$2 kind=$3 spec_model steps batch every pbatch data evals sched first opt lr
  read -r spec_model steps batch every pbatch data evals sched first opt lr <<< "$(defaults "$model")"
  local lr_args=()
  [ "$lr" = - ] || lr_args=(--lr "$lr")
  steps=${STEPS:-$steps} every=${EVERY:-$every} pbatch=${PROBE_BATCH:-$pbatch} sched=${SCHEDULE:-$sched}
  [ "$first" = half ] && first=$((every / 2))
  local spec="delays=1/2/4/8,every=$every"
  [ "$first" -gt 0 ] && spec+=",first=$first"
  if [ "$kind" = minibatch ]; then spec+=",probe=minibatch"; else spec+=",batch=$pbatch"; fi
  local args=(train --model "$spec_model" --data "$data" --steps "$steps" --batch "$batch" --policy ddp
              --optimizer "$opt" "${lr_args[@]}" --lr-schedule "$sched" --sensitivity "$spec" --eval-samples "$evals" --out "$OUT/$name" --log-every $((steps / 4))
              --threads "$THREADS")
  echo "== $name: $spec_model on $data, $steps steps x batch $batch, --sensitivity $spec (load $(cut -d' ' -f1 /proc/loadavg))"
  local t0=$SECONDS
  if [ "$RANKS" -gt 1 ]; then
    "$BIN" launch -n "$RANKS" -- "${args[@]}" > "$OUT/$name.log" 2>&1 || { tail -n 20 "$OUT/$name.log" >&2; die "$name failed"; }
  else
    "$BIN" "${args[@]}" > "$OUT/$name.log" 2>&1 || { tail -n 20 "$OUT/$name.log" >&2; die "$name failed"; }
  fi
  echo "   done in $((SECONDS - t0)) s"
  echo "$name: $((SECONDS - t0)) s, load after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/run_log.txt"
}

for m in $MODELS; do run "$m-fixed" "$m" fixed; done
if [ "$MINIBATCH" = 1 ]; then
  mb_model=cnn
  [[ " $MODELS " == *" cnn "* ]] || mb_model=${MODELS%% *}
  run "$mb_model-minibatch" "$mb_model" minibatch
fi

# Summary: mean cosine over probes per layer group at each delay; the most and least stale-tolerant groups.
$PY - "$OUT" "$SAVE" <<'PYEOF' | tee "$OUT/summary.txt"
import json, os, re, sys, warnings
import h5py, numpy as np
sys.path.insert(0, os.environ["PROV_LIB"])
sys.path.insert(0, os.path.join(os.environ["PROV_LIB"], "..", "..", "analysis"))
import provenance
from sensitivity_trained import early_blocks  # claim (a)'s candidates: the stem and each first-stage block

out = sys.argv[1]
save = sys.argv[2] if len(sys.argv) > 2 else ""
doc = {"study": "sensitivity", "runs": []}
fixed = {}    # model family -> (run, model spec, layer names, mean cosine [layer, delay], delays, cosine [probe,
              # layer, delay])

def family(model):
    """The model's family from its spec (resnet50:image=32,... -> resnet50)."""
    return model.split(":", 1)[0]

def group_of(model, name):
    """Layer name -> the row it is reported under: every layer of cnn/mlp; resnet20 per residual block
    (stem = conv1+bn1, stageS.B, fc); gpt-mini per block and kind (attn = qkv+proj, mlp = fc+proj, ln = ln1+ln2);
    resnet18/resnet50 per stage (stem = conv1+bn1, layer1..layer4, fc); gpt2 as token embedding (also the head:
    tied), position embedding, blocks and final norm; llama as embedding, blocks, final norm and head."""
    fam = family(model)
    if fam == "resnet20":
        m = re.match(r"(stage\d+\.\d+)\.", name)
        return m.group(1) if m else ("stem" if name in ("conv1", "bn1") else name)
    if fam in ("resnet18", "resnet50"):
        m = re.match(r"(layer\d+)\.", name)
        return m.group(1) if m else ("stem" if name in ("conv1", "bn1") else name)
    if fam == "gpt-mini":
        m = re.match(r"(blocks\.\d+)\.(attn|mlp|ln)", name)
        return f"{m.group(1)}.{m.group(2)}" if m else name
    if fam in ("gpt2", "llama"):
        if name == "wte":
            return "embedding (tied head)"
        if name == "wpe":
            return "position embedding"
        if name == "embed":
            return "embedding"
        if re.match(r"blocks\.\d+\.", name):
            return "blocks"
        return name
    return name

print(f"\nLayer sensitivity: cos(g_l(t0), g_l(t0+d)), mean over probes (and ranks); groups: unweighted mean of layers")
for run in sorted(os.listdir(out)):
    path = os.path.join(out, run, "metrics.h5")
    if not os.path.isfile(path):
        continue
    with h5py.File(path, "r") as f:
        model = f.attrs["model"]
        model = model.decode() if isinstance(model, bytes) else str(model)
        names = [n.decode() for n in f["layers"]["name"]]
        key = "sensitivity/cosine_minibatch" if "sensitivity/cosine_minibatch" in f else "sensitivity/cosine"
        variant = "_minibatch" if key.endswith("minibatch") else ""
        cos = f[key][:]
        delays = list(f["sensitivity/delays" + variant][:])
        probes = list(f["sensitivity/probe_steps" + variant][:])
        lr = f["steps"]["lr"][:] if "steps" in f else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(cos, axis=0)            # [layer, delay]
    groups = {}
    for i, n in enumerate(names):
        groups.setdefault(group_of(model, n), []).append(i)
    summ = json.load(open(os.path.join(out, run, "summary.json")))
    print(f"\n{run}: {model}, probe {'training minibatch' if variant else 'fixed batch'}, {len(probes)} probes at "
          f"steps {probes[0]}..{probes[-1]}, final loss {summ.get('final_loss', float('nan')):.3f}")
    hdr = "".join(f"{'d=' + str(d):>8}" for d in delays)
    print(f"  {'layer group':<28}{'layers':>7}{hdr}")
    rows, spread = [], {}
    for g, idx in groups.items():
        vals = [float(np.nanmean(mean[idx, j])) for j in range(len(delays))]
        rows.append((g, vals))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            pp = np.nanmean(cos[:, idx, :], axis=1)       # [probe, delay]: the group's cosine at each probe
            spread[g] = (np.nanmin(pp, axis=0), np.nanmax(pp, axis=0))
        print(f"  {g:<28}{len(idx):>7}" + "".join(f"{v:>8.3f}" for v in vals))
    if lr is not None and len(lr) > max(probes):   # the learning rate sets how far parameters move per step
        print(f"  {'per probe: step t0 (lr)':<35}" + "".join(f"{'d=' + str(d):>8}" for d in delays) + "   (mean of layers)")
        for p, row in zip(probes, cos):
            print(f"  {f't0={p} (lr {lr[p]:.4f})':<35}" + "".join(f"{float(np.nanmean(row[:, j])):>8.3f}" for j in range(len(delays))))
    j8 = len(delays) - 1
    ok = [r for r in rows if np.isfinite(r[1][j8])]
    if ok:
        lo, hi = min(ok, key=lambda r: r[1][j8]), max(ok, key=lambda r: r[1][j8])
        print(f"  most sensitive at d={delays[j8]}: {lo[0]} ({lo[1][j8]:.3f}); least: {hi[0]} ({hi[1][j8]:.3f})")
    if not variant:
        fixed[family(model)] = (run, model, names, mean, [int(d) for d in delays], cos)
    doc["runs"].append({"run": run, "model": model, "probe": "minibatch" if variant else "fixed",
                        "probe_steps": [int(p) for p in probes], "delays": [int(d) for d in delays],
                        "steps": summ.get("steps"), "batch": summ.get("batch"), "final_loss": summ.get("final_loss"),
                        "lr_at_probes": [float(lr[p]) for p in probes] if lr is not None and len(lr) > max(probes)
                                        else None,
                        "groups": [{"group": g, "layers": len(groups[g]),
                                    "mean_cosine": [v if np.isfinite(v) else None for v in vals],
                                    "min_cosine": [float(v) if np.isfinite(v) else None for v in spread[g][0]],
                                    "max_cosine": [float(v) if np.isfinite(v) else None for v in spread[g][1]]}
                                   for g, vals in rows]})

# The paper's claims, judged from the fixed-probe runs above (thresholds in the header of this script).
def cos_at(entry, idx, d):
    """Mean cosine of layers idx at delay d (None when d was not probed or never measured)."""
    run, model, names, mean, delays, _ = entry
    if d not in delays:
        return None
    v = float(np.nanmean(mean[idx, delays.index(d)])) if idx else float("nan")
    return v if np.isfinite(v) else None

def per_probe(entry, idx, d):
    """The same at each probe (the spread the mean hides)."""
    run, model, names, mean, delays, cos = entry
    if d not in delays or not idx:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        v = np.nanmean(cos[:, idx, delays.index(d)], axis=1)
    return [float(x) if np.isfinite(x) else None for x in v]

def verdict(ok):
    return "not measurable here" if ok is None else ("holds" if ok else "does not hold")

claims = []
resnets = [f for f in ("resnet50", "resnet18") if f in fixed]
for fam in resnets:
    e = fixed[fam]
    early = early_blocks(e[2])
    cands = {k: cos_at(e, idx, 8) for k, idx in early.items()}
    known = {k: v for k, v in cands.items() if v is not None}
    best = max(known, key=known.get) if known else None
    claims.append({"claim": "a", "model": e[1], "run": e[0],
                   "statement": "a conv block early in the network stays above cosine 0.85 at delay 8",
                   "threshold": 0.85, "delay": 8, "rests_on": {f"{k} at d=8": v for k, v in cands.items()},
                   "best": best, "value": known.get(best),
                   "per_probe": {f"{best} at d=8": per_probe(e, early[best], 8)} if best else {},
                   "verdict": verdict(None if best is None else known[best] > 0.85)})
    fc = [i for i, n in enumerate(e[2]) if n == "fc"]
    v = cos_at(e, fc, 2)
    claims.append({"claim": "b", "model": e[1], "run": e[0],
                   "statement": "the last fully connected layer drops below cosine 0.6 at delay 2",
                   "threshold": 0.6, "delay": 2, "rests_on": {"fc at d=2": v}, "value": v,
                   "per_probe": {"fc at d=2": per_probe(e, fc, 2)},
                   "verdict": verdict(None if v is None else v < 0.6)})
if not resnets:
    for c in ("a", "b"):
        claims.append({"claim": c, "model": None, "run": None, "rests_on": {}, "value": None,
                       "verdict": "not measurable here", "why": "no resnet18/resnet50 run"})
lms = [f for f in ("llama", "gpt2") if f in fixed]
for fam in lms:
    e = fixed[fam]
    emb = [i for i, n in enumerate(e[2]) if n in ("embed", "wte")]
    head = [i for i, n in enumerate(e[2]) if n == "head"]
    c = {"claim": "c", "model": e[1], "run": e[0],
         "statement": "the embedding stays smooth for several steps (above 0.85 at delay 4) while the output head "
                      "turns at delay 1 (below 0.6)", "value": None}
    if head:
        ve, vh = cos_at(e, emb, 4), cos_at(e, head, 1)
        c["rests_on"] = {"embedding at d=4": ve, "head at d=1": vh,
                         "embedding at d=1": cos_at(e, emb, 1), "head at d=4": cos_at(e, head, 4)}
        c["per_probe"] = {"embedding at d=4": per_probe(e, emb, 4), "head at d=1": per_probe(e, head, 1)}
        c["verdict"] = verdict(None if ve is None or vh is None else (ve > 0.85 and vh < 0.6))
    else:
        c["rests_on"] = {"embedding (tied head) at d=1": cos_at(e, emb, 1),
                         "embedding (tied head) at d=4": cos_at(e, emb, 4)}
        c["verdict"] = "not measurable here"
        c["why"] = "the head is the token embedding (tied): one gradient, one cosine for both"
    claims.append(c)
if not lms:
    claims.append({"claim": "c", "model": None, "run": None, "rests_on": {}, "value": None,
                   "verdict": "not measurable here", "why": "no gpt2 or llama run"})
doc["claims"] = claims
print("\nThe paper's claims:")
for c in claims:
    nums = ", ".join(f"{k} {'-' if v is None else f'{v:.3f}'}" for k, v in c["rests_on"].items())
    print(f"  ({c['claim']}) {c['model'] or '-'}: {c['verdict']}" + (f" ({nums})" if nums else f" ({c.get('why')})"))
# OUT/sensitivity.json: the table as JSON, with the provenance fields (experiments/lib/provenance.py).
provenance.stamp_from_env(doc)
provenance.write_json_atomic(os.path.join(out, "sensitivity.json"), doc)
if save:
    provenance.write_json_atomic(save, doc)
PYEOF

$PY analysis/make_figures.py "$OUT"
