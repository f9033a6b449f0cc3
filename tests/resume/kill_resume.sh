#!/usr/bin/env bash
# kill -9 a 2-rank training run at a random step, resume it from its last checkpoint, and require the final
# parameters of every rank to be bitwise equal to an uninterrupted run, metrics.h5 /steps to hold each step
# exactly once, and the sensitivity probes (some open across a checkpoint) to equal the uninterrupted run's bit for
# bit. Usage: kill_resume.sh DREAMDDP_BIN POLICY [MODEL]
set -euo pipefail
BIN=$1
POLICY=$2
MODEL=${3:-mlp:width=64}
STEPS=40
W=$(mktemp -d /tmp/dd_resume.XXXXXX)
trap 'pkill -9 -f "$W" 2>/dev/null || true; rm -rf "$W"' EXIT
# A fixed profile makes dreamddp's schedule independent of timing (self-profiles differ between runs).
mkdir -p "$W/prof"
/usr/bin/python3 - "$W/prof" "$BIN" "$MODEL" <<'PY'
import json, subprocess, sys, os
d, b, m = sys.argv[1:4]
names = {"mlp": ["fc1", "fc2", "fc3", "fc4"], "cnn": ["conv1", "bn1", "conv2", "bn2", "conv3", "bn3", "fc1", "fc2"]}[m.split(":")[0]]
json.dump({n: 0.001 * (i + 1) for i, n in enumerate(names)}, open(os.path.join(d, "bp.json"), "w"))
json.dump({n: 0.002 * (len(names) - i) for i, n in enumerate(names)}, open(os.path.join(d, "comm.json"), "w"))
PY
POLICY=${POLICY//@PROFILE@/$W/prof}
COMMON=(train --model "$MODEL" --data synthetic --batch 16 --threads 1
        --eval-every 10 --eval-samples 64 --log-every 1 --timeout 30
        --sensitivity delays=1/2/4,every=5,first=2,batch=64)  # probes 2, 7, 12, ...: one is open at every checkpoint
# @RECORDED@: a self-profiled dreamddp run (its decisions measured) whose metrics.h5 a replay= policy replays.
if [[ $POLICY == *@RECORDED@* ]]; then
  # 60 steps: its trial (if the model calls one) ends at step 48, so the recording has the verdict to replay.
  "$BIN" launch -n 2 -- "${COMMON[@]}" --steps 60 --policy "dreamddp:h=8" --out "$W/rec" > /dev/null 2>&1
  POLICY=${POLICY//@RECORDED@/$W/rec}
fi
ARGS=("${COMMON[@]}" --steps $STEPS --policy "$POLICY")

"$BIN" launch -n 2 -- "${ARGS[@]}" --out "$W/ref" --save-params "$W/ref/p%r.bin" > /dev/null 2>&1

# Interrupted run: every rank stops itself after a random step past the first checkpoint, and is killed there.
source "$(dirname "$0")/../common/pause.sh"
KILL_AT=$(( 12 + RANDOM % 20 ))
launch_killed_after 2 $KILL_AT "$W/run.log" "$BIN" launch -n 2 -- "${ARGS[@]}" --out "$W/run" --checkpoint-every 5 ||
  exit 1
ls "$W/run"/checkpoint.rank0.bin "$W/run"/checkpoint.rank1.bin > /dev/null
echo "killed after step $KILL_AT; resuming"
"$BIN" launch -n 2 -- "${ARGS[@]}" --resume "$W/run" --save-params "$W/run/p%r.bin" > /dev/null 2> "$W/resume.log" || {
  cat "$W/resume.log"; exit 1; }
for r in 0 1; do
  cmp "$W/ref/p$r.bin" "$W/run/p$r.bin" || { echo "rank $r parameters differ from the uninterrupted run"; exit 1; }
done
/usr/bin/python3 - "$W/run/metrics.h5" $STEPS "$W/ref/metrics.h5" <<'PY'
import h5py, numpy as np, sys
f, ref = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[3], "r")
steps = list(f["steps"]["step"])
assert steps == list(range(int(sys.argv[2]))), steps
for name in ("sensitivity/probe_steps", "sensitivity/cosine"):
    a, b = f[name][:], ref[name][:]
    assert a.shape == b.shape and a.tobytes() == b.tobytes(), f"{name} differs from the uninterrupted run:\n{a}\n{b}"
assert list(f["sensitivity/probe_steps"][:]) == [2, 7, 12, 17, 22, 27, 32], f["sensitivity/probe_steps"][:]
PY
echo "OK: $POLICY resumed bitwise equal"
