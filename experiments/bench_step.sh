#!/usr/bin/env bash
# experiments/bench_step.sh: single-process step time of `dreamddp train` against the PyTorch peer
# (shared/peers/torch_ddp.py) on the same model, batch and thread count, alternated in one sitting.
#
#   experiments/bench_step.sh [mlp cnn resnet20 gpt-mini]
#
# Per model: ours = `dreamddp train --data synthetic --threads 1` (summary.json step_ms, timed after its
# warm-up steps); peer = torch_ddp.py with WORLD_SIZE=1 RANK=0 THREADS=1 (its step_ms, after --warmup steps).
# Runs alternate ours/peer/ours/peer (REPS repetitions each, default 2) and the best (lowest) of each is
# compared, which damps the noise of a shared machine. Prints a table and, last, one JSON line.
# Targets: ours/peer <= 1.3 for mlp and gpt-mini, <= 2.0 for cnn and resnet20.
# Environment: DREAMDDP_BIN (default <repo>/build/dreamddp), TORCH_PEER (default: shared/peers/torch_ddp.py
# beside or above the repository), REPS, BENCH_STRICT=1 (exit 1 when a target is missed).
# OPENBLAS_CORETYPE and the BLAS that PyTorch loads are left as the environment has them (both are reported).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" bench_step

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
py=/usr/bin/python3
bin=${DREAMDDP_BIN:-$root/build/dreamddp}
reps=${REPS:-2}

peer=${TORCH_PEER:-}
if [[ -z $peer ]]; then
  for c in "$root/shared/peers/torch_ddp.py" "$root/../shared/peers/torch_ddp.py"; do
    [[ -f $c ]] && { peer=$(cd "$(dirname "$c")" && pwd)/$(basename "$c"); break; }
  done
fi
need_bin "$bin" "build it, or set DREAMDDP_BIN"
[[ -n $peer && -f $peer ]] || die "PyTorch peer torch_ddp.py not found (looked in $root/shared/peers and $root/../shared/peers; set TORCH_PEER)"
$py -c 'import torch' 2>/dev/null || die "python3-torch is not installed (make deps-peer)"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "REPS must be a positive integer, got '$reps'"

models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(mlp cnn resnet20 gpt-mini)

# Per model: per-rank batch, our steps (the trainer times steps after min(5, steps/10) warm-up steps),
# peer timed steps (after 2 warm-up steps; fewer for gpt-mini, whose PyTorch step can take seconds), target.
declare -A batch=([mlp]=64 [cnn]=64 [resnet20]=64 [gpt-mini]=8)
declare -A ours_steps=([mlp]=60 [cnn]=30 [resnet20]=30 [gpt-mini]=25)
declare -A peer_steps=([mlp]=30 [cnn]=15 [resnet20]=15 [gpt-mini]=8)
declare -A target=([mlp]=1.3 [cnn]=2.0 [resnet20]=2.0 [gpt-mini]=1.3)
for m in "${models[@]}"; do
  [[ -n ${batch[$m]:-} ]] || die "unknown model '$m' (expected mlp, cnn, resnet20 or gpt-mini)"
done

work=$(mktemp -d /tmp/dd-bench-step-XXXXXX)
trap 'rm -rf "$work"' EXIT

# Which BLAS PyTorch's GEMMs go through decides the peer's speed; say it, since Debian's default is the
# unoptimized netlib reference libblas3 unless libopenblas0 (or another provider) is installed.
peer_blas=$($py - <<'EOF'
import torch, re
libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if re.search(r'(blas|blis|mkl_rt)', l)})
print(', '.join(libs) or 'none found')
EOF
)
echo "# bench_step: $(nproc) CPU(s), load average $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
echo "# ours: $bin   peer: $peer (torch $($py -c 'import torch; print(torch.__version__)'))"
echo "# peer BLAS: $peer_blas"
if [[ $peer_blas == *"/blas/libblas.so"* ]]; then
  echo "# warning: PyTorch uses the netlib reference BLAS here; its GEMMs are unoptimized, so ratios flatter us"
fi
echo "# batch per model: mlp/cnn/resnet20 64, gpt-mini 8; 1 thread; best of $reps alternating repetitions"

# ours_run MODEL REP: prints "step_ms fwd_ms bwd_ms upd_ms" (the breakdown: means of metrics.h5 /steps after
# the warm-up steps, as the trainer counts them).
ours_run() {
  local m=$1 out=$work/ours-$1-$2
  "$bin" train --model "$m" --data synthetic --batch "${batch[$m]}" --threads 1 --steps "${ours_steps[$m]}" \
    --eval-samples 16 --log-every 1000000 --out "$out" >"$out.log" 2>&1 || {
    echo "bench_step: dreamddp train --model $m failed:" >&2; tail -5 "$out.log" >&2; exit 1; }
  $py - "$out" <<'EOF'
import h5py, json, sys
d = sys.argv[1]
s = json.load(open(d + '/summary.json'))
st = h5py.File(d + '/metrics.h5', 'r')['/steps'][:]
warm = min(5, len(st) // 10)
mean = lambda c: float(st[c][warm:].mean())
print('%.3f %.3f %.3f %.3f' % (s['step_ms'], mean('forward_ms'), mean('backward_ms'), mean('update_ms')))
EOF
}

# peer_run MODEL REP: prints step_ms of the PyTorch peer.
peer_run() {
  local m=$1 log=$work/peer-$1-$2.log
  WORLD_SIZE=1 RANK=0 THREADS=1 $py "$peer" --model "$m" --batch "${batch[$m]}" --steps "${peer_steps[$m]}" \
    --warmup 2 --store "$work/store-$m-$2" >"$log" 2>&1 || {
    echo "bench_step: torch_ddp.py --model $m failed:" >&2; tail -5 "$log" >&2; exit 1; }
  $py -c 'import json, sys; print("%.3f" % json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["step_ms"])' "$log"
}

lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }  # floating-point a < b

rows=()
printf '%-9s %11s %11s %7s %7s %7s   %s\n' model "ours ms" "torch ms" ratio target verdict "ours fwd/bwd/upd ms"
for m in "${models[@]}"; do
  best_ours="" best_peer="" breakdown="" all_ours=() all_peer=()
  for ((r = 1; r <= reps; ++r)); do
    res=$(ours_run "$m" "$r")
    read -r o f b u <<<"$res"
    p=$(peer_run "$m" "$r")
    all_ours+=("$o") all_peer+=("$p")
    if [[ -z $best_ours ]] || lt "$o" "$best_ours"; then best_ours=$o breakdown="$f/$b/$u"; fi
    if [[ -z $best_peer ]] || lt "$p" "$best_peer"; then best_peer=$p; fi
  done
  ratio=$(awk -v a="$best_ours" -v b="$best_peer" 'BEGIN { printf "%.3f", a / b }')
  verdict=PASS
  lt "${target[$m]}" "$ratio" && verdict=FAIL
  printf '%-9s %11.2f %11.2f %7.2f %7s %7s   %s\n' "$m" "$best_ours" "$best_peer" "$ratio" "<=${target[$m]}" \
    "$verdict" "$breakdown"
  rows+=("$m ${batch[$m]} $best_ours $best_peer $ratio ${target[$m]} $verdict $breakdown $(IFS=,; echo "${all_ours[*]},${all_peer[*]}")")
done

summary=$(printf '%s\n' "${rows[@]}" | $py -c '
import json, sys
res = []
for line in sys.stdin:
    m, b, o, p, r, t, v, br, runs = line.split()
    runs = [float(x) for x in runs.split(",")]
    ao, ap = runs[:len(runs) // 2], runs[len(runs) // 2:]
    f, bw, u = (float(x) for x in br.split("/"))
    res.append({"model": m, "batch": int(b), "ours_step_ms": float(o), "torch_step_ms": float(p),
                "ratio": float(r), "target": float(t), "pass": v == "PASS",
                "ours_breakdown_ms": {"forward": f, "backward": bw, "update": u},
                "ours_runs_ms": ao, "torch_runs_ms": ap})
print(json.dumps({"bench": "step_time", "threads": 1, "world": 1, "reps": int(sys.argv[1]),
                  "peer_blas": sys.argv[2], "results": res, "pass": all(r["pass"] for r in res)}))
' "$reps" "$peer_blas")
echo "$summary"
if [[ ${BENCH_STRICT:-0} == 1 ]] && [[ $summary == *'"pass": false'* ]]; then exit 1; fi
exit 0
