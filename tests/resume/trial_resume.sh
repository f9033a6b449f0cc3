#!/usr/bin/env bash
# Resume with decisions taken from measurements: a 2-rank dreamddp run whose trial (layer-wise against Local SGD's
# schedule, measured) is on is killed with kill -9 after the trial's verdict and resumed from its checkpoint; the
# verdict travels in the checkpoint, so the resumed run equals an uninterrupted replay of its own recorded decisions
# (replay=RUN_DIR) bit for bit. The replay, killed and resumed in turn, is the same again.
# Usage: trial_resume.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
STEPS=40
W=$(mktemp -d /tmp/dd_trial_resume.XXXXXX)
trap 'pkill -9 -f "$W" 2>/dev/null || true; rm -rf "$W"' EXIT
# A profile on which the two schedules are modelled close where cores are shared: trial=1 measures both,
# steps 4..20 (one period, then 4 of h=4), verdict at step 20.
mkdir -p "$W/prof"
echo '{"fc1": 0.001, "fc2": 0.003, "fc3": 0.003, "fc4": 0.0001}' > "$W/prof/bp.json"
echo '{"fc1": 0.004, "fc2": 0.005, "fc3": 0.005, "fc4": 0.001}' > "$W/prof/comm.json"
echo '{"compute_slowdown": 0.6, "comm_slowdown": 1.0}' > "$W/prof/overlap.json"
ARGS=(train --model mlp:width=64 --data synthetic --batch 16 --steps $STEPS --threads 1 --log-every 1 --timeout 30)

source "$(dirname "$0")/../common/pause.sh"
# run POLICY OUT: killed at a random step after the verdict's checkpoint (25), then resumed.
killed_and_resumed() {
  local policy=$1 out=$2 kill_at=$(( 27 + RANDOM % 8 ))
  launch_killed_after 2 $kill_at "$out.log" "$BIN" launch -n 2 -- "${ARGS[@]}" --policy "$policy" --out "$out" \
    --checkpoint-every 5 || exit 1
  echo "$policy: killed after step $kill_at; resuming"
  "$BIN" launch -n 2 -- "${ARGS[@]}" --policy "$policy" --resume "$out" --save-params "$out/p%r.bin" > /dev/null \
    2> "$out.resume.log" || { cat "$out.resume.log"; exit 1; }
}

killed_and_resumed "dreamddp:h=4,trial=1,profile=$W/prof" "$W/trial"
/usr/bin/python3 - "$W/trial/metrics.h5" <<'PY'
import h5py, json, sys
d = json.loads(h5py.File(sys.argv[1], "r")["decisions"].attrs["policy@0"])
assert d["trial"] and d["trial"]["start"] == 4 and d["trial"]["verdict"] in ("layer-wise", "localsgd"), d
assert d["profile"]["source"] == "file", d
print("trial verdict:", d["trial"]["verdict"])
PY
"$BIN" launch -n 2 -- "${ARGS[@]}" --policy "dreamddp:h=4,replay=$W/trial" --out "$W/replay" \
  --save-params "$W/replay/p%r.bin" > /dev/null 2> "$W/replay.log" || { cat "$W/replay.log"; exit 1; }
for r in 0 1; do
  cmp "$W/trial/p$r.bin" "$W/replay/p$r.bin" || { echo "rank $r: the resumed trial run differs from its replay"; exit 1; }
done
killed_and_resumed "dreamddp:h=4,replay=$W/trial" "$W/replay2"
for r in 0 1; do
  cmp "$W/replay/p$r.bin" "$W/replay2/p$r.bin" || { echo "rank $r: the resumed replay differs"; exit 1; }
done
echo "OK: a resumed trial run equals its replay; a resumed replay equals the replay"
