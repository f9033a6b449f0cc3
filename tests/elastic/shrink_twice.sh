#!/usr/bin/env bash
# `train --on-peer-loss shrink`, two losses: rank 0 of 4 is killed (SIGKILL), the survivors 1, 2, 3 form generation
# 1 as ranks 0..2; then start rank 3 is killed, and 1, 2 (2 of 3, a quorum) form generation 2. Both finish every step
# with bitwise-equal parameters. Usage: shrink_twice.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
STEPS=300
W=$(mktemp -d /tmp/dd_shrink.XXXXXX)
source "$(dirname "$0")/shrink_lib.sh"
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 3 --policy localsgd:k=4
      --eval-every 0 --eval-samples 64 --log-every 1 --on-peer-loss shrink --out "$W/run" --save-params "$W/p%r.bin")
# Every rank stops itself after steps 30 and 60: rank 0 is lost at the first, rank 3 at the second.
DREAMDDP_PAUSE_AFTER_STEPS=30,60 start_ranks twice 4 "${ARGS[@]}"
kill_paused 0
wait_stopped "${PIDS[1]}" "${PIDS[2]}" "${PIDS[3]}" || { dump_logs; exit 1; }
grep -q "^shrink: 4 -> 3 ranks (generation 1: lost rank 0; ranks 1, 2, 3 now 0..2)" "$W/twice.1.log" ||
  { echo "no first shrink on start rank 1 (now rank 0):"; cat "$W/twice.1.log"; exit 1; }
kill -9 "${PIDS[3]}"
kill -CONT "${PIDS[1]}" "${PIDS[2]}"
for r in 1 2; do
  status_of $r
  [ "$RC" -eq 0 ] || { echo "start rank $r exited $RC:"; cat "$W/twice.$r.log"; exit 1; }
done
{ wait "${PIDS[0]}"; wait "${PIDS[3]}"; } 2>/dev/null || true
PIDS=()
grep -q "^shrink: 3 -> 2 ranks (generation 2: lost rank 3; ranks 1, 2 now 0..1)" "$W/twice.1.log" ||
  { echo "no second shrink:"; cat "$W/twice.1.log"; exit 1; }
grep -q "^step $STEPS/$STEPS" "$W/twice.1.log" || { echo "the run did not reach the last step"; exit 1; }
cmp "$W/p1.bin" "$W/p2.bin" || { echo "the survivors' parameters differ"; exit 1; }
echo "OK: two losses (rank 0, then another), the last two ranks finished bitwise equal"
