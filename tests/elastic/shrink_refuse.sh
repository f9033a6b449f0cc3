#!/usr/bin/env bash
# `train --on-peer-loss shrink` where it cannot work: one line and exit 2 at once, before any rendezvous.
# Usage: shrink_refuse.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_shrink.XXXXXX)
trap 'rm -rf "$W"' EXIT
ARGS=(train --model mlp --data synthetic --batch 8 --steps 5 --threads 1 --eval-samples 64)
check() {  # NAME EXPECTED-TEXT ENV... -- TRAIN-ARGS...
  local name=$1 want=$2 envs=()
  shift 2
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local rc=0
  env "${envs[@]}" timeout 60 "$BIN" "${ARGS[@]}" "$@" > /dev/null 2> "$W/$name.log" || rc=$?
  [ $rc -eq 2 ] || { echo "$name: exited $rc, not 2:"; cat "$W/$name.log"; exit 1; }
  [ "$(wc -l < "$W/$name.log")" -eq 1 ] || { echo "$name: more than one line:"; cat "$W/$name.log"; exit 1; }
  grep -qF -- "$want" "$W/$name.log" || { echo "$name:"; cat "$W/$name.log"; exit 1; }
}
check mpi "--on-peer-loss shrink: the mpi backend has no fault tolerance here: a lost peer ends the job with exit 3" \
  -- --on-peer-loss shrink --backend mpi
check policy "--on-peer-loss shrink: policy threshold decides from per-rank statistics summed over the old ranks, so its state does not carry to a smaller world" \
  -- --on-peer-loss shrink --policy threshold
check switch "--on-peer-loss shrink: policy hier:nodes=2x2 lays its groups over the old ranks" \
  -- --on-peer-loss shrink --switch 3:hier:nodes=2x2
check word "--on-peer-loss 'maybe' is not one of exit, shrink" -- --on-peer-loss maybe
check redis "cannot connect to redis rendezvous 127.0.0.1:9 (is redis-server running and reachable?)" \
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 -- --on-peer-loss shrink --rendezvous redis://127.0.0.1:9/job --timeout 60
check rejoin "--rejoin joins a live world that admits ranks: it needs --on-peer-loss shrink" -- --rejoin
check rejoin_env "--rejoin joins a live world that admits ranks: it needs --on-peer-loss shrink" DREAMDDP_REJOIN=1 --
check heartbeat "--heartbeat finds silent members for the survivors of a loss: it needs --on-peer-loss shrink" \
  -- --heartbeat 1
check heartbeat_short "--heartbeat must be 0 (off) or in [0.1, 86400] seconds" -- --on-peer-loss shrink --heartbeat 0.01
check heartbeat_huge "--heartbeat must be 0 (off) or in [0.1, 86400] seconds" -- --on-peer-loss shrink --heartbeat 1e300
check in_place "--rejoins-in-place rejoins a rank that a shrink excluded: it needs --on-peer-loss shrink" \
  -- --rejoins-in-place 2
check in_place_neg "--rejoins-in-place must be in [0, 1000]" -- --on-peer-loss shrink --rejoins-in-place -3
check in_place_big "--rejoins-in-place must be in [0, 1000]" -- --on-peer-loss shrink --rejoins-in-place 1001
check in_place_huge "the argument ('99999999999') for option '--rejoins-in-place' is invalid" \
  -- --on-peer-loss shrink --rejoins-in-place 99999999999
# Nothing live under the rendezvous: the joiner gives up with one line and exit 3 when the run is over.
mkdir -p "$W/rdzv/shrink" && echo 1 > "$W/rdzv/shrink/shrink.done"
rc=0
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 timeout 60 "$BIN" "${ARGS[@]}" --on-peer-loss shrink --rejoin \
  --rendezvous "file://$W/rdzv" > /dev/null 2> "$W/over.log" || rc=$?
[ $rc -eq 3 ] && grep -q "rejoin: the run ended before rank 1 could join it" "$W/over.log" ||
  { echo "rejoin after the end: exited $rc:"; cat "$W/over.log"; exit 1; }
# Under launch, ranks that all refuse their set-up are a refused set-up (exit 2), not peers lost under shrink.
rc=0
timeout 60 "$BIN" launch -n 2 -- "${ARGS[@]}" --on-peer-loss shrink --policy threshold > /dev/null 2> "$W/launch.log" || rc=$?
[ $rc -eq 2 ] || { echo "launch of refused ranks: exited $rc, not 2:"; cat "$W/launch.log"; exit 1; }
grep -q "dreamddp launch: rank [01] (pid [0-9]*) exited with status 2 (its set-up was refused)" "$W/launch.log" &&
  ! grep -q "continue without it" "$W/launch.log" || { echo "launch of refused ranks:"; cat "$W/launch.log"; exit 1; }
# A spec written to --control-file meets the same refusal as --policy and --switch: ignored, with the same reason,
# while the run goes on (a running job is never ended by its control file).
echo "localsgd:k=4,compress=int8" > "$W/ctl.txt"
rc=0
timeout 120 "$BIN" launch -n 2 -- "${ARGS[@]}" --policy localsgd:k=4 --on-peer-loss shrink \
  --control-file "$W/ctl.txt" --timeout 30 > /dev/null 2> "$W/ctl.log" || rc=$?
[ $rc -eq 0 ] || { echo "control file under shrink: exited $rc:"; cat "$W/ctl.log"; exit 1; }
grep -qF "sync: ignoring control file $W/ctl.txt: --on-peer-loss shrink: policy localsgd:k=4,compress=int8 keeps error-feedback residuals per rank and per shard of the old world, so its state does not carry to a smaller world" "$W/ctl.log" &&
  ! grep -q "sync: policy localsgd:k=4,compress=int8" "$W/ctl.log" || {
  echo "control file under shrink: the refused spec was not ignored:"; cat "$W/ctl.log"; exit 1; }
echo "OK: --on-peer-loss shrink refused where it cannot work"
