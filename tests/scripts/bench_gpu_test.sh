#!/usr/bin/env bash
# experiments/bench_gpu.sh without a GPU: a stand-in bench_gpu_step and a stand-in PyTorch peer (each logs its
# calls and answers with times that change per call) check that the rounds alternate (ours for every model, then
# the peer), that each side's time is the median round, that --json writes a results file with provenance and
# both GEMM rates and refuses an existing one, and that a peer without CUDA leaves the ratios empty.
# Usage: bench_gpu_test.sh REPO
set -u
repo=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
check() { if eval "$2"; then :; else echo "FAIL: $1"; fail=1; fi; }

# Ours: round k answers median_ms = 10 + k for mlp, 20 + k for cnn (k = 1, 2, 3 in call order per model).
cat > "$t/ours" <<'OURS'
#!/usr/bin/env bash
m=$2
echo "ours $m" >> "$LOG"
n=$(grep -c "^ours $m\$" "$LOG")
base=10; [[ $m == cnn ]] && base=20
echo "# stand-in for bench_gpu_step"
echo "{\"bench\": \"gpu_step\", \"model\": \"$m\", \"median_ms\": $((base + (n == 2 ? 5 : n))), \"gemm_gflops\": 100.0}"
OURS
# The peer: round k answers 40 + k for mlp and 60 + k for cnn; PEER_FAIL=1 answers as a peer without CUDA.
cat > "$t/peer" <<'PEER'
echo "peer $*" >> "$LOG"
if [[ ${PEER_FAIL:-0} == 1 ]]; then echo "peer: torch with CUDA not available" >&2; exit 3; fi
n=$(grep -c '^peer' "$LOG")
echo "# stand-in peer"
echo "{\"peer\": \"torch-9.9\", \"blas\": \"cuBLAS (stand-in)\", \"gemm_gflops\": 90.0, \"threads\": null, \"results\": [{\"model\": \"mlp\", \"median_ms\": $((40 + n))}, {\"model\": \"cnn\", \"median_ms\": $((60 + n))}]}"
PEER
chmod +x "$t/ours"
run() { env LOG="$t/log" BENCH_GPU_BIN="$t/ours" PEER_GPU_STEP="$t/peer" PEER_PYTHON=/bin/bash REPEATS=3 "$@"; }

out=$(run bash "$repo/experiments/bench_gpu.sh" --json "$t/r.json" mlp cnn 2>&1); rc=$?
check "exit 0 (got $rc): $out" '[[ $rc == 0 ]]'
order=$(cut -d' ' -f1-2 "$t/log" | paste -sd,)
check "rounds alternate: $order" '[[ $order == "ours mlp,ours cnn,peer --models,ours mlp,ours cnn,peer --models,ours mlp,ours cnn,peer --models" ]]'
# Ours: mlp rounds 11, 15, 13 -> median 13; cnn 21, 25, 23 -> 23. Peer: mlp 41..43 -> 42, cnn 61..63 -> 62.
check "medians in the table: $out" 'grep -qE "^mlp +64 +13 +42 +0.310" <<<"$out" && grep -qE "^cnn +64 +23 +62 +0.371" <<<"$out"'
check "results file" '[[ -f $t/r.json ]]'
py=$(/usr/bin/python3 - "$t/r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = (d["repeats"] == 3 and d["ours_gemm_gflops"] == 100.0 and d["peer_gemm_gflops"] == 90.0
      and d["results"][0]["ours_ms_runs"] == [11, 15, 13] and d["results"][1]["pytorch_ms_runs"] == [61, 62, 63]
      and d["peer"]["gemm_gflops"] == 90.0 and d["peer"]["torch"] == "9.9" and "REPEATS=3" in d["command"]
      and all(d["machine"].get(k) is not None for k in ("date", "cpu", "cores", "load_1m", "load_1m_end", "commit")))
print("ok" if ok else json.dumps(d))
PY
)
check "results file fields: $py" '[[ $py == ok ]]'
: > "$t/log"
out=$(run bash "$repo/experiments/bench_gpu.sh" --json "$t/r.json" mlp 2>&1); rc=$?
check "an existing --json file is refused with exit 2 (got $rc)" '[[ $rc == 2 && ! -s $t/log ]]'

: > "$t/log"
out=$(run PEER_FAIL=1 bash "$repo/experiments/bench_gpu.sh" mlp 2>&1); rc=$?
check "no peer: exit 0, ratio n/a, one peer attempt (got $rc): $out" \
  '[[ $rc == 0 ]] && grep -qE "^mlp +64 +13 +n/a +n/a" <<<"$out" && [[ $(grep -c ^peer "$t/log") == 1 ]]'

[[ $fail == 0 ]] && echo "bench_gpu.sh: rounds alternate, medians per side, results file with provenance, no peer"
exit $fail
