#!/usr/bin/env bash
# dreamddp:profile=DIR measured on another model or another world size (DIR/meta.json) is refused with one line
# naming what differs, and leaves no --out directory; the matching profile is taken.
# Usage: profile_fits.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_profit.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/p"
echo '{"fc1": 0.001, "fc2": 0.002, "fc3": 0.003, "fc4": 0.004}' > "$W/p/bp.json"
echo '{"fc1": 0.004, "fc2": 0.003, "fc3": 0.002, "fc4": 0.001}' > "$W/p/comm.json"
T=(train --model mlp:width=64 --data synthetic --batch 16 --threads 1 --steps 2 --policy "dreamddp:h=4,profile=$W/p")
refused() {  # LABEL WHAT N... : the run must exit 2 with a line holding WHAT, and leave no --out
  local label=$1 what=$2 rc=0
  shift 2
  "$@" --out "$W/out_$label" > /dev/null 2> "$W/$label.log" || rc=$?
  [ $rc -eq 2 ] || { echo "$label: exit $rc, expected 2"; cat "$W/$label.log"; exit 1; }
  grep -q -- "$what" "$W/$label.log" || { echo "$label: no line naming $what:"; cat "$W/$label.log"; exit 1; }
  [ ! -e "$W/out_$label" ] || { echo "$label: left its --out"; exit 1; }
}
echo '{"model": "mlp:width=32", "world": 2}' > "$W/p/meta.json"
refused model "model mlp:width=32 (this run: mlp:width=64)" "$BIN" "${T[@]}"
[ "$(wc -l < "$W/model.log")" -eq 1 ] || { echo "model: expected one line:"; cat "$W/model.log"; exit 1; }
echo '{"model": "mlp:width=64", "world": 3}' > "$W/p/meta.json"
refused world "3 rank(s) (this run: 2)" "$BIN" launch -n 2 -- "${T[@]}"
echo '{"model": "mlp:width=64", "world": 2}' > "$W/p/meta.json"
"$BIN" launch -n 2 -- "${T[@]}" --out "$W/ok" > /dev/null 2> "$W/ok.log" || { cat "$W/ok.log"; exit 1; }
echo "OK: a profile of another run is refused"
