#!/usr/bin/env bash
# An impossible resume on another world size is refused by EVERY rank on its own, before the rendezvous: each of 3
# ranks started by hand (no launcher to take the others down) exits 2 with one line naming both world sizes, and
# none of them reaches the rendezvous (its file store directory is never created; the timeout is 60 s, and the
# three refusals must be done well within it even on a loaded machine). Cases: a policy whose state does not map (threshold), another model.
# Usage: refuse_world.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_elastic.XXXXXX)
trap 'rm -rf "$W"' EXIT
ARGS=(train --data synthetic --batch 8 --threads 1 --eval-every 0 --eval-samples 64 --log-every 0)
"$BIN" launch -n 2 -- "${ARGS[@]}" --model mlp --policy threshold --timeout 5 --steps 5 --checkpoint-every 5 \
  --out "$W/two" > /dev/null 2> "$W/two.log" || { cat "$W/two.log"; exit 1; }
check() {  # NAME EXPECTED-TEXT TRAIN-ARGS...
  local name=$1 want=$2
  shift 2
  local t0=$SECONDS pids=()
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 DREAMDDP_RENDEZVOUS="file://$W/rdzv.$name" \
      "$BIN" "${ARGS[@]}" "$@" --timeout 60 --steps 20 --resume "$W/two" --out "$W/out.$name" \
      > /dev/null 2> "$W/$name.$r.log" &
    pids+=($!)
  done
  for r in 0 1 2; do
    rc=0
    wait "${pids[$r]}" || rc=$?
    [ $rc -eq 2 ] || { echo "$name: rank $r exited $rc, not 2:"; cat "$W/$name.$r.log"; exit 1; }
    [ "$(wc -l < "$W/$name.$r.log")" -eq 1 ] || { echo "$name: rank $r printed more than one line:"; cat "$W/$name.$r.log"; exit 1; }
    grep -q "cannot resume a 2-rank checkpoint on 3 rank(s): $want" "$W/$name.$r.log" ||
      { echo "$name: rank $r:"; cat "$W/$name.$r.log"; exit 1; }
  done
  [ ! -e "$W/rdzv.$name" ] || { echo "$name: a rank reached the rendezvous before refusing"; exit 1; }
  [ $((SECONDS - t0)) -lt 45 ] || { echo "$name: refusal took $((SECONDS - t0)) s (a rank waited for the rendezvous)"; exit 1; }
  [ ! -e "$W/out.$name" ] || { echo "$name: --out was created before the refusal"; exit 1; }
}
check policy "policy threshold decides from per-rank statistics" --model mlp --policy threshold
check model "it is from another run configuration: model (checkpoint: model=mlp, now: model=cnn)" --model cnn --policy threshold
echo "OK: impossible resumes refused on every rank"
