#!/usr/bin/env bash
# A run switched by --control-file, killed with kill -9 and resumed with the file unchanged, ends bitwise equal to
# the uninterrupted run: what the file last held travels in the checkpoint, so the resumed run does not switch (and
# average) a second time when it reads the same spec again. Usage: control_resume.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
STEPS=30
W=$(mktemp -d /tmp/dd_ctlresume.XXXXXX)
trap 'pkill -9 -f "$W" 2>/dev/null || true; rm -rf "$W"' EXIT
# A fixed profile: dreamddp's schedule then does not depend on timing.
mkdir -p "$W/prof"
echo '{"fc1": 0.001, "fc2": 0.002, "fc3": 0.003, "fc4": 0.004}' > "$W/prof/bp.json"
echo '{"fc1": 0.008, "fc2": 0.006, "fc3": 0.004, "fc4": 0.002}' > "$W/prof/comm.json"
# Read at step 0 (the file is polled every 10th step), switched to at step 1; read again at 10, 20.
echo "dreamddp:h=4,delay=2,profile=$W/prof" > "$W/ctl.txt"
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --threads 1 --eval-samples 16 --log-every 1 --timeout 30
      --steps $STEPS --policy plsgd:h=4 --control-file "$W/ctl.txt")

"$BIN" launch -n 2 -- "${ARGS[@]}" --out "$W/ref" --save-params "$W/ref/p%r.bin" > /dev/null 2> "$W/ref.log" || {
  cat "$W/ref.log"; exit 1; }
[ "$(grep -c "sync: policy dreamddp" "$W/ref.log")" -eq 1 ] || { echo "the reference run did not switch once:"; cat "$W/ref.log"; exit 1; }

# Killed after the checkpoint of step 14 (or 19): the resumed run polls the unchanged file at step 20 (or 20).
source "$(dirname "$0")/../common/pause.sh"
KILL_AT=$(( 16 + RANDOM % 4 ))
launch_killed_after 2 $KILL_AT "$W/run.log" "$BIN" launch -n 2 -- "${ARGS[@]}" --out "$W/run" --checkpoint-every 5 ||
  exit 1
echo "killed after step $KILL_AT; resuming"
"$BIN" launch -n 2 -- "${ARGS[@]}" --resume "$W/run" --save-params "$W/run/p%r.bin" > /dev/null 2> "$W/resume.log" || {
  cat "$W/resume.log"; exit 1; }
grep -q "resumed from" "$W/resume.log" || { echo "no resume:"; cat "$W/resume.log"; exit 1; }
# Restoring the checkpoint's policy prints it once; a second switch would print it again.
if [ "$(grep -c "sync: policy dreamddp" "$W/resume.log")" -ne 1 ]; then
  echo "the resumed run switched again to the unchanged control file:"; cat "$W/resume.log"; exit 1
fi
for r in 0 1; do
  cmp "$W/ref/p$r.bin" "$W/run/p$r.bin" || { echo "rank $r parameters differ from the uninterrupted run"; exit 1; }
done
/usr/bin/python3 - "$W/run/metrics.h5" "$W/ref/metrics.h5" <<'PY'
import h5py, sys
def switches(p):
    with h5py.File(p, "r") as f:
        if "events" not in f:
            return []
        rows = f["events"][:]
        kind = lambda k: k.decode() if isinstance(k, bytes) else str(k)
        return [int(r["step"]) for r in rows if kind(r["kind"]) == "switch"]
got, want = switches(sys.argv[1]), switches(sys.argv[2])
assert got == want and len(want) == 1, ("switch events", got, want)
PY
echo "OK: a control-file switch resumed bitwise equal, applied once"
