#!/usr/bin/env bash
# Every kind of run reruns from its metrics.h5: analysis/rerun_command.py's command for one-process runs (they
# record backend "none", which train refuses as an option, and float32 options such as the default --lr 0.05,
# which must print as 0.05) and for `launch -n 2` runs of every policy ends with bitwise equal parameters on every
# rank. dreamddp reads a fixed profile (its self-profile is a timing, not a function of the run's inputs), or
# profiles itself and the rerun replays its recorded decisions (replay=); a shrink run reruns under shrink, and a
# run that kept subnormals (--subnormals keep) reruns keeping them, a bf16 run (--precision bf16, on a CPU with
# bf16 instructions) in bf16.
# WANT=TEXT before `check`: the rerun command must also contain TEXT.
# Usage: rerun_kinds_test.sh DREAMDDP_BIN RERUN_COMMAND_PY
set -euo pipefail
BIN=$1
PY=$2
W=$(mktemp -d /tmp/dd_rerun_kinds.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/prof"
echo '{"fc1": 0.004, "fc2": 0.002, "fc3": 0.002, "fc4": 0.001}' > "$W/prof/bp.json"
echo '{"fc1": 0.030, "fc2": 0.010, "fc3": 0.010, "fc4": 0.001}' > "$W/prof/comm.json"
TINY=(--model mlp:width=64 --data synthetic --batch 4 --steps 6 --threads 1 --eval-samples 8)
n=0 fails=0
# check NRANKS EXTRA... : the original run, its rerun from metrics.h5, parameters compared on every rank.
check() {
  local ranks=$1
  shift
  n=$((n + 1))
  local a=$W/a$n b=$W/b$n head=("$BIN" train)
  [ "$ranks" -gt 1 ] && head=("$BIN" launch -n "$ranks" -- train)
  if ! "${head[@]}" "${TINY[@]}" "$@" --out "$a" --save-params "$a/p%r.bin" > "$a.log" 2>&1; then
    echo "FAIL: original run ($ranks rank(s), $*) did not run:"; tail -3 "$a.log"; fails=$((fails + 1)); return
  fi
  local cmd
  cmd=$(/usr/bin/python3 "$PY" "$a/metrics.h5" --bin "$BIN" --out "$b" --save-params "$b/p%r.bin")
  case $cmd in *" --backend none"*|*"0000000"*) echo "FAIL: $cmd"; fails=$((fails + 1)); return ;; esac
  if [ -n "${WANT:-}" ] && [[ $cmd != *"$WANT"* ]]; then
    echo "FAIL: the rerun command of ($ranks rank(s), $*) lacks '$WANT': $cmd"; fails=$((fails + 1)); return
  fi
  if ! eval "$cmd" > "$b.log" 2>&1; then
    echo "FAIL: rerun of ($ranks rank(s), $*) exits non-zero: $cmd"; tail -3 "$b.log"; fails=$((fails + 1)); return
  fi
  local r
  for ((r = 0; r < ranks; ++r)); do
    if ! cmp -s "$a/p$r.bin" "$b/p$r.bin"; then
      echo "FAIL: rank $r of ($ranks rank(s), $*): the rerun's parameters differ ($cmd)"; fails=$((fails + 1)); return
    fi
  done
  echo "ok: $ranks rank(s) $*"
}
# One process: the defaults (lr 0.05 as float32, no backend), other float32 values, a policy.
check 1
check 1 --lr 0.03 --momentum 0.85 --weight-decay 0.0001 --optimizer adamw
check 1 --policy localsgd:k=2 --nesterov --staleness-lr 0.7
for p in ddp localsgd:k=2 plsgd:h=2 "dreamddp:h=2,profile=$W/prof,trial=0" fixed:in=2,mid=3,out=1 \
         threshold:thr=0.2 autothreshold staleness:t=2 hybrid hier:nodes=2x1,profile_steps=2 \
         plsgd:h=2+staleness:t=3 localsgd:k=2,delay=1; do
  check 2 --policy "$p"
done
check 2 --policy ddp --switch 3:localsgd:k=2 --lr 0.1
WANT="replay=$W/a$((n + 1))" check 2 --policy dreamddp:h=2,profile_steps=2,trial=0
WANT="--switch 1:dreamddp:h=2,profile_steps=2,trial=0,replay=$W/a$((n + 1))" \
  check 2 --switch 1:dreamddp:h=2,profile_steps=2,trial=0
WANT="--on-peer-loss shrink" check 2 --policy localsgd:k=2 --on-peer-loss shrink
WANT="--subnormals keep" check 1 --subnormals keep
if "$BIN" train "${TINY[@]}" --precision bf16 > /dev/null 2>&1; then
  WANT="--precision bf16" check 1 --precision bf16
fi
echo "$n kinds of run, $fails failed"
[ "$fails" -eq 0 ]
