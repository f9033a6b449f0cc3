#!/usr/bin/env bash
# tests/gpu/device_check.sh: one-shot check on a machine with an NVIDIA GPU: configure + build (Release, only the
# needed targets), `ctest -L gpu`, the NCCL one-rank smoke test, experiments/bench_gpu.sh, then a summary table.
#
#   tests/gpu/device_check.sh            (from anywhere; builds in <repo>/build-gpu)
#
# Every stage runs under `timeout`, and all of them together within DEVICE_CHECK_BUDGET_S (default 460 s, so the
# whole check ends in under 8 minutes on one H200 with 16 cores). Logs go to <build>/device-check/ (and to $OUT/
# device-check when $OUT is set, as on the device machine). Exit: 0 all passed, 1 a stage failed, 2 no GPU.
# A GPU test that SKIPS here counts as a failure: on a GPU machine a skip means nothing was checked. A missing
# PyTorch with CUDA only leaves the PyTorch column empty ("peer: torch with CUDA not available").
# Environment: BUILD_DIR, JOBS (default: all cores, at most 16), DEVICE_CHECK_BUDGET_S.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
budget=${DEVICE_CHECK_BUDGET_S:-460}
jobs=${JOBS:-$(nproc)}
(( jobs > 16 )) && jobs=16
logs=$build/device-check
t_start=$SECONDS

if ! gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null) ||
   [[ -z $gpu ]]; then
  echo "no GPU (nvidia-smi failed or lists no device)"
  exit 2
fi
gpu=$(head -n1 <<<"$gpu")
for tool in cmake ctest timeout; do
  command -v "$tool" >/dev/null || { echo "device_check: '$tool' not found on PATH"; exit 1; }
done
mkdir -p "$logs"
echo "device_check: GPU $gpu; repo $root; build $build; -j$jobs; budget ${budget}s"

declare -A result secs note
order=()
failed=0

# stage NAME CAP_S CMD...: runs CMD under timeout (CAP_S, cut to what is left of the budget), log in NAME.log.
stage() {
  local name=$1 cap=$2 left t0 rc
  shift 2
  order+=("$name")
  left=$(( budget - (SECONDS - t_start) ))
  (( left < cap )) && cap=$left
  if (( cap < 5 )); then
    result[$name]="SKIPPED"; secs[$name]=0; note[$name]="time budget spent"; failed=1
    return 124
  fi
  t0=$SECONDS
  timeout --kill-after=10 "$cap" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  secs[$name]=$(( SECONDS - t0 ))
  if (( rc == 0 )); then
    result[$name]=ok
  else
    result[$name]="FAIL"; failed=1
    (( rc == 124 || rc == 137 )) && note[$name]="timed out after ${cap}s" || note[$name]="exit $rc"
    echo "---- $name failed (${note[$name]}); last lines of $logs/$name.log:"
    tail -n 25 "$logs/$name.log"
    echo "----"
  fi
  echo "stage $name: ${result[$name]} (${secs[$name]} s)"
  return $rc
}

# ctest_counts LOG -> "P passed, F failed, S skipped" (from ctest's own lines)
ctest_counts() {
  local total fail skip
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$1" | tail -n1)
  fail=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$1" | tail -n1)
  skip=$(grep -c '\*\*\*Skipped' "$1")
  total=${total:-0} fail=${fail:-0}
  echo "$(( total - fail - skip )) passed, $fail failed, $skip skipped"
}

finish() {
  [[ -n ${OUT:-} && -d ${OUT:-} ]] && cp -r "$logs" "$OUT/" 2>/dev/null
  echo
  echo "== device check summary: $gpu =="
  printf '%-12s %-8s %6s  %s\n' stage result seconds notes
  for s in "${order[@]}"; do
    printf '%-12s %-8s %6s  %s\n' "$s" "${result[$s]}" "${secs[$s]}" "${note[$s]:-}"
  done
  if [[ -f $logs/bench.log ]]; then
    echo
    grep -E '^(model|mlp|gpt-mini) ' "$logs/bench.log"
    grep -m1 '^peer:' "$logs/bench.log"
  fi
  echo
  echo "total $(( SECONDS - t_start )) s; logs in $logs"
  if (( failed )); then echo "RESULT: FAIL"; exit 1; fi
  echo "RESULT: PASS"
  exit 0
}

# ---- configure ----
stage configure 90 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ||
  finish
grep -q 'nccl backend enabled' "$logs/configure.log" || note[configure]="nccl backend disabled"

# ---- build: only what the check runs ----
available=$(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\.\.\. \([A-Za-z0-9_.-]*\).*/\1/p')
wanted=(dreamddp bench_gpu_step test_backends_nccl
        $(sed -n 's/^[[:space:]]*add_executable(\([A-Za-z0-9_]*\).*/\1/p' "$here/CMakeLists.txt"))
targets=()
for t in "${wanted[@]}"; do
  if grep -qx "$t" <<<"$available"; then targets+=("$t"); else note[build]+="no target $t; "; fi
done
for must in bench_gpu_step test_models_gpu; do
  grep -qx "$must" <<<"$available" || { failed=1; note[build]+="required target $must missing; "; }
done
stage build 300 cmake --build "$build" -j "$jobs" --target "${targets[@]}" || finish

# ---- GPU tests ----
stage gpu_tests 120 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 100
note[gpu_tests]="$(ctest_counts "$logs/gpu_tests.log") ${note[gpu_tests]:-}"
if grep -q 'No tests were found' "$logs/gpu_tests.log"; then
  failed=1; result[gpu_tests]=FAIL; note[gpu_tests]+=" no gpu tests"
fi
# The new kernels and models (max-pool, the 7x7 stem conv, RMSNorm, RoPE, SwiGLU; resnet18/50, gpt2, llama) must
# be among the tests that passed (a stale build or a filtered list would drop them).
for t in CudaKernels.MaxPoolKMatchesCpuIncludingTiesAndPadding CudaKernels.Conv2dForwardBackwardMatchCpu \
         CudaKernels.RmsNormForwardBackwardMatchCpu CudaKernels.RopeForwardBackwardMatchCpu \
         CudaKernels.SwiGluForwardBackwardMatchCpu GpuModelTest.MatchesCpuStepAndUpdates/resnet18_sgd \
         GpuModelTest.MatchesCpuStepAndUpdates/resnet50_image_16_sgd 'GpuModelTest.MatchesCpuStepAndUpdates/gpt2' \
         'GpuModelTest.MatchesCpuStepAndUpdates/llama'; do
  grep -q "$t.* Passed" "$logs/gpu_tests.log" ||
    { failed=1; result[gpu_tests]=FAIL; note[gpu_tests]+=" $t did not pass"; }
done
if (( $(grep -c '\*\*\*Skipped' "$logs/gpu_tests.log") > 0 )); then
  failed=1; result[gpu_tests]=FAIL; note[gpu_tests]+=" (a skip on a GPU machine checks nothing)"
fi

# ---- NCCL one-rank smoke test (test_backends_nccl: Nccl.SingleRankCollectivesOnDevice) ----
nccl_tests=$(ctest --test-dir "$build" -N -R '^Nccl\.' 2>/dev/null)  # no `| grep -q`: SIGPIPE under pipefail
if grep -q 'Nccl\.SingleRankCollectivesOnDevice' <<<"$nccl_tests"; then
  stage nccl 60 ctest --test-dir "$build" -R '^Nccl\.' --output-on-failure --timeout 50
  note[nccl]="$(ctest_counts "$logs/nccl.log") ${note[nccl]:-}"
  grep -q 'SingleRankCollectivesOnDevice .*Passed' "$logs/nccl.log" ||
    { failed=1; result[nccl]=FAIL; note[nccl]+=" SingleRankCollectivesOnDevice did not pass"; }
else
  order+=(nccl); result[nccl]="n/a"; secs[nccl]=0; note[nccl]="no NCCL test built (nccl backend disabled?)"
fi

# ---- step time: ours vs PyTorch ----
stage bench 120 env BUILD_DIR="$build" bash "$root/experiments/bench_gpu.sh"

finish
