#!/usr/bin/env bash
# Ctrl-C to a `dreamddp launch` that a non-interactive script started in the background: such a shell starts
# background commands with SIGINT ignored, and an ignored disposition survives exec. The ranks must not inherit it
# (they would train on after the launcher forwarded the SIGINT). Every rank pauses after step 2 (exact, no sleep);
# while paused, each rank's ignored-signal mask must leave SIGINT out; then the launcher's SIGINT must end the job
# (exit 130) long before its last step. Usage: sigint_from_script.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_sigint.XXXXXX)
trap 'pkill -9 -f "$W" 2>/dev/null || true; rm -rf "$W"' EXIT
source "$(dirname "$0")/../common/pause.sh"
# Non-interactive: the background launcher gets SIGINT and SIGQUIT ignored, as from any script.
set +m
DREAMDDP_PAUSE_AFTER_STEPS=2 "$BIN" launch -n 2 -- train --model mlp:width=64 --data synthetic --batch 16 \
  --threads 1 --steps 100000 --log-every 1 --out "$W/run" > /dev/null 2> "$W/log" &
L=$!
for _ in $(seq 1 3000); do [ "$(ranks_of $L | wc -l)" -eq 2 ] && break; sleep 0.02; done
RANKS=$(ranks_of $L)
# shellcheck disable=SC2086
wait_stopped $RANKS || { cat "$W/log"; exit 1; }
launcher_ign=$(awk '/^SigIgn/ {print $2}' /proc/$L/status)
(( (16#$launcher_ign >> 1) & 1 )) || { echo "setup: the launcher does not have SIGINT ignored (mask $launcher_ign)"; exit 1; }
for p in $RANKS; do
  ign=$(awk '/^SigIgn/ {print $2}' /proc/$p/status)
  if (( (16#$ign >> 1) & 1 )); then echo "rank pid $p ignores SIGINT (SigIgn $ign): inherited from the launcher"; exit 1; fi
done
kill -INT $L
# shellcheck disable=SC2086
kill -CONT $RANKS
rc=0
wait $L || rc=$?
[ $rc -eq 130 ] || { echo "launcher exited $rc, expected 130"; cat "$W/log"; exit 1; }
if grep -q "^step 1000/" "$W/log"; then echo "the ranks trained on after SIGINT"; cat "$W/log"; exit 1; fi
grep -q "got SIGINT" "$W/log" || { echo "no forwarding line:"; cat "$W/log"; exit 1; }
echo "OK: SIGINT from a script ends the ranks"
