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
# Nothing live under the rendezvous: the joiner gives up with one line and exit 3 when the run is over.
mkdir -p "$W/rdzv/shrink" && echo 1 > "$W/rdzv/shrink/shrink.done"
rc=0
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 timeout 60 "$BIN" "${ARGS[@]}" --on-peer-loss shrink --rejoin \
  --rendezvous "file://$W/rdzv" > /dev/null 2> "$W/over.log" || rc=$?
[ $rc -eq 3 ] && grep -q "rejoin: the run ended before rank 1 could join it" "$W/over.log" ||
  { echo "rejoin after the end: exited $rc:"; cat "$W/over.log"; exit 1; }
echo "OK: --on-peer-loss shrink refused where it cannot work"
