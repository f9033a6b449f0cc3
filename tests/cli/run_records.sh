#!/usr/bin/env bash
# What a run records of itself. (1) After a --switch, summary.json's "policy" is the policy that ran at the end,
# "policy_at_start" the --policy given, and "switches" lists each switch with its step. (2) Under --on-peer-loss
# shrink, a rank that stops on an agreed anomaly (--anomaly stop, exit 4: every rank stops) ends the job; the
# launcher must not say that the other ranks continue without it. (3) --last-period: by default (local) a periodic
# policy's last period makes no layer averages, says so and records "local"; "scheduled" makes them and records it;
# another value is refused with one line, exit 2, and leaves no run directory. Usage: run_records.sh DREAMDDP_BIN
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
for lp in default scheduled; do
  extra=(); [ $lp = default ] || extra=(--last-period $lp)
  "$BIN" launch -n 2 -- "${T[@]}" --steps 8 --policy plsgd:h=2 "${extra[@]}" --out "$W/lp_$lp" > "$W/lp_$lp.log" 2>&1 ||
    { cat "$W/lp_$lp.log"; exit 1; }
done
grep -q "sync: steps 6-7, the last period" "$W/lp_default.log" ||
  { echo "no line for the last period by default:"; cat "$W/lp_default.log"; exit 1; }
if grep -q "the last period" "$W/lp_scheduled.log"; then
  echo "--last-period scheduled still leaves the last period's averages:"; cat "$W/lp_scheduled.log"; exit 1
fi
/usr/bin/python3 - "$W/lp_default/summary.json" "$W/lp_scheduled/summary.json" <<'PY'
import json, sys
d, s = (json.load(open(p)) for p in sys.argv[1:])
assert d["last_period"] == "local" and s["last_period"] == "scheduled", (d.get("last_period"), s.get("last_period"))
assert d["comm_bytes"] < s["comm_bytes"], ("the last period's averages were made anyway", d["comm_bytes"], s["comm_bytes"])
PY
rc=0
"$BIN" "${T[@]}" --steps 8 --policy plsgd:h=2 --last-period sometimes --out "$W/lp_bad" > "$W/lp_bad.log" 2>&1 ||
  rc=$?
[ $rc -eq 2 ] || { echo "--last-period sometimes exited $rc, expected 2"; cat "$W/lp_bad.log"; exit 1; }
[ "$(wc -l < "$W/lp_bad.log")" -eq 1 ] && grep -q "last-period 'sometimes' is not one of local, scheduled" "$W/lp_bad.log" ||
  { echo "expected one line naming the value:"; cat "$W/lp_bad.log"; exit 1; }
[ ! -e "$W/lp_bad" ] || { echo "a refused run left its directory"; exit 1; }
echo "OK: the run records what ran"
