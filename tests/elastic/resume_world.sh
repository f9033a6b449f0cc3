#!/usr/bin/env bash
# Resume on another world size (docs/elastic.md): a 2-rank checkpoint (after step 9, sample position 10*2*8 = 160)
# resumed on 3 ranks and on 1 rank trains to the end; every new rank starts from rank 0's state, so the 3 ranks are
# bitwise equal at the end (the last step averages every local layer); metrics.h5 holds every step once and says
# where the data continued. Usage: resume_world.sh DREAMDDP_BIN POLICY
set -euo pipefail
BIN=$1
POLICY=$2
W=$(mktemp -d /tmp/dd_elastic.XXXXXX)
trap 'rm -rf "$W"' EXIT
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --threads 1 --timeout 5 --policy "$POLICY" --eval-every 0
      --eval-samples 64 --log-every 0 --checkpoint-every 5)
"$BIN" launch -n 2 -- "${ARGS[@]}" --steps 10 --out "$W/two" > /dev/null 2> "$W/two.log" || { cat "$W/two.log"; exit 1; }
for N in 3 1; do
  cp -r "$W/two" "$W/on$N"
  "$BIN" launch -n $N -- "${ARGS[@]}" --steps 20 --resume "$W/on$N" --save-params "$W/on$N/p%r.bin" > /dev/null \
    2> "$W/on$N.log" || { echo "resume on $N rank(s) failed:"; cat "$W/on$N.log"; exit 1; }
  grep -q "resume on another world size: 2 -> $N ranks" "$W/on$N.log" || { cat "$W/on$N.log"; exit 1; }
  for r in $(seq 1 $((N - 1))); do
    cmp "$W/on$N/p0.bin" "$W/on$N/p$r.bin" || { echo "ranks 0 and $r differ after the final average on $N ranks"; exit 1; }
  done
  /usr/bin/python3 - "$W/on$N/metrics.h5" $N <<'PY'
import h5py, sys
f, n = h5py.File(sys.argv[1], "r"), int(sys.argv[2])
steps = list(f["steps"]["step"])
assert steps == list(range(20)), steps
ev = f["events"]
kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in ev["kind"]]
details = [d.decode() if isinstance(d, bytes) else str(d) for d in ev["detail"]]
rows = [(int(s), k, d) for s, k, d in zip(ev["step"], kinds, details) if k == "resume-world"]
want = f"2 -> {n} ranks, every rank from rank 0's state; data continues at sample position 160, global batch 16 -> {8 * n}"
assert rows == [(9, "resume-world", want)], rows
assert int(f.attrs["world"]) == n, f.attrs["world"]
PY
done
echo "OK: $POLICY 2-rank checkpoint resumed on 3 and 1 ranks"
