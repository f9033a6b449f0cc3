#!/usr/bin/env bash
# `train --on-peer-loss shrink`: only a quorum of more than half of the previous world continues.
#  1. One rank of 3 stopped (SIGSTOP): the other two see its heartbeat stand still (--heartbeat, 1 s here), judge it
#     lost before their collective's timeout (3 s), agree without it at once and continue (2 > 3/2); the stopped
#     rank, continued with SIGCONT after they rebuilt, finds itself excluded and (--rejoins-in-place 0) exits 3
#     naming the quorum. The two finish every step with bitwise-equal parameters.
#  1b. The same stop with the default --rejoins-in-place: the excluded rank asks to join again from the same process,
#     the two admit it (a rejoin event, 2 -> 3 ranks), and all three exit 0 with bitwise-equal parameters and every
#     step in rank 0's metrics.h5.
#  2. Two of 4 ranks killed at once: the remaining 2 are not more than half of 4, so both exit 3 within bounded
#     time ("no quorum"), and rank 0 records a shrink-quorum-lost event.
# Usage: shrink_quorum.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
STEPS=300
W=$(mktemp -d /tmp/dd_shrink.XXXXXX)
source "$(dirname "$0")/shrink_lib.sh"
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 3 --policy localsgd:k=4
      --eval-every 0 --eval-samples 64 --log-every 1 --on-peer-loss shrink)

# 1. {2} stopped vs {0, 1}.
# Every rank stops itself after step 30; ranks 0 and 1 continue, rank 2 stays stopped (a partition).
DREAMDDP_PAUSE_AFTER_STEPS=30 start_ranks stop 3 "${ARGS[@]}" --rejoins-in-place 0 --out "$W/stop" \
  --save-params "$W/stop%r.bin"
wait_stopped "${PIDS[@]}" || { dump_logs; exit 1; }
kill -CONT "${PIDS[0]}" "${PIDS[1]}"
wait_for_line "$W/stop.0.log" "^shrink: 3 -> 2 ranks (generation 1: lost rank 2; ranks 0, 1 now 0..1)"
# The first survivor to judge it fails the world for the other too (its sockets shut down): one verdict at least.
cat "$W/stop.0.log" "$W/stop.1.log" | grep -q "rank [0-9] (started as rank 2) silent: its heartbeat stood still for [0-9.]* s; lost" ||
  { echo "no heartbeat verdict on the stopped rank:"; cat "$W/stop.0.log" "$W/stop.1.log"; exit 1; }
# Detected and agreed on within the collective's timeout: no wait for the timeout, none for the join window.
read -r detect agree < <(sed -n 's/^shrink: 3 -> 2 ranks.*: detect \([0-9.]*\) s, agree \([0-9.]*\) s.*/\1 \2/p' \
  "$W/stop.0.log")
awk -v d="$detect" -v a="$agree" 'BEGIN { exit !(d + a < 3) }' ||
  { echo "detect $detect s + agree $agree s is not below the 3 s timeout:"; cat "$W/stop.0.log"; exit 1; }
kill -CONT "${PIDS[2]}"
t0=$SECONDS
status_of 2
[ "$RC" -eq 3 ] || { echo "the stopped rank exited $RC, not 3:"; cat "$W/stop.2.log"; exit 1; }
[ $((SECONDS - t0)) -lt 60 ] || { echo "the stopped rank took $((SECONDS - t0)) s to exit"; exit 1; }
grep -q "on-peer-loss shrink: excluded: rank 0, 1 (2 of 3, a quorum) formed generation 1 without this rank (started as rank 2)" \
  "$W/stop.2.log" || { cat "$W/stop.2.log"; exit 1; }
for r in 0 1; do
  status_of $r
  [ "$RC" -eq 0 ] || { echo "rank $r of the majority exited $RC:"; cat "$W/stop.$r.log"; exit 1; }
done
PIDS=()
cmp "$W/stop0.bin" "$W/stop1.bin" || { echo "the majority's parameters differ"; exit 1; }
events_of "$W/stop/metrics.h5" shrink | grep -q "3 -> 2 ranks" || { echo "no shrink event"; exit 1; }
echo "partition: the majority continued, the stopped rank exited 3"

# 1b. {2} stopped vs {0, 1}, then rejoining from its own process. The two stop themselves again after step 40,
# so that the run cannot end before rank 2, continued, has asked to join; then they go on and admit it.
DREAMDDP_PAUSE_AFTER_STEPS=30,40 start_ranks back 3 "${ARGS[@]}" --out "$W/back" --save-params "$W/back%r.bin"
wait_stopped "${PIDS[@]}" || { dump_logs; exit 1; }
kill -CONT "${PIDS[0]}" "${PIDS[1]}"
wait_for_line "$W/back.0.log" "^shrink: 3 -> 2 ranks (generation 1: lost rank 2; ranks 0, 1 now 0..1)"
wait_stopped "${PIDS[0]}" "${PIDS[1]}" || { dump_logs; exit 1; }
kill -CONT "${PIDS[2]}"
wait_for_line "$W/back.2.log" "^train: rank 2 asks to join the live run"
kill -CONT "${PIDS[0]}" "${PIDS[1]}"
for r in 0 1 2; do
  status_of $r
  [ "$RC" -eq 0 ] || { echo "rank $r exited $RC:"; dump_logs; exit 1; }
done
PIDS=()
grep -q "^train: rank 2: on-peer-loss shrink: excluded: .*; it asks to join again from this process (1 of 8)" \
  "$W/back.2.log" || { echo "rank 2 did not ask to join again in place:"; cat "$W/back.2.log"; exit 1; }
events_of "$W/back/metrics.h5" rejoin | grep -q "2 -> 3 ranks (generation 2: rank 2 joined;" ||
  { echo "no rejoin event:"; events_of "$W/back/metrics.h5" rejoin; exit 1; }
cmp "$W/back0.bin" "$W/back1.bin" && cmp "$W/back0.bin" "$W/back2.bin" ||
  { echo "the three ranks' parameters differ"; exit 1; }
/usr/bin/python3 - "$W/back/metrics.h5" $STEPS <<'PY'
import h5py, sys
steps = list(h5py.File(sys.argv[1], "r")["steps"]["step"])
assert steps == list(range(int(sys.argv[2]))), steps
PY
echo "stop: the excluded rank joined again from its own process; all three equal"

# 2. {0, 1} of 4: no quorum.
DREAMDDP_PAUSE_AFTER_STEPS=30 start_ranks minority 4 "${ARGS[@]}" --out "$W/minority"
kill_paused 2 3
t0=$SECONDS
for r in 0 1; do
  status_of $r
  [ "$RC" -eq 3 ] || { echo "rank $r of the minority exited $RC, not 3:"; cat "$W/minority.$r.log"; exit 1; }
  grep -q "on-peer-loss shrink: no quorum: only 2 of the 4 ranks of generation 0 (rank 0, 1) reported within [0-9]* s; a new world needs more than half (3)" \
    "$W/minority.$r.log" || { cat "$W/minority.$r.log"; exit 1; }
done
{ wait "${PIDS[2]}"; wait "${PIDS[3]}"; } 2>/dev/null || true
PIDS=()
[ $((SECONDS - t0)) -lt 60 ] || { echo "the minority took $((SECONDS - t0)) s to exit"; exit 1; }
events_of "$W/minority/metrics.h5" shrink-quorum-lost | grep -q "no quorum" || { echo "no shrink-quorum-lost event"; exit 1; }
echo "OK: a partitioned rank and a minority exit 3, the majority continues"
