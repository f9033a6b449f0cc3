#!/usr/bin/env bash
# tests/gpu/device_check.sh: one-shot check on a machine with an NVIDIA GPU: configure + build (Release, only the
# needed targets), the GPU tests, the NCCL one-rank smoke test, experiments/bench_gpu.sh, then a summary table.
#
#   tests/gpu/device_check.sh                      (from anywhere; builds in <repo>/build-gpu)
#   tests/gpu/device_check.sh --prebuilt ARCHIVE   (no build: unpacks tests/gpu/pack_prebuilt.sh's archive into
#                                                   BUILD_DIR, default /tmp/dreamddp-prebuilt, and runs that)
#
# --prebuilt is for a GPU machine whose image has the driver, CUDA, cuBLAS, cuDNN and NCCL but not the project's
# build packages: the NVIDIA libraries are looked up there (ldconfig, /usr/local/cuda*, Python's nvidia packages).
#
# The bench stage writes its table as a results file too, <logs>/gpu_step.json (experiments/results/ takes it).
# Every stage runs under `timeout`, and all of them together within DEVICE_CHECK_BUDGET_S (default 460 s, so the
# whole check ends in under 8 minutes on one H200 with 16 cores). Logs go to <build>/device-check/ (and to $OUT/
# device-check when $OUT is set, as on the device machine). Exit: 0 all passed, 1 a stage failed, 2 no GPU.
# A GPU test that SKIPS here counts as a failure: on a GPU machine a skip means nothing was checked. A missing
# PyTorch with CUDA only leaves the PyTorch column empty ("peer: torch with CUDA not available").
# Environment: BUILD_DIR, JOBS (default: all cores, at most 16), DEVICE_CHECK_BUDGET_S.
set -uo pipefail

prebuilt=""
case ${1-} in
  --prebuilt) [[ -n ${2-} && -f ${2-} ]] || { echo "device_check: --prebuilt needs an archive file"; exit 2; }
              prebuilt=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") ;;
  -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  '') ;;
  *) echo "device_check: unknown option '$1' (usage: device_check.sh [--prebuilt ARCHIVE])"; exit 2 ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [[ -n $prebuilt ]]; then build=${BUILD_DIR:-/tmp/dreamddp-prebuilt}; else build=${BUILD_DIR:-$root/build-gpu}; fi
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
tools=(timeout ldd); [[ -n $prebuilt ]] || tools+=(cmake)
for tool in "${tools[@]}"; do
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

# gtest_counts LOG... -> "P passed, F failed, S skipped" (from googletest's own summary lines)
gtest_counts() {
  awk '/^\[  PASSED  \] [0-9]+ test/ {p += $4} /^\[  FAILED  \] [0-9]+ test/ {f += $4}
       /^\[  SKIPPED \] [0-9]+ test/ {s += $4} END {printf "%d passed, %d failed, %d skipped", p, f, s}' "$@"
}

# run_gtest NAME EXE CAP_S [ARGS...]: one test executable as a stage (googletest's own output in NAME.log).
run_gtest() {
  local name=$1 exe=$2 cap=$3
  shift 3
  if [[ ! -x $exe ]]; then
    order+=("$name"); result[$name]=FAIL; secs[$name]=0; note[$name]="no executable $exe"; failed=1
    return 1
  fi
  stage "$name" "$cap" "$exe" "$@"
  note[$name]="$(gtest_counts "$logs/$name.log") ${note[$name]:-}"
  if grep -q '^\[  SKIPPED \] [1-9]' "$logs/$name.log"; then
    failed=1; result[$name]=FAIL; note[$name]+=" (a skip on a GPU machine checks nothing)"
  fi
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
    grep -E '^(model|mlp|gpt-mini|cnn) ' "$logs/bench.log"
    grep -m1 '^peer:' "$logs/bench.log"
  fi
  echo
  echo "total $(( SECONDS - t_start )) s; logs in $logs"
  if (( failed )); then echo "RESULT: FAIL"; exit 1; fi
  echo "RESULT: PASS"
  exit 0
}

# ---- the executables (tests/gpu/executables.sh): built here, or unpacked from --prebuilt's archive ----
. "$here/executables.sh"
if [[ -n $prebuilt ]]; then
  rm -rf "$build/bin" "$build/lib"
  stage unpack 60 tar -C "$build" -xJf "$prebuilt" || finish
  note[unpack]="built at $(cat "$build/COMMIT" 2>/dev/null)"
  # A results file written here names the commit the executables were built from (not this copy's git state).
  PROV_COMMIT=$(cat "$build/COMMIT" 2>/dev/null) PROV_TREE_CLEAN=$(cat "$build/TREE_CLEAN" 2>/dev/null)
  export PROV_COMMIT PROV_TREE_CLEAN
  # The NVIDIA libraries: wherever this machine's image keeps them (the archive holds none of them).
  nvlibs=$(
    { ldconfig -p 2>/dev/null | awk '/lib(cublas|cudnn|nccl|cudart)\./ {print $NF}'
      find /usr/local/cuda* /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -maxdepth 8 \
           \( -name 'libcublas.so.*' -o -name 'libcudnn.so.*' -o -name 'libnccl.so.*' -o -name 'libcudart.so.*' \) \
           2>/dev/null
    } | xargs -r -n1 dirname | awk '!seen[$0]++' | paste -sd:)
  export LD_LIBRARY_PATH=$build/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  stage libs 30 bash -c 'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; bad=0
    for f in "$1"/bin/*; do if ldd "$f" | grep "not found"; then echo "  ^ $f"; bad=1; fi; done
    # cuBLAS is loaded on first use (dlopen), so ldd does not list it: look for it on the same path.
    IFS=: read -ra dirs <<< "$LD_LIBRARY_PATH"; found=0
    for d in "${dirs[@]}"; do compgen -G "$d/libcublas.so.[0-9]*" > /dev/null && found=1; done
    [ $found -eq 1 ] || { echo "libcublas.so.* is on no LD_LIBRARY_PATH folder"; bad=1; }
    exit $bad' _ "$build"
  exe() { echo "$build/bin/$1"; }
else
  stage configure 90 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ||
    finish
  grep -q 'nccl backend enabled' "$logs/configure.log" || note[configure]="nccl backend disabled"
  stage build 300 cmake --build "$build" -j "$jobs" --target "${!GPU_CHECK_EXES[@]}" || finish
  exe() { echo "$build/${GPU_CHECK_EXES[$1]}"; }
fi

# ---- GPU tests: googletest executables, run directly (a built tree and an archive alike) ----
run_gtest kernels "$(exe test_gpu_kernels)" 120
run_gtest models "$(exe test_models_gpu)" 150
run_gtest train "$(exe test_train_gpu)" 150
# The new kernels and models (max-pool, the 7x7 stem conv, RMSNorm, RoPE, SwiGLU; resnet18/50, gpt2, llama) must
# be among the tests that passed (a stale build or a filtered list would drop them).
for t in kernels:CudaKernels.MaxPoolKMatchesCpuIncludingTiesAndPadding \
         kernels:CudaKernels.Conv2dForwardBackwardMatchCpu \
         kernels:CudaKernels.RmsNormForwardBackwardMatchCpu kernels:CudaKernels.RopeForwardBackwardMatchCpu \
         kernels:CudaKernels.SwiGluForwardBackwardMatchCpu models:GpuModelTest.MatchesCpuStepAndUpdates/resnet18_sgd \
         models:GpuModelTest.MatchesCpuStepAndUpdates/resnet50_image_32_sgd \
         models:GpuModelTest.MatchesCpuStepAndUpdates/gpt2 models:GpuModelTest.MatchesCpuStepAndUpdates/llama \
         train:TrainGpu.NcclOneRankMatchesCpu train:TrainGpu.DreamddpHybridRanksAgree \
         kernels:CudaArena.Dot3MatchesCpuWithinSummationBound train:TrainGpu.SensitivityProbeMatchesCpu \
         train:TrainGpu.AnomalyGuardOnTheDevice train:Signals/SignalPolicy.RanksAgreeOnTheGpu/threshold \
         train:Merges/HybridPolicy.TwoRanksGlooMatchCpu/delay0 train:Merges/HybridPolicy.TwoRanksGlooMatchCpu/outer1; do
  s=${t%%:*} name=${t#*:}
  grep -qF -- "[       OK ] " <(grep -F -- "$name" "$logs/$s.log" 2>/dev/null) ||
    { failed=1; result[$s]=FAIL; note[$s]+=" $name did not pass"; }
done

# ---- NCCL one-rank smoke test (Nccl.SingleRankCollectivesOnDevice) ----
# Nccl.NoGpuIsAUsageError checks the refusal where no GPU exists, and skips here.
run_gtest nccl "$(exe test_backends_nccl)" 60 --gtest_filter='Nccl.*:-Nccl.NoGpuIsAUsageError'
grep -q '^\[       OK \] Nccl\.SingleRankCollectivesOnDevice' "$logs/nccl.log" 2>/dev/null ||
  { failed=1; result[nccl]=FAIL; note[nccl]+=" SingleRankCollectivesOnDevice did not pass"; }

# ---- the instruments on the GPU: a sensitivity run (cosines against delay into metrics.h5, read back with h5py
# where it exists) and a shrink: rank 2 of 4 killed mid-run, the survivors finish on the device ----
stage sensitivity 60 bash -c '"$1" train --device cuda --model resnet20 --data synthetic --batch 64 --steps 60 \
  --threads 2 --sensitivity delays=1/2/4,every=20,batch=256 --eval-every 0 --out "$2/sens-run" --log-every 20 &&
  { ! python3 -c "import h5py" 2>/dev/null ||
    python3 -c "import h5py, numpy as np, sys; c = h5py.File(sys.argv[1])[\"sensitivity/cosine\"][:];
print(\"cosine [probe, layer, delay]\", c.shape, \"mean by delay\", np.nanmean(c, axis=(0, 1)));
assert np.all(np.isfinite(c)) and np.all(np.abs(c) <= 1 + 1e-6)" "$2/sens-run/metrics.h5"; }' \
  _ "$(exe dreamddp)" "$logs"
rm -rf "$logs/sens-run"
stage shrink 90 bash "$root/tests/elastic/shrink_kill9.sh" "$(exe dreamddp)" localsgd:k=4 hand cuda

# ---- step time: ours vs PyTorch (the peer runs under the first python3 that imports torch) ----
peer_py=/usr/bin/python3
for py in /usr/bin/python3 "$(command -v python3)"; do
  [[ -x $py ]] && "$py" -c 'import torch' 2>/dev/null && { peer_py=$py; break; }
done
rm -f "$logs/gpu_step.json"
stage bench 150 env BENCH_GPU_BIN="$(exe bench_gpu_step)" PEER_PYTHON="$peer_py" PROV_PYTHON="$peer_py" \
  bash "$root/experiments/bench_gpu.sh" --json "$logs/gpu_step.json" mlp gpt-mini cnn

finish
