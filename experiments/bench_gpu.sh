#!/usr/bin/env bash
# experiments/bench_gpu.sh: GPU step time (forward + backward + SGD update, batch 64) of our GpuModel
# (bench_gpu_step) against PyTorch on the same GPU (experiments/peer_gpu_step.py), for mlp and gpt-mini.
#
#   experiments/bench_gpu.sh [--json FILE] [mlp gpt-mini cnn]     (default: mlp gpt-mini)
#
# --json FILE: also write the table as a results file (GPU, driver, both GEMM rates, command, machine, commit;
# an existing FILE is refused).
#
# Both sides: one fixed synthetic batch, the loss returned to the host every step, CUDA-event timing,
# WARMUP warm-up steps then the median of ITERS steps; REPEATS (3) alternating rounds of ours then the peer, and
# the median round per side. Prints a table with ours/PyTorch (target <= 1.5)
# and, last, one JSON line. Environment: BENCH_GPU_BIN (default <repo>/build/core/models/cuda/bench_gpu_step,
# or BUILD_DIR/core/models/cuda/bench_gpu_step), BATCH (64), WARMUP (10), ITERS (50), BENCH_STRICT=1 (exit 1
# when a ratio misses the target), PEER_GPU_STEP (the peer script), PEER_PYTHON (the interpreter with PyTorch,
# default /usr/bin/python3). Exit 2 when our side cannot run (no binary,
# no GPU); a missing PyTorch with CUDA is reported ("peer: torch with CUDA not available") and leaves the
# ratio n/a, not a failure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" bench_gpu
prov_command BATCH WARMUP ITERS REPEATS -- "$@"
json=""
models=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage_from_header; exit 0 ;;
    --json) [[ -n ${2-} ]] || die "--json needs a file"; json=$2; shift 2 ;;
    -*) die "unknown option '$1'" ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ -z $json || ! -e $json ]] || die "--json $json exists (results are never overwritten)"
[[ ${#models[@]} -gt 0 ]] || models=(mlp gpt-mini)
for m in "${models[@]}"; do
  [[ $m == mlp || $m == cnn || $m == gpt-mini ]] ||
    die "model '$m': the PyTorch peer has mlp, cnn and gpt-mini (bench_gpu_step --model resnet20 times ours alone)"
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bin=${BENCH_GPU_BIN:-${BUILD_DIR:-$root/build}/core/models/cuda/bench_gpu_step}
batch=${BATCH:-64}
warmup=${WARMUP:-10}
iters=${ITERS:-50}
repeats=${REPEATS:-3}
peer_script=${PEER_GPU_STEP:-$here/peer_gpu_step.py}
target=1.5
[[ -x $bin ]] || die "no bench_gpu_step at $bin (build target bench_gpu_step, or set BENCH_GPU_BIN)"
for v in "$batch" "$iters" "$warmup" "$repeats"; do
  [[ $v =~ ^[0-9]+$ ]] || die "BATCH, WARMUP, ITERS, REPEATS must be integers"
done
(( repeats >= 1 && repeats <= 20 )) || die "REPEATS must be 1..20"


json_field() {  # json_field KEY LINE -> numeric value of "KEY": N in LINE
  sed -n "s/.*\"$1\": *\([0-9.eE+-]*\).*/\1/p" <<<"$2" | head -n1
}

# REPEATS rounds, alternating: ours for every model, then the peer for every model; each side's time per model
# is the median over the rounds (the middle one; the lower middle for an even count).
median() { tr ' ' '\n' <<<"$1" | sort -g | awk 'NF { v[++n] = $1 } END { if (n) print v[int((n + 1) / 2)] }'; }
[[ -z $json ]] || prov_start
declare -A ours_runs peer_runs
ours_gemm="" peer_note="" peer_line=""
for ((rep = 1; rep <= repeats; rep++)); do
  for m in "${models[@]}"; do
    out=$("$bin" --model "$m" --batch "$batch" --warmup "$warmup" --iters "$iters") ||
      die "bench_gpu_step failed for $m"
    grep '^#' <<<"$out" || true
    ours_runs[$m]+="$(json_field median_ms "$(tail -n1 <<<"$out")") "
    ours_gemm=$(json_field gemm_gflops "$(tail -n1 <<<"$out")")
  done
  [[ -z $peer_note ]] || continue
  if peer_out=$("${PEER_PYTHON:-/usr/bin/python3}" "$peer_script" --models "${models[@]}" --batch "$batch" \
                  --warmup "$warmup" --iters "$iters" 2>&1); then
    grep '^#' <<<"$peer_out" || true
    peer_line=$(tail -n1 <<<"$peer_out")
    for m in "${models[@]}"; do
      peer_runs[$m]+="$(sed -n "s/.*\"model\": \"$m\", [^}]*\"median_ms\": \([0-9.]*\).*/\1/p" <<<"$peer_line") "
    done
  else
    peer_note=$(grep -m1 '^peer:' <<<"$peer_out" || tail -n1 <<<"$peer_out")
    [[ -n $peer_note ]] || peer_note="peer: PyTorch run failed"
    echo "$peer_note"
    peer_runs=()
  fi
done
declare -A ours peer
for m in "${models[@]}"; do
  ours[$m]=$(median "${ours_runs[$m]}")
  peer[$m]=$(median "${peer_runs[$m]:-}")
done
as_list() { local v; v=$(echo $1); echo "[${v// /, }]"; }

printf '%-10s %6s %10s %12s %8s %8s\n' model batch ours_ms pytorch_ms ratio target
missed=0
rows=()
for m in "${models[@]}"; do
  o=${ours[$m]}
  p=${peer[$m]:-}
  if [[ -n $p ]]; then
    r=$(awk -v o="$o" -v p="$p" 'BEGIN { printf "%.3f", o / p }')
    ok=$(awk -v r="$r" -v t="$target" 'BEGIN { print (r <= t) ? "ok" : "MISS" }')
    [[ $ok == ok ]] || missed=1
    rows+=("{\"model\": \"$m\", \"ours_ms\": $o, \"pytorch_ms\": $p, \"ratio\": $r, \"ours_ms_runs\": $(as_list \
           "${ours_runs[$m]}"), \"pytorch_ms_runs\": $(as_list "${peer_runs[$m]}")}")
  else
    p=n/a r=n/a ok=""
    rows+=("{\"model\": \"$m\", \"ours_ms\": $o, \"pytorch_ms\": null, \"ratio\": null, \"ours_ms_runs\": $(as_list \
           "${ours_runs[$m]}")}")
  fi
  printf '%-10s %6s %10s %12s %8s %8s %s\n' "$m" "$batch" "$o" "$p" "$r" "<=$target" "$ok"
done
joined=$(IFS=,; echo "${rows[*]}")
peer_ok=$([[ -z $peer_note ]] && echo true || echo false)
echo "{\"bench\": \"gpu_step\", \"batch\": $batch, \"target_ratio\": $target, \"peer_available\": $peer_ok," \
     "\"results\": [${joined//,\{/, \{}]}"
if [[ -n $json ]]; then
  gpu_info=$({ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true; } |
             head -n1)
  [[ -z $peer_note ]] || peer_line=""
  printf '{"bench": "gpu_step", "gpu": "%s", "batch": %s, "warmup": %s, "iters": %s, "repeats": %s, '\
'"target_ratio": %s, "ours_gemm_gflops": %s, "peer_gemm_gflops": %s, "results": [%s]}\n' \
    "$gpu_info" "$batch" "$warmup" "$iters" "$repeats" "$target" "${ours_gemm:-null}" \
    "$(json_field gemm_gflops "$peer_line" | grep . || echo null)" "$joined" > "$json"
  prov_stamp "$json" "$peer_line" experiments/peer_gpu_step.py
  echo "results: $json"
fi
[[ ${BENCH_STRICT:-0} == 1 && $missed == 1 ]] && exit 1
exit 0
