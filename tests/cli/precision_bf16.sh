#!/usr/bin/env bash
# --precision bf16 end to end (docs/cli.md). (1) Refusals, one line and exit 2: a value that is no precision;
# --device cuda (its kernels compute in fp32); a CPU without bf16 instructions, stood for by
# ONEDNN_MAX_CPU_ISA=AVX512_CORE (oneDNN's effective ISA, which --precision bf16 asks). (2) On a CPU with bf16
# (else exit 77, skipped): 2 ranks of mlp and of gpt-mini train in bf16 (the loss falls: last 5 steps' mean below
# the first 5 steps'), end with byte-identical parameters on both ranks, record the precision, and end elsewhere than
# the same run in fp32 (bf16 really computed). Usage: precision_bf16.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_bf16.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
Q=(train --model mlp:width=64 --data synthetic --batch 8 --threads 1 --steps 2)

refused() {  # refused WANT ARGS...: exit 2 and one "dreamddp" line naming WANT
  local want=$1; shift
  local rc=0
  "$@" > "$W/out" 2> "$W/err" || rc=$?
  [ $rc -eq 2 ] || { cat "$W/err"; fail "exit $rc, expected 2: $*"; }
  [ "$(grep -c '^dreamddp' "$W/err")" -eq 1 ] || { cat "$W/err"; fail "not one diagnostic line: $*"; }
  grep '^dreamddp' "$W/err" | grep -qF -- "$want" || { cat "$W/err"; fail "the line does not name '$want': $*"; }
  grep '^dreamddp' "$W/err"
}
refused "--precision 'fp16' is not one of fp32, bf16" "$BIN" "${Q[@]}" --precision fp16
refused "--precision bf16: the cuda device computes in fp32" "$BIN" "${Q[@]}" --device cuda --precision bf16
refused "--precision bf16: this CPU has no bf16 instructions" env ONEDNN_MAX_CPU_ISA=AVX512_CORE "$BIN" "${Q[@]}" \
  --precision bf16
# The same run in fp32 is not refused there: the refusal is bf16's.
env ONEDNN_MAX_CPU_ISA=AVX512_CORE "$BIN" "${Q[@]}" > /dev/null 2> "$W/err" || { cat "$W/err"; fail "fp32 refused"; }

rc=0
"$BIN" "${Q[@]}" --precision bf16 > /dev/null 2> "$W/err" || rc=$?
if [ $rc -eq 2 ] && grep -q "no bf16 instructions" "$W/err"; then
  echo "SKIP: this CPU has no bf16 instructions"; exit 77
fi
[ $rc -eq 0 ] || { cat "$W/err"; fail "bf16 run exited $rc"; }

two_ranks() {  # two_ranks NAME PRECISION TRAIN-ARGS...
  local name=$1 prec=$2; shift 2
  "$BIN" launch -n 2 -- train --threads 1 --precision "$prec" --out "$W/$name" --save-params "$W/$name/p%r.bin" \
    "$@" > /dev/null 2> "$W/$name.log" || { tail -n 20 "$W/$name.log"; fail "$name exited non-zero"; }
}
for m in mlp gpt-mini; do
  if [ $m = mlp ]; then A=(--model mlp --data fashion-mnist --batch 32 --steps 30 --policy plsgd:h=3 --eval-samples 100)
  else A=(--model gpt-mini --data text --batch 4 --steps 30 --policy dreamddp:h=3 --eval-samples 16); fi
  two_ranks "$m-bf16" bf16 "${A[@]}"
  two_ranks "$m-fp32" fp32 "${A[@]}"
  cmp -s "$W/$m-bf16/p0.bin" "$W/$m-bf16/p1.bin" || fail "$m bf16: rank 0 and rank 1 parameters differ"
  ! cmp -s "$W/$m-bf16/p0.bin" "$W/$m-fp32/p0.bin" || fail "$m: bf16 ended with the fp32 run's parameters"
  /usr/bin/python3 - "$W/$m-bf16" "$W/$m-fp32" <<'PY' || fail "$m: see above"
import h5py, json, sys
for d, want in ((sys.argv[1], "bf16"), (sys.argv[2], "fp32")):
    s = json.load(open(d + "/summary.json"))
    assert s["precision"] == want, (d, s.get("precision"))
    a = h5py.File(d + "/metrics.h5", "r").attrs["precision"]
    assert (a.decode() if isinstance(a, bytes) else str(a)) == want, (d, a)
    loss = [float(x) for x in h5py.File(d + "/metrics.h5", "r")["steps"]["loss"]]
    first, last = sum(loss[:5]) / 5, sum(loss[-5:]) / 5
    print(f"{d.rsplit('/', 1)[1]}: loss {first:.4f} (first 5 steps) -> {last:.4f} (last 5)")
    assert last < 0.9 * first, f"{d}: the loss did not fall"
PY
done
echo "OK: bf16 refusals; bf16 training on 2 ranks: loss falls, ranks byte-identical"
