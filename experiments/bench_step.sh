#!/usr/bin/env bash
# experiments/bench_step.sh: single-process step time of `dreamddp train` against the PyTorch peer
# (peers/torch_ddp.py) on the same model, batch and thread count, alternated in one run.
#
#   experiments/bench_step.sh [mlp cnn resnet20 gpt-mini resnet18 resnet50 gpt2 llama]
#
# resnet18:stem=cifar and resnet50:stem=cifar (the CIFAR stem, docs/models.md) are taken too, with their
# family's batch and steps.
# Per model: ours = `dreamddp train --data synthetic --threads 1` (summary.json step_ms, timed after its
# warm-up steps); peer = torch_ddp.py with WORLD_SIZE=1 RANK=0 THREADS=1 (its step_ms, after --warmup steps).
# Runs alternate ours/peer/ours/peer (REPS repetitions each, default 2) and the best (lowest) of each is
# compared, which damps the noise of a shared machine. Prints a table and, last, one JSON line.
# Target: ours/peer <= 1.0 for every model.
# The peer must run at its best (experiments/lib/peer_rules.py): our GEMM rate (`dreamddp bench gemm`, the peer's
# shape and thread count) is measured at the start and the end of the run; a peer whose own `gemm_gflops` is
# below 0.7x ours, above 1.5x ours (more cores than it was given), that runs on netlib's BLAS, or that refuses to
# run gets no ratio ("misconfigured"), and a model
# measured while the load average exceeded the core count is marked noisy.
# Environment: DREAMDDP_BIN (default <repo>/build/dreamddp), PEER_PYTHON (the peer's interpreter; default the
# project's .venv-peer from `make deps-peer`, else Debian's /usr/bin/python3, said on stderr), DREAMDDP_PEER (another peer file with the same
# options and JSON line; default <repo>/peers/torch_ddp.py; TORCH_PEER is read too), REPS, THREADS (per process, both systems; default 1), SAVE=FILE (also write the
# JSON with the run's machine block and command there), BENCH_STRICT=1 (exit 1 when a target is missed or no
# ratio could be given). OPENBLAS_CORETYPE and the BLAS PyTorch loads are left as the environment has them (the
# peer drops OPENBLAS_CORETYPE itself when its GEMM is correct without it; both are reported).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" bench_step
prov_command REPS THREADS PEER_PYTHON DREAMDDP_PEER TORCH_PEER -- "$@"
case ${1-} in -h|--help) usage_from_header; exit 0 ;; esac
for m in "$@"; do  # the arguments first: a mistyped model is named whatever else is missing
  case $m in mlp|cnn|resnet20|gpt-mini|resnet18|resnet50|gpt2|llama|resnet18:stem=cifar|resnet50:stem=cifar) ;;
    *) die "unknown model '$m' (expected mlp, cnn, resnet20, gpt-mini, resnet18, resnet50, gpt2, llama or RESNET:stem=cifar)" ;; esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
py=/usr/bin/python3
bin=${DREAMDDP_BIN:-$root/build/dreamddp}
reps=${REPS:-2}
threads=${THREADS:-1}

peer=${DREAMDDP_PEER:-${TORCH_PEER:-$root/peers/torch_ddp.py}}
need_bin "$bin" "build it, or set DREAMDDP_BIN"
[[ -n $peer && -f $peer ]] || die "PyTorch peer not found at $peer (set DREAMDDP_PEER)"
peer=$(cd "$(dirname "$peer")" && pwd)/$(basename "$peer")
peer_python_init
"$PEER_PY" -c 'import torch' 2>/dev/null || die "$PEER_PY has no torch (make deps-peer)"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "REPS must be a positive integer, got '$reps'"
[[ $threads =~ ^[1-9][0-9]?$ ]] || die "THREADS must be an integer in 1..99, got '$threads'"

models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(mlp cnn resnet20 gpt-mini)

# Per model: per-rank batch, our steps (the trainer times steps after min(5, steps/10) warm-up steps),
# peer timed steps (after 2 warm-up steps; fewer for gpt-mini, whose PyTorch step can take seconds), target.
# resnet18/50 and gpt2/llama (the presets, not in the default list): resnet at batch 32 of 3x32x32 images;
# gpt2/llama one 128-token sequence per step, AdamW on both sides.
declare -A batch=([mlp]=64 [cnn]=64 [resnet20]=64 [gpt-mini]=8 [resnet18]=32 [resnet50]=32 [gpt2]=1 [llama]=1)
declare -A ours_steps=([mlp]=60 [cnn]=30 [resnet20]=30 [gpt-mini]=25 [resnet18]=12 [resnet50]=12 [gpt2]=12 [llama]=12)
declare -A peer_steps=([mlp]=30 [cnn]=15 [resnet20]=15 [gpt-mini]=8 [resnet18]=6 [resnet50]=6 [gpt2]=4 [llama]=4)
declare -A target=([mlp]=1.0 [cnn]=1.0 [resnet20]=1.0 [gpt-mini]=1.0 [resnet18]=1.0 [resnet50]=1.0 [gpt2]=1.0 [llama]=1.0)
declare -A peer_opt=([gpt2]=adamw [llama]=adamw)

prov_start
work=$(mktemp -d /tmp/dd-bench-step-XXXXXX)
trap 'rm -rf "$work"' EXIT

gemm() { $py -c 'import sys; sys.path.insert(0, sys.argv[1]); import peer_rules; print(peer_rules.our_gemm_gflops(sys.argv[2], int(sys.argv[3])))' "$here/lib" "$bin" "$threads"; }
echo "# bench_step: $(nproc) CPU(s), load average $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
echo "# ours: $bin   peer: $peer (torch $("$PEER_PY" -c 'import torch; print(torch.__version__)'), $PEER_PY)"
gemm_start=$(gemm)
echo "# our GEMM 64x1024.1024x1024 with $threads thread(s): $gemm_start GFLOP/s (start of the run)"
echo "# batch per model: mlp/cnn/resnet20 64, gpt-mini 8, resnet18/resnet50 32 (3x32x32), gpt2/llama 1;" \
  "$threads thread(s); best of $reps alternating repetitions"

# ours_run MODEL REP: prints "step_ms fwd_ms bwd_ms upd_ms" (the breakdown: means of metrics.h5 /steps after
# the warm-up steps, as the trainer counts them).
ours_run() {
  local m=$1 f=${1%%:*} out=$work/ours-${1//[:=]/_}-$2
  "$bin" train --model "$m" --data synthetic --batch "${batch[$f]}" --threads "$threads" --steps "${ours_steps[$f]}" \
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

# peer_once MODEL REP OPENBLAS_THREADS: the peer's JSON line, or {"refused": LAST LOG LINE} when it would not run.
# OpenBLAS keeps its own thread pool beside torch's: without OPENBLAS_NUM_THREADS the "1-thread" peer's GEMMs ran
# on every core (its gemm_gflops read 179 at THREADS=1, the same as at THREADS=2).
peer_once() {
  local m=$1 f=${1%%:*} log=$work/peer-${1//[:=]/_}-$2-ob$3.log
  if ! WORLD_SIZE=1 RANK=0 THREADS=$threads OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$3 \
    "$PEER_PY" "$peer" --model "$m" --batch "${batch[$f]}" --steps "${peer_steps[$f]}" \
    --optimizer "${peer_opt[$f]:-sgd}" \
    --warmup 2 --store "$work/store-${m//[:=]/_}-$2-$3" >"$log" 2>&1; then
    echo "bench_step: torch_ddp.py --model $m did not run:" >&2; tail -3 "$log" >&2
    $py -c 'import json, sys; print(json.dumps({"refused": sys.argv[1]}))' "$(tail -n 1 "$log")"
    return 0
  fi
  grep '^{' "$log" | tail -n 1
}

# peer_run MODEL REP: the peer at its best. With several threads torch and OpenBLAS each keep a pool; measured
# here, THREADS=2 with OpenBLAS on 2 threads took 32 ms for the mlp against 16 ms with OpenBLAS on 1, so both
# are run and the faster step is the peer's (its GEMM rate, the check of its BLAS, from the run with
# OPENBLAS_NUM_THREADS=THREADS; "openblas_threads" says which one ran faster).
peer_run() {
  local a b
  a=$(peer_once "$1" "$2" "$threads")
  if [[ $threads == 1 ]]; then echo "$a"; return 0; fi
  b=$(peer_once "$1" "$2" 1)
  $py - "$a" "$b" "$threads" <<'EOF'
import json, sys
a, b, t = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
if "step_ms" not in a:
    print(json.dumps(a)); sys.exit()
chosen = b if "step_ms" in b and b["step_ms"] < a["step_ms"] else a
best = dict(chosen)
best["openblas_threads"] = 1 if chosen is b else t
best["gemm_gflops"] = a["gemm_gflops"]
best["step_ms_by_openblas_threads"] = {str(t): a["step_ms"], "1": b.get("step_ms")}
print(json.dumps(best))
EOF
}

rows=$work/rows.jsonl
for m in "${models[@]}"; do
  for ((r = 1; r <= reps; ++r)); do
    l0=$(cut -d' ' -f1 /proc/loadavg)
    res=$(ours_run "$m" "$r")
    p=$(peer_run "$m" "$r")
    l1=$(cut -d' ' -f1 /proc/loadavg)
    printf '{"model": "%s", "ours": "%s", "peer": %s, "load": [%s, %s]}\n' "$m" "$res" "$p" "$l0" "$l1" >>"$rows"
  done
done
gemm_end=$(gemm)

summary=$($py - "$here/lib" "$rows" "$reps" "$threads" "$gemm_start" "$gemm_end" "${SAVE:-}" "$root" "$peer" <<'EOF'
import json, os, sys
sys.path.insert(0, sys.argv[1])
import provenance, peer_rules
rows_path, reps, threads, g0, g1, save, root, peer_script = sys.argv[2:]
reps, threads, g0, g1 = int(reps), int(threads), float(g0), float(g1)
ours_gemm = max(g0, g1)  # the stricter yardstick for the peer
target = {"mlp": 1.0, "cnn": 1.0, "resnet20": 1.0, "gpt-mini": 1.0, "resnet18": 1.0, "resnet50": 1.0,
          "gpt2": 1.0, "llama": 1.0}
batch = {"mlp": 64, "cnn": 64, "resnet20": 64, "gpt-mini": 8, "resnet18": 32, "resnet50": 32, "gpt2": 1, "llama": 1}
by_model = {}
for line in open(rows_path):
    r = json.loads(line)
    by_model.setdefault(r["model"], []).append(r)
print("# our GEMM at the end of the run: %.1f GFLOP/s" % g1)
print("%-9s %9s %9s %6s %7s %-7s %-16s %s" % ("model", "ours ms", "torch ms", "ratio", "target", "verdict",
                                             "ours fwd/bwd/upd", "peer BLAS | GEMM GFLOP/s | threads"))
res, all_pass, first_peer = [], True, None
for m, rs in by_model.items():
    ours = [[float(x) for x in r["ours"].split()] for r in rs]
    peers = [r["peer"] for r in rs]
    ran = [p for p in peers if "step_ms" in p]
    best_o = min(ours, key=lambda o: o[0])
    best_p = min(ran, key=lambda p: p["step_ms"]) if ran else None
    first_peer = first_peer or best_p
    # Every repetition of the peer must have run at its best, not only the fastest one.
    refused = [p["refused"] for p in peers if "refused" in p]
    ok, note = (True, "") if not refused else (False, "the peer refused to run (%s): no ratio" % refused[0])
    for p in ran if ok else []:
        ok, note = peer_rules.judge_peer(p, ours_gemm)
        if not ok:
            break
    if ok:
        note = peer_rules.judge_peer(best_p, ours_gemm)[1]
    ratio = best_o[0] / best_p["step_ms"] if ok else None
    fam = m.split(":")[0]
    verdict = "-" if ratio is None else ("PASS" if ratio <= target[fam] else "FAIL")
    load = max(max(r["load"]) for r in rs)
    noisy = peer_rules.noisy(load)
    all_pass &= verdict == "PASS"
    peer_desc = ("%s | %.1f | %s" % (best_p["blas"], best_p["gemm_gflops"], best_p["threads"])) if best_p else "did not run"
    print("%-9s %9.2f %9s %6s %7s %-7s %-16s %s%s" % (
        m, best_o[0], "%.2f" % best_p["step_ms"] if best_p else "-", "%.2f" % ratio if ratio else "-",
        "<=%.1f" % target[fam], verdict, "%.1f/%.1f/%.1f" % tuple(best_o[1:]), peer_desc,
        "" if ok else "\n          NO RATIO: " + note))
    if noisy:
        print("          noisy: the load average reached %.2f on %d cores while %s ran" % (load, os.cpu_count(), m))
    res.append({"model": m, "batch": batch[fam], "ours_step_ms": best_o[0],
                "torch_step_ms": best_p["step_ms"] if best_p else None, "ratio": ratio, "target": target[fam],
                "pass": verdict == "PASS", "peer_ok": ok, "peer_note": note, "noisy": noisy, "max_load": load,
                "ours_breakdown_ms": {"forward": best_o[1], "backward": best_o[2], "update": best_o[3]},
                "ours_runs_ms": [o[0] for o in ours], "torch_runs_ms": [p.get("step_ms") for p in peers],
                "peer": peer_rules.peer_config(best_p) if best_p else {"refused": [p.get("refused") for p in peers]}})
out = {"bench": "step_time", "threads": threads, "world": 1, "reps": reps,
       "ours_gemm_gflops": {"start": g0, "end": g1}, "results": res, "pass": all_pass}
provenance.stamp_from_env(out, peer=first_peer, peer_script=provenance.rel_to_repo(peer_script, root))
if save:
    json.dump(out, open(save, "w"), indent=1)
    print("# saved to " + save)
print(json.dumps(out))
EOF
)
echo "$summary"
if [[ ${BENCH_STRICT:-0} == 1 ]] && [[ $(tail -n 1 <<<"$summary") == *'"pass": false'* ]]; then exit 1; fi
exit 0
