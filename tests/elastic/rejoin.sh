#!/usr/bin/env bash
# Rejoin with live recovery (docs/elastic.md "Rejoin"): rank 2 of 4 is killed with SIGKILL mid-run; the 3
# survivors shrink and go on; rank 2, started again, asks to join, is admitted at the next check step and receives
# its state from the live world. All 4 finish every requested step with bitwise equal parameters, metrics.h5 holds
# every step once, a `shrink` and a `rejoin` event. MODE hand: rank 2 started again by hand with --rejoin; launch:
# under `dreamddp launch -n 4 --max-restarts 1`, which starts it again by itself. With RDZV_URL=redis://... (hand
# mode) the ranks agree and rejoin through that Redis server instead of a directory.
# Usage: rejoin.sh DREAMDDP_BIN POLICY MODE
set -euo pipefail
BIN=$1
POLICY=$2
MODE=$3
STEPS=600
W=$(mktemp -d /tmp/dd_rejoin.XXXXXX)
source "$(dirname "$0")/shrink_lib.sh"
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 3 --policy "$POLICY"
      --eval-every 0 --eval-samples 64 --log-every 1 --on-peer-loss shrink --out "$W/run" --save-params "$W/p%r.bin")
t0=$SECONDS
if [ "$MODE" = hand ]; then
  # Every rank stops itself after step 30 (rank 2 is lost there) and the survivors again after step 40, once
  # shrunk, while the joiner starts: it is admitted at a join check with most of the run still ahead.
  DREAMDDP_PAUSE_AFTER_STEPS=30,40 start_ranks rejoin 4 "${ARGS[@]}"
  LOG0=$W/rejoin.0.log
  kill_paused 2
  { wait "${PIDS[2]}"; } 2>/dev/null || true
  wait_stopped "${PIDS[0]}" "${PIDS[1]}" "${PIDS[3]}" || { dump_logs; exit 1; }
  grep -q "^shrink: " "$LOG0" || { echo "no shrink by step 40:"; cat "$LOG0"; exit 1; }
  RANK=2 WORLD_SIZE=4 LOCAL_RANK=2 LOCAL_WORLD_SIZE=4 \
    "$BIN" "${ARGS[@]}" --rejoin --rendezvous "${RDZV_URL:-file://$W/rdzv.rejoin}" > /dev/null 2> "$W/rejoin.2b.log" &
  PIDS[2]=$!
  kill -CONT "${PIDS[0]}" "${PIDS[1]}" "${PIDS[3]}"
  for r in 0 1 2 3; do
    status_of $r
    [ "$RC" -eq 0 ] || { echo "rank $r exited $RC:"; cat "$W/rejoin.$r.log" "$W/rejoin.2b.log"; exit 1; }
  done
  PIDS=()
  grep -E "^train: rank 2 admitted after [0-9.]+ s as rank 3 of 4 \(generation 2\), at step [0-9]+$" "$W/rejoin.2b.log" ||
    { echo "joiner:"; cat "$W/rejoin.2b.log"; exit 1; }
else
  # The launcher starts rank 2 again with the same environment: a pause at step 30 only, which the joiner, admitted
  # later, never meets.
  DREAMDDP_PAUSE_AFTER_STEPS=30 "$BIN" launch -n 4 --max-restarts 1 -- "${ARGS[@]}" > /dev/null 2> "$W/launch.log" &
  PIDS=($!)
  LOG0=$W/launch.log
  for _ in $(seq 1 3000); do [ "$(ranks_of "${PIDS[0]}" | wc -l)" -eq 4 ] && break; sleep 0.02; done
  # shellcheck disable=SC2046
  wait_stopped $(ranks_of "${PIDS[0]}") || { dump_logs; exit 1; }
  killed=$(rank_pid "${PIDS[0]}" 2) || { echo "no rank 2 under the launcher"; exit 1; }
  kill -9 "$killed"
  # The survivors stay stopped until the started-again rank 2 has asked to join: on a loaded machine they could
  # otherwise end the run before it asks, and it would rightly find the run over (exit 3, no parameters).
  for _ in $(seq 1 1200); do grep -q "^train: rank 2 asks to join the live run" "$W/launch.log" && break; sleep 0.05; done
  grep -q "^train: rank 2 asks to join the live run" "$W/launch.log" || { echo "rank 2 never asked to join:"; cat "$W/launch.log"; exit 1; }
  # shellcheck disable=SC2046
  kill -CONT $(ranks_of "${PIDS[0]}" | grep -vx "$killed")
  status_of 0
  PIDS=()
  [ "$RC" -eq 0 ] || { echo "launcher exited $RC:"; cat "$LOG0"; exit 1; }
  grep -qE "^dreamddp launch: starting rank 2 again \(pid [0-9]+, restart 1 of 1\); it rejoins the live world$" "$LOG0" ||
    { cat "$LOG0"; exit 1; }
fi
echo "all 4 done after $((SECONDS - t0)) s"
for r in 1 2 3; do cmp "$W/p0.bin" "$W/p$r.bin" || { echo "rank $r's parameters differ from rank 0's"; exit 1; }; done
grep -E "^rejoin: 3 -> 4 ranks \(generation 2: rank 2 joined; ranks 0, 1, 3, 2 now 0..3\): admitted in [0-9.]+ s, of which [0-9.]+ s the state's transfer " "$LOG0" ||
  { echo "no rejoin line on rank 0:"; cat "$LOG0"; exit 1; }
for kind in shrink rejoin; do
  ev=$(events_of "$W/run/metrics.h5" $kind)
  [ "$(echo "$ev" | grep -c .)" -eq 1 ] || { echo "$kind events: $ev"; exit 1; }
  echo "$ev" | sed "s/^/event: /"
done
/usr/bin/python3 - "$W/run/metrics.h5" $STEPS <<'PY'
import h5py, sys
steps = list(h5py.File(sys.argv[1], "r")["steps"]["step"])
assert steps == list(range(int(sys.argv[2]))), steps
PY
# A self-profiling policy profiled once, on 4 ranks; the shrunk world scaled that profile to 3 ranks, and the grown
# one (the joiner took rank 0's) to 4 again: no profiling steps after the loss.
if [[ $POLICY == dreamddp* ]]; then
  [ "$(grep -c "profiling backward and communication" "$LOG0")" -eq 1 ] &&
    grep -q "^sync: the profile of 4 ranks scaled to 3 " "$LOG0" && grep -q "^sync: the profile of 3 ranks scaled to 4 " "$LOG0" ||
    { echo "the profile was not carried through the shrink and the rejoin:"; grep -E "profil|^sync" "$LOG0"; exit 1; }
fi
echo "OK: $POLICY ($MODE), rank 2 killed, started again, rejoined; 4 ranks bitwise equal"
