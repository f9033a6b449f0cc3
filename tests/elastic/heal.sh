#!/usr/bin/env bash
# Healing from a live peer (docs/elastic.md "Rejoin"): 3 ranks, rank 2 killed with SIGKILL after step 20; the 2
# survivors shrink and go on; rank 2, started again by hand with --rejoin, asks to join.
#   equal:  it receives its state from rank 0 in messages of at most 1000 bytes (a layer spans many of them) and
#           joins at a period boundary; what it received (parameters, buffers, AdamW moments and step counts) is
#           bitwise what rank 0 sent, the rank-0 line and the /events row report the bytes, the messages and the
#           time from the loss to a full world, and all 3 end with bitwise equal parameters.
#   lost:   the joiner is killed in the middle of its transfer (it stops itself after its 5th message): the
#           members go on without it (a second shrink) and finish with bitwise equal parameters; never a hang.
#   refuse: the world runs dreamddp with a profile file; joiners started with another model, another policy, and
#           the same policy once the profile's files changed on disk, are refused with one line and exit 2 before
#           the world grows; the 2 members finish.
#   donor:  4 ranks, rank 3 the one killed and started again; rank 0, the member that sends the state, is killed
#           in the middle of the transfer: the joiner exits 3 with one line, ranks 1 and 2 go on; the joiner,
#           started once more, is healed from rank 1 (a retry from another member), and ranks 1..3 end bitwise
#           equal.
# Usage: heal.sh DREAMDDP_BIN MODE
set -euo pipefail
BIN=$1
MODE=$2
STEPS=120
N=3
[ "$MODE" = donor ] && N=4
J=$((N - 1))  # the rank killed and started again
W=$(mktemp -d /tmp/dd_heal.XXXXXX)
source "$(dirname "$0")/shrink_lib.sh"
POLICY=localsgd:k=4
PAUSES=20,30,60
if [ "$MODE" = refuse ]; then
  mkdir -p "$W/prof"
  echo '{"fc1": 0.001, "fc2": 0.003, "fc3": 0.003, "fc4": 0.0001}' > "$W/prof/bp.json"
  echo '{"fc1": 0.004, "fc2": 0.005, "fc3": 0.005, "fc4": 0.001}' > "$W/prof/comm.json"
  POLICY="dreamddp:h=4,profile=$W/prof,trial=0"
  PAUSES=20,30,60,90
fi
ARGS=(train --model mlp:width=64 --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 3
      --policy "$POLICY" --optimizer adamw --lr 0.001 --eval-every 0 --eval-samples 64 --log-every 1
      --on-peer-loss shrink --out "$W/run" --save-params "$W/p%r.bin")
LOG0=$W/heal.0.log
joiner() {  # LOG [OPTION VALUE]: rank J started again by hand (pid in PIDS[J]), OPTION's value replaced by VALUE
  local log=$1 opt=${2:-} val=${3:-} a=() i
  for ((i = 0; i < ${#ARGS[@]}; ++i)); do
    a+=("${ARGS[$i]}")
    [ -n "$opt" ] && [ "${ARGS[$i]}" = "$opt" ] && { a+=("$val"); i=$((i + 1)); }
  done
  RANK=$J WORLD_SIZE=$N LOCAL_RANK=$J LOCAL_WORLD_SIZE=$N \
    "$BIN" "${a[@]}" --rejoin --rendezvous "file://$W/rdzv.heal" > /dev/null 2> "$log" &
  PIDS[$J]=$!
}
joiner_asks() {  # LOG: waits (bounded) until the joiner has posted its request
  for _ in $(seq 1 1200); do
    grep -q "asks to join" "$1" 2>/dev/null && return 0
    kill -0 "${PIDS[$J]}" 2>/dev/null || { echo "the joiner ended before it asked:"; cat "$1"; exit 1; }
    sleep 0.05
  done
  echo "the joiner did not ask within 60 s:"; cat "$1"; exit 1
}
t0=$SECONDS
# Rank 0 decides the largest message of a transfer (every rank cuts the state alike); rank 0 and the joiner dump
# what they sent and received.
export DREAMDDP_HEAL_CHUNK_BYTES=1000
[ "$MODE" = equal ] && export DREAMDDP_HEAL_DUMP=$W/heal
# Every rank stops itself after step 20 (rank J is lost there), the survivors again after step 30 and 60 (and 90),
# once shrunk, while a joiner starts.
DREAMDDP_PAUSE_AFTER_STEPS=$PAUSES start_ranks heal $N "${ARGS[@]}"
kill_paused $J
{ wait "${PIDS[$J]}"; } 2>/dev/null || true
wait_stopped "${PIDS[@]:0:$J}" || { dump_logs; exit 1; }
grep -q "^shrink: $N -> $J ranks " "$LOG0" || { echo "no shrink by step 30:"; cat "$LOG0"; exit 1; }
members_finish() {
  for r in 0 1; do
    status_of $r
    [ "$RC" -eq 0 ] || { echo "rank $r exited $RC:"; dump_logs; exit 1; }
  done
  cmp "$W/p0.bin" "$W/p1.bin" || { echo "the members' parameters differ"; exit 1; }
}
case $MODE in
equal)
  joiner "$W/joiner.log"
  joiner_asks "$W/joiner.log"
  kill -CONT "${PIDS[0]}" "${PIDS[1]}"
  wait_stopped "${PIDS[0]}" "${PIDS[1]}" || { dump_logs; exit 1; }  # step 60
  kill -CONT "${PIDS[0]}" "${PIDS[1]}"
  status_of 2
  [ "$RC" -eq 0 ] || { echo "the joiner exited $RC:"; cat "$W/joiner.log"; exit 1; }
  members_finish
  cmp "$W/p0.bin" "$W/p2.bin" || { echo "the healed rank's parameters differ from rank 0's"; exit 1; }
  [ -s "$W/heal.sent.0" ] && [ -s "$W/heal.received.2" ] || { echo "no dump of the transfer"; ls "$W"; exit 1; }
  cmp "$W/heal.sent.0" "$W/heal.received.2" || { echo "what the joiner received differs from what rank 0 sent"; exit 1; }
  line=$(grep -E "^rejoin: 2 -> 3 ranks \(generation 2: rank 2 joined; ranks 0, 1, 2 now 0..2\): admitted in [0-9.]+ s, of which [0-9.]+ s the state's transfer \([0-9]+ bytes in [0-9]+ messages of at most 1000 bytes\); .*full world again [0-9.]+ s after the loss \(from the start of step [0-9]+," "$LOG0") ||
    { echo "no rejoin line on rank 0:"; cat "$LOG0"; exit 1; }
  echo "$line"
  messages=$(echo "$line" | sed -E 's/.* ([0-9]+) messages of .*/\1/')
  bytes=$(echo "$line" | sed -E 's/.*transfer \(([0-9]+) bytes.*/\1/')
  # mlp:width=64: 784*64+64 + 64*64+64 + 64*64+64 + 64*10+10 parameters, AdamW's two moments each: three times that.
  [ "$bytes" -eq $((3 * 4 * (784 * 64 + 64 + 2 * (64 * 64 + 64) + 64 * 10 + 10))) ] || { echo "bytes $bytes"; exit 1; }
  [ "$messages" -gt 100 ] || { echo "$messages messages: not layer by layer in bounded messages"; exit 1; }
  ev=$(events_of "$W/run/metrics.h5" rejoin)
  [ "$(echo "$ev" | grep -c .)" -eq 1 ] && echo "$ev" | grep -q "full world again" || { echo "rejoin events: $ev"; exit 1; }
  step=$(echo "$ev" | cut -f1)
  [ $((step % 4)) -eq 0 ] || { echo "joined at step $step, not at a period boundary of localsgd:k=4"; exit 1; }
  echo "OK: healed from rank 0 in $messages messages ($bytes bytes) at step $step; 3 ranks bitwise equal"
  ;;
lost)
  DREAMDDP_PAUSE_IN_HEAL=5 joiner "$W/joiner.log"
  joiner_asks "$W/joiner.log"
  kill -CONT "${PIDS[0]}" "${PIDS[1]}"
  wait_stopped "${PIDS[2]}" || { dump_logs; cat "$W/joiner.log"; exit 1; }
  kill -9 "${PIDS[2]}"
  { wait "${PIDS[2]}"; } 2>/dev/null || true
  wait_stopped "${PIDS[0]}" "${PIDS[1]}" || { dump_logs; exit 1; }  # step 60
  kill -CONT "${PIDS[0]}" "${PIDS[1]}"
  members_finish
  grep -E "^shrink: 2 -> 2 ranks \(generation 3: lost joining rank 2; ranks 0, 1 now 0..1\)" "$LOG0" ||
    { echo "the members did not go on without the joiner:"; cat "$LOG0"; exit 1; }
  ! grep -q "^rejoin: " "$LOG0" || { echo "a rejoin was reported:"; cat "$LOG0"; exit 1; }
  echo "OK: the joiner lost in its transfer; the 2 members went on without it, bitwise equal"
  ;;
refuse)
  for bad in model policy profile; do
    case $bad in
      model) joiner "$W/joiner.log" --model mlp:width=32 ;;
      policy) joiner "$W/joiner.log" --policy "dreamddp:h=8,profile=$W/prof,trial=0" ;;
      profile)  # the same command; the profile was measured again since the world started
        echo '{"fc1": 0.002, "fc2": 0.003, "fc3": 0.003, "fc4": 0.0001}' > "$W/prof/bp.json"
        joiner "$W/joiner.log" ;;
    esac
    joiner_asks "$W/joiner.log"
    kill -CONT "${PIDS[0]}" "${PIDS[1]}"
    status_of 2
    [ "$RC" -eq 2 ] || { echo "the joiner ($bad) exited $RC:"; cat "$W/joiner.log"; exit 1; }
    tail -n 1 "$W/joiner.log" | grep -E "^dreamddp train: error: rejoin: the live world refused rank 2: not the live world's configuration: $bad \(live world: " ||
      { echo "joiner ($bad):"; cat "$W/joiner.log"; exit 1; }
    [ $bad = profile ] || wait_stopped "${PIDS[0]}" "${PIDS[1]}" || { dump_logs; exit 1; }
  done
  members_finish
  [ "$(grep -c "^rejoin: refused rank 2: " "$LOG0")" -eq 3 ] || { echo "rank 0:"; cat "$LOG0"; exit 1; }
  [ "$(events_of "$W/run/metrics.h5" rejoin-refused | grep -c .)" -eq 3 ] || { echo "rejoin-refused events"; exit 1; }
  ! grep -q "^rejoin: 2 -> " "$LOG0" || { echo "the world grew:"; cat "$LOG0"; exit 1; }
  echo "OK: joiners of another model, another policy and another profile refused; the 2 members finished"
  ;;
donor)
  DREAMDDP_PAUSE_IN_HEAL=5 joiner "$W/joiner.log"
  joiner_asks "$W/joiner.log"
  kill -CONT "${PIDS[0]}" "${PIDS[1]}" "${PIDS[2]}"
  wait_stopped "${PIDS[3]}" || { dump_logs; cat "$W/joiner.log"; exit 1; }
  kill -9 "${PIDS[0]}"
  kill -CONT "${PIDS[3]}"
  { wait "${PIDS[0]}"; } 2>/dev/null || true
  status_of 3
  [ "$RC" -eq 3 ] || { echo "the joiner whose donor was lost exited $RC:"; cat "$W/joiner.log"; exit 1; }
  tail -n 1 "$W/joiner.log" | grep -E "^dreamddp train: error: rejoin: a peer was lost while rank 3 received its state \([0-9]+ messages, [0-9]+ bytes so far\); the live world goes on without it: " ||
    { echo "joiner:"; cat "$W/joiner.log"; exit 1; }
  wait_stopped "${PIDS[1]}" "${PIDS[2]}" || { dump_logs; exit 1; }  # step 60
  LOG1=$W/heal.1.log  # rank 1 is rank 0 of the world now
  grep -E "^shrink: 3 -> 2 ranks \(generation 3: lost rank 0 and joining rank 3; ranks 1, 2 now 0..1\)" "$LOG1" ||
    { echo "ranks 1 and 2 did not go on without rank 0 and the joiner:"; cat "$LOG1"; exit 1; }
  joiner "$W/joiner2.log"  # the retry
  joiner_asks "$W/joiner2.log"
  kill -CONT "${PIDS[1]}" "${PIDS[2]}"
  for r in 1 2 3; do
    status_of $r
    [ "$RC" -eq 0 ] || { echo "rank $r exited $RC:"; dump_logs; exit 1; }
  done
  for r in 2 3; do cmp "$W/p1.bin" "$W/p$r.bin" || { echo "rank $r's parameters differ from rank 1's"; exit 1; }; done
  grep -E "^rejoin: 2 -> 3 ranks \(generation 4: rank 3 joined; ranks 1, 2, 3 now 0..2\): admitted in " "$LOG1" ||
    { echo "no rejoin from rank 1:"; cat "$LOG1"; exit 1; }
  echo "OK: the donor lost in the transfer; the joiner exited 3, ranks 1 and 2 went on, the retry healed it from rank 1"
  ;;
*) echo "heal.sh: unknown mode $MODE"; exit 2 ;;
esac
echo "done after $((SECONDS - t0)) s"
