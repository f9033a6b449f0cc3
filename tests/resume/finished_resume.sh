#!/usr/bin/env bash
# --resume of a run whose newest checkpoint is of its last step: the run trained every step, so there is nothing to
# resume. It must be refused with one line and exit 2, leaving the finished run's summary.json and metrics.h5 as
# they were, writing no --save-params file and making no new --out directory (a resume that trained no step would
# skip the end-of-run average, leave the ranks different and overwrite the summary with an empty one).
# Usage: finished_resume.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_finished.XXXXXX)
trap 'rm -rf "$W"' EXIT
T=(train --model mlp:width=64 --data synthetic --batch 16 --threads 1 --steps 20 --checkpoint-every 10)
check_refused() {  # LABEL DIR LOG RC
  local label=$1 dir=$2 log=$3 rc=$4
  [ "$rc" -eq 2 ] || { echo "$label: resume exited $rc, expected 2"; cat "$log"; exit 1; }
  grep -q "nothing is left to resume" "$log" || { echo "$label: no reason given:"; cat "$log"; exit 1; }
  (cd "$dir" && sha256sum -c --quiet "$W/$label.sums") || { echo "$label: the finished run's files changed"; exit 1; }
  if ls "$W"/b_"$label"_* > /dev/null 2>&1; then echo "$label: --save-params was written"; exit 1; fi
  [ ! -e "$W/other_$label" ] || { echo "$label: a refused resume left --out $W/other_$label"; exit 1; }
}
for pol in plsgd:h=4 ddp "plsgd:h=4,compress=topk:p=1"; do
  label=$(echo "$pol" | tr -c 'a-z0-9\n' '_')
  "$BIN" launch -n 2 -- "${T[@]}" --policy "$pol" --out "$W/$label" > /dev/null 2>&1
  (cd "$W/$label" && sha256sum summary.json metrics.h5 > "$W/$label.sums")
  rc=0
  "$BIN" launch -n 2 -- "${T[@]}" --policy "$pol" --resume "$W/$label" --save-params "$W/b_${label}_%r.bin" \
    > /dev/null 2> "$W/$label.log" || rc=$?
  check_refused "$label" "$W/$label" "$W/$label.log" $rc
  rc=0
  "$BIN" launch -n 2 -- "${T[@]}" --policy "$pol" --resume "$W/$label" --out "$W/other_$label" \
    > /dev/null 2> "$W/$label.log" || rc=$?
  check_refused "$label" "$W/$label" "$W/$label.log" $rc
done
# One process: exactly one line on stderr.
"$BIN" "${T[@]}" --out "$W/single" > /dev/null 2>&1
(cd "$W/single" && sha256sum summary.json metrics.h5 > "$W/single.sums")
rc=0
"$BIN" "${T[@]}" --resume "$W/single" --save-params "$W/b_single_0.bin" > /dev/null 2> "$W/single.log" || rc=$?
check_refused single "$W/single" "$W/single.log" $rc
[ "$(wc -l < "$W/single.log")" -eq 1 ] || { echo "single: expected one line:"; cat "$W/single.log"; exit 1; }
echo "OK: a finished run is left as it was"
