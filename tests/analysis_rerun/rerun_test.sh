#!/usr/bin/env bash
# A run's metrics.h5 alone reruns it: analysis/rerun_command.py prints the command from the root attributes, and
# that command (2 ranks, non-default options, a policy switch, the probe) ends with parameters bitwise equal to the
# original run's on every rank. A file that is not a metrics file is exit 2.
# Usage: rerun_test.sh DREAMDDP_BIN RERUN_COMMAND_PY
set -euo pipefail
BIN=$1
PY=$2
W=$(mktemp -d /tmp/dd_rerun.XXXXXX)
trap 'rm -rf "$W"' EXIT
"$BIN" launch -n 2 -- train --model mlp --data synthetic --batch 16 --steps 12 --threads 1 --lr 0.03 --nesterov \
  --weight-decay 0.01 --warmup 2 --seed 7 --lr-schedule step --eval-samples 64 --switch 6:localsgd:k=2 \
  --sensitivity delays=1/2,every=4,batch=16 --staleness-lr 0.9 --out "$W/a" --save-params "$W/a/p%r.bin" \
  > /dev/null 2> "$W/a.log" || { cat "$W/a.log"; exit 1; }
cmd=$(/usr/bin/python3 "$PY" "$W/a/metrics.h5" --bin "$BIN" --out "$W/b" --save-params "$W/b/p%r.bin")
echo "rerun: $cmd"
case $cmd in *"launch -n 2 -- train"*"--switch 6:localsgd:k=2"*) ;; *) echo "unexpected command"; exit 1 ;; esac
eval "$cmd" > /dev/null 2> "$W/b.log" || { cat "$W/b.log"; exit 1; }
for r in 0 1; do
  cmp "$W/a/p$r.bin" "$W/b/p$r.bin" || { echo "rank $r: the rerun's parameters differ from the original's"; exit 1; }
done
/usr/bin/python3 - "$W/a/metrics.h5" "$W/b/metrics.h5" <<'PY'
import h5py, sys
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
assert a["sensitivity/cosine"][:].tobytes() == b["sensitivity/cosine"][:].tobytes(), "probe cosines differ"
PY
echo "not a metrics file" > "$W/bad.h5"
set +e
err=$(/usr/bin/python3 "$PY" "$W/bad.h5" 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 2 ] && [[ $err == *"not a readable HDF5 file"* ]] || { echo "bad file: exit $rc, '$err'"; exit 1; }
echo "OK: rerun from metrics.h5 is bitwise equal"
