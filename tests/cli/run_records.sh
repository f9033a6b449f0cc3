#!/usr/bin/env bash
# What a run records of itself. (1) After a --switch, summary.json's "policy" is the policy that ran at the end,
# "policy_at_start" the --policy given, and "switches" lists each switch with its step. (2) Under --on-peer-loss
# shrink, a rank that stops on an agreed anomaly (--anomaly stop, exit 4: every rank stops) ends the job; the
# launcher must not say that the other ranks continue without it. Usage: run_records.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
W=$(mktemp -d /tmp/dd_records.XXXXXX)
trap 'rm -rf "$W"' EXIT
T=(train --model mlp:width=64 --data synthetic --batch 16 --threads 1)
"$BIN" launch -n 2 -- "${T[@]}" --steps 8 --policy ddp --switch 4:plsgd:h=2 --out "$W/sw" > /dev/null 2> "$W/sw.log" ||
  { cat "$W/sw.log"; exit 1; }
/usr/bin/python3 - "$W/sw/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["policy"] == "plsgd:h=2", f"summary.json policy {s['policy']!r}, expected the policy in force at the end"
assert s["policy_at_start"] == "ddp", s.get("policy_at_start")
assert s["switches"] == [{"step": 4, "policy": "plsgd:h=2", "source": "--switch"}], s.get("switches")
assert s["world"] == 2 and s["world_at_end"] == 2, (s["world"], s.get("world_at_end"))
PY
rc=0
"$BIN" launch -n 2 -- "${T[@]}" --steps 8 --policy plsgd:h=2 --on-peer-loss shrink --anomaly stop --inject-nan 3 \
  --out "$W/an" > /dev/null 2> "$W/an.log" || rc=$?
[ $rc -eq 4 ] || { echo "anomaly stop under shrink exited $rc, expected 4"; cat "$W/an.log"; exit 1; }
if grep -q "continue without it" "$W/an.log"; then
  echo "the launcher says the others continue, while every rank stops:"; cat "$W/an.log"; exit 1
fi
echo "OK: the run records what ran"
