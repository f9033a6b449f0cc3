#!/usr/bin/env bash
# `train --on-peer-loss shrink` (docs/elastic.md "Shrink without restart"): rank 2 of 4 is killed with SIGKILL
# mid-run. The 3 survivors agree on who is left, rebuild their world and finish every requested step without a
# checkpoint: each exits 0, their final parameters are bitwise equal, metrics.h5 holds every step once and a
# `shrink` event with the timings. MODE hand: ranks started by hand; launch: under `dreamddp launch -n 4`, which
# lets the survivors continue and exits 0. DEVICE (default cpu): cuda runs the 4 ranks on the GPU (exit 77, a skip,
# where none is visible). Usage: shrink_kill9.sh DREAMDDP_BIN POLICY MODE [DEVICE]
set -euo pipefail
BIN=$1
POLICY=$2
MODE=$3
DEVICE=${4:-cpu}
if [ "$DEVICE" = cuda ] && ! { [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; }; then
  echo "no GPU visible: skipped"
  exit 77
fi
STEPS=300
W=$(mktemp -d /tmp/dd_shrink.XXXXXX)
source "$(dirname "$0")/shrink_lib.sh"
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 3 --policy "$POLICY"
      --device "$DEVICE"
      --eval-every 0 --eval-samples 64 --log-every 1 --on-peer-loss shrink --out "$W/run" --save-params "$W/p%r.bin")
t0=$SECONDS
if [ "$MODE" = hand ]; then
  DREAMDDP_PAUSE_AFTER_STEPS=30 start_ranks kill9 4 "${ARGS[@]}"
  LOG0=$W/kill9.0.log
  kill_paused 2
  for r in 0 1 3; do
    status_of $r
    [ "$RC" -eq 0 ] || { echo "survivor $r exited $RC:"; cat "$W/kill9.$r.log"; exit 1; }
  done
  { wait "${PIDS[2]}"; } 2>/dev/null || true
  PIDS=()
else
  DREAMDDP_PAUSE_AFTER_STEPS=30 "$BIN" launch -n 4 -- "${ARGS[@]}" > /dev/null 2> "$W/launch.log" &
  PIDS=($!)
  LOG0=$W/launch.log
  for _ in $(seq 1 3000); do [ "$(ranks_of "${PIDS[0]}" | wc -l)" -eq 4 ] && break; sleep 0.02; done
  # shellcheck disable=SC2046
  wait_stopped $(ranks_of "${PIDS[0]}") || { dump_logs; exit 1; }
  killed=$(rank_pid "${PIDS[0]}" 2) || { echo "no rank 2 under the launcher"; exit 1; }
  kill -9 "$killed"
  # shellcheck disable=SC2046
  kill -CONT $(ranks_of "${PIDS[0]}" | grep -vx "$killed")
  status_of 0
  PIDS=()
  [ "$RC" -eq 0 ] || { echo "launcher exited $RC:"; cat "$LOG0"; exit 1; }
  grep -q "^dreamddp launch: rank 2 (pid $killed) was killed by signal 9 (Killed); the other 3 rank(s) continue without it (--on-peer-loss shrink)$" "$LOG0" ||
    { cat "$LOG0"; exit 1; }
fi
echo "survivors done after $((SECONDS - t0)) s"
cmp "$W/p0.bin" "$W/p1.bin" && cmp "$W/p0.bin" "$W/p3.bin" || { echo "survivors' parameters differ"; exit 1; }
grep -E "^shrink: 4 -> 3 ranks \(generation 1: lost rank 2; ranks 0, 1, 3 now 0..2\): detect [0-9.]+ s, agree [0-9.]+ s, rebuild [0-9.]+ s, recover [0-9.]+ s; step [0-9]+ redone" "$LOG0" ||
  { echo "no shrink line on rank 0:"; cat "$LOG0"; exit 1; }
# The optimizer state of the failed step's lock-step layers becomes rank 0's (every layer of ddp's, none of Local
# SGD's between its averages); a local layer's stays each survivor's own.
L=$(/usr/bin/python3 -c 'import h5py, sys; print(len(h5py.File(sys.argv[1], "r")["layers"]))' "$W/run/metrics.h5")
n=$(sed -nE "s/.*optimizer state of ([0-9]+) lock-step layers from rank 0.*/\1/p" "$LOG0" | head -n 1)
case $POLICY in
  ddp) want=$L ;;
  localsgd*) want=0 ;;
  *) want=$n ;;
esac
[ -n "$n" ] && [ "$n" -eq "$want" ] || { echo "optimizer state of '$n' lock-step layers taken from rank 0, want $want of $L"; exit 1; }
ev=$(events_of "$W/run/metrics.h5" shrink)
[ "$(echo "$ev" | wc -l)" -eq 1 ] && echo "$ev" | grep -q "4 -> 3 ranks" ||
  { echo "events: $ev"; for f in "$W"/*.log; do echo "== $f"; grep -v "^step " "$f" | tail -n 8; done; exit 1; }
/usr/bin/python3 - "$W/run/metrics.h5" $STEPS "$W/run/summary.json" <<'PY'
import h5py, json, sys
f = h5py.File(sys.argv[1], "r")
steps = list(f["steps"]["step"])
assert steps == list(range(int(sys.argv[2]))), steps
# The run's two worlds agree between its files: it started on 4 (metrics.h5's world, summary.json's world) and
# ended on 3 (summary.json's world_at_end).
s = json.load(open(sys.argv[3]))
assert int(f.attrs["world"]) == 4 and s["world"] == 4 and s["world_at_end"] == 3, (f.attrs["world"], s["world"],
                                                                                   s.get("world_at_end"))
PY
# A self-profiling policy profiled once, on 4 ranks (by step 30, where the loss comes); the survivors scaled that
# profile to 3 ranks instead of profiling again.
if [[ $POLICY == dreamddp* ]]; then
  [ "$(grep -c "profiling backward and communication" "$LOG0")" -eq 1 ] &&
    grep -q "^sync: the profile of 4 ranks scaled to 3 (backward times as measured, all-reduces as a ring of 3): no profiling steps$" "$LOG0" ||
    { echo "the survivors did not scale the profile:"; grep -E "profil|^sync" "$LOG0"; exit 1; }
fi
echo "$ev" | sed 's/^/event: /'
echo "OK: $POLICY ($MODE), 3 of 4 ranks finished after a SIGKILL, bitwise equal"
