#!/usr/bin/env bash
# Merge keys inside a composite act, with the bytes and the parameters to prove it: on 2 ranks, a staleness cap
# over plsgd with compress=topk sends a small fraction of the plain composite's bytes, compress=int8 about a
# quarter, outer=nesterov the same bytes but other parameters; every run ends with the ranks bitwise equal and
# summary.json recording the spec that ran. delay= inside a composite is refused with one line naming the key and
# the composite, and leaves no --out. Usage: composite_keys.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_composite.XXXXXX)
trap 'rm -rf "$W"' EXIT
T=(train --model mlp:width=64 --data synthetic --batch 16 --threads 1 --steps 12)
run() {  # NAME SPEC
  "$BIN" launch -n 2 -- "${T[@]}" --policy "$2" --out "$W/$1" --save-params "$W/$1_%r.bin" >/dev/null 2>"$W/$1.log" ||
    { cat "$W/$1.log"; echo "FAIL: $2 exited non-zero"; exit 1; }
  cmp -s "$W/$1_0.bin" "$W/$1_1.bin" || { echo "FAIL: $2: the ranks' parameters differ"; exit 1; }
}
run plain "plsgd:h=4+staleness:t=8"
run topk "plsgd:h=4,compress=topk:p=1+staleness:t=8"
run int8 "plsgd:h=4,compress=int8+staleness:t=8"
run outer "plsgd:h=4,outer=nesterov+staleness:t=8"
/usr/bin/python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
s = {k: json.load(open(f"{w}/{k}/summary.json")) for k in ("plain", "topk", "int8", "outer")}
for k, spec in (("plain", "plsgd:h=4+staleness:t=8"), ("topk", "plsgd:h=4,compress=topk:p=1+staleness:t=8"),
                ("int8", "plsgd:h=4,compress=int8+staleness:t=8"), ("outer", "plsgd:h=4,outer=nesterov+staleness:t=8")):
    assert s[k]["policy"] == spec, (k, s[k]["policy"])
b = {k: s[k]["comm_bytes"] for k in s}
# top-k at 1% sends index+value pairs of 1% of each average: far below a tenth of the fp32 bytes.
assert b["topk"] * 10 < b["plain"], b
# int8 sends a byte per float plus a scale per chunk: between a fifth and a third of fp32.
assert b["plain"] / 5 < b["int8"] < b["plain"] / 3, b
# The outer optimizer changes what is applied, not what is sent.
assert b["outer"] == b["plain"], b
print("bytes", b)
PY
cmp -s "$W/plain_0.bin" "$W/outer_0.bin" && { echo "FAIL: outer=nesterov inside the composite changed nothing"; exit 1; }
cmp -s "$W/plain_0.bin" "$W/topk_0.bin" && { echo "FAIL: compress=topk inside the composite changed nothing"; exit 1; }
rc=0
"$BIN" train --model mlp:width=64 --data synthetic --batch 16 --steps 4 --policy "plsgd:h=4,delay=1+staleness:t=8" \
  --out "$W/delay" >/dev/null 2>"$W/delay.log" || rc=$?
[ $rc -eq 2 ] || { echo "FAIL: delay= in a composite exited $rc, expected 2"; cat "$W/delay.log"; exit 1; }
[ "$(wc -l <"$W/delay.log")" -eq 1 ] || { echo "FAIL: more than one line:"; cat "$W/delay.log"; exit 1; }
grep -q "delay=" "$W/delay.log" && grep -q "staleness" "$W/delay.log" ||
  { echo "FAIL: the refusal names neither the key nor the composite:"; cat "$W/delay.log"; exit 1; }
[ ! -e "$W/delay" ] || { echo "FAIL: a refused run left its --out"; exit 1; }
echo "OK: merge keys act inside composites"
