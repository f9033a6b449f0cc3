#!/usr/bin/env bash
# `dreamddp launch --max-restarts 1` (docs/elastic.md): rank 1 is killed (SIGKILL from here) mid-run; the launcher
# ends rank 0, restarts both ranks from the newest checkpoint that both hold intact, and the run completes with
# final parameters bitwise equal to an uninterrupted run (the policy's whole state is checkpointed), metrics.h5
# holding every step once and a "restart" event naming the rank and the cause. Then --max-restarts 1 with two
# kills: the launcher gives up, exit 3, naming the rank. Usage: restart.sh DREAMDDP_BIN POLICY
set -euo pipefail
BIN=$1
POLICY=$2
STEPS=30
W=$(mktemp -d /tmp/dd_elastic.XXXXXX)
LPID=
trap '[ -n "$LPID" ] && kill -9 $LPID 2>/dev/null; rm -rf "$W"' EXIT
ARGS=(train --model mlp --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 5 --policy "$POLICY"
      --eval-every 0 --eval-samples 64 --log-every 1 --checkpoint-every 5)
"$BIN" launch -n 2 -- "${ARGS[@]}" --out "$W/ref" --save-params "$W/ref/p%r.bin" > /dev/null 2> "$W/ref.log" ||
  { cat "$W/ref.log"; exit 1; }

# Waits until LOG has its N-th line matching PATTERN (the launcher must still run); then SIGKILLs rank 1.
kill_rank1_at() {  # LOG PATTERN N
  for _ in $(seq 1 1200); do
    if [ "$(grep -c -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ]; then break; fi
    kill -0 $LPID 2>/dev/null || { echo "launcher ended before '$2' x$3:"; cat "$1"; exit 1; }
    sleep 0.1
  done
  for p in $(pgrep -P $LPID); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx RANK=1; then kill -9 $p; return; fi
  done
  echo "no rank 1 under the launcher"; exit 1
}

"$BIN" launch -n 2 --max-restarts 1 -- "${ARGS[@]}" --out "$W/run" --save-params "$W/run/p%r.bin" \
  > /dev/null 2> "$W/run.log" &
LPID=$!
kill_rank1_at "$W/run.log" "^step 1[2-4]/$STEPS" 1  # after the checkpoint of step 9 (14 if the kill is slow)
rc=0
wait $LPID || rc=$?
LPID=
[ $rc -eq 0 ] || { echo "launcher exited $rc after one kill:"; cat "$W/run.log"; exit 1; }
grep -Eq "^dreamddp launch: restart 1 of 1: rank 1 was killed by signal 9 \(Killed\); all 2 ranks from the checkpoint after step (9|14)$" "$W/run.log" ||
  { cat "$W/run.log"; exit 1; }
for r in 0 1; do
  cmp "$W/ref/p$r.bin" "$W/run/p$r.bin" || { echo "rank $r parameters differ from the uninterrupted run"; exit 1; }
done
/usr/bin/python3 - "$W/run/metrics.h5" $STEPS <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1], "r")
steps = list(f["steps"]["step"])
assert steps == list(range(int(sys.argv[2]))), steps
ev = f["events"]
dec = lambda v: v.decode() if isinstance(v, bytes) else str(v)
rows = [(int(s), dec(k), dec(d)) for s, k, d in zip(ev["step"], ev["kind"], ev["detail"]) if dec(k) == "restart"]
want = "restart 1 of 1: rank 1 was killed by signal 9 (Killed); all 2 ranks from the checkpoint after step %d"
assert len(rows) == 1 and rows[0][0] in (9, 14) and rows[0][2] == want % rows[0][0], rows
PY

# Two kills, one restart allowed: exit 3 naming the rank and the cause.
"$BIN" launch -n 2 --max-restarts 1 -- "${ARGS[@]}" --out "$W/twice" > /dev/null 2> "$W/twice.log" &
LPID=$!
kill_rank1_at "$W/twice.log" "^step 7/$STEPS" 1
kill_rank1_at "$W/twice.log" "^step 7/$STEPS" 2  # the restart began at step 5 (checkpoint after 4) or at 0
rc=0
wait $LPID || rc=$?
LPID=
[ $rc -eq 3 ] || { echo "launcher exited $rc, not 3, after two kills:"; cat "$W/twice.log"; exit 1; }
grep -q "dreamddp launch: rank 1 was killed by signal 9 (Killed); no restarts left (1 of 1 used): giving up" "$W/twice.log" ||
  { cat "$W/twice.log"; exit 1; }
echo "OK: $POLICY restarted after a killed rank, bitwise equal to the uninterrupted run"
