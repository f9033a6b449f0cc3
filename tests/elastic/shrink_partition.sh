#!/usr/bin/env bash
# A partition that leaves the rendezvous store reachable (docs/elastic.md "Shrink without restart"): under
# `dreamddp launch -n 3 --netem`, rank 2's link goes down after step 30, while the file store stays readable to every
# rank. The survivors' probes on the ranks' network fence it out of generation 1 (it reports alive, but neither of
# the others reaches it), and it asks to join again from its own process; rank 0 says it cannot reach it (its
# probe runs beside the training, which goes on), the link comes back, rank 0 admits it, and the run ends with
# exit 0: nothing hangs. All three ranks finish with bitwise-equal parameters. Root and `ip netns` only (exit 77:
# skipped). Usage: shrink_partition.sh DREAMDDP_BIN
set -euo pipefail
BIN=$1
[ "$(id -u)" -eq 0 ] || { echo "skipped: not root"; exit 77; }
probe=ddtprobe$$
ip netns add "$probe" 2>/dev/null || { echo "skipped: ip netns add is not permitted here"; exit 77; }
ip netns del "$probe"
W=$(mktemp -d /tmp/dd_partition.XXXXXX)
source "$(dirname "$0")/shrink_lib.sh"
# On any exit: the link back up, the ranks continued, and the launcher asked to end (SIGTERM, so that it tears its
# namespaces down) before the library's cleanup.
NS="" DEV="" LPID=""
end_test() {
  [ -z "$NS" ] || ip -n "$NS" link set dev "$DEV" up 2>/dev/null || true
  if [ -n "$LPID" ] && kill -0 "$LPID" 2>/dev/null; then
    # shellcheck disable=SC2046
    kill -CONT $(ranks_of "$LPID") 2>/dev/null || true
    kill -TERM "$LPID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$LPID" 2>/dev/null || break; sleep 0.1; done
  fi
  cleanup
}
trap end_test EXIT
STEPS=3000
DREAMDDP_PAUSE_AFTER_STEPS=30 timeout -s KILL 240 "$BIN" launch -n 3 --netem 1gbit --iface-prefix ddtq --grace 2 \
  --max-restarts 2 -- train --model mlp:width=64 --data synthetic --batch 8 --steps $STEPS --threads 1 --timeout 2 \
  --policy localsgd:k=4 --eval-every 0 --log-every 1 --on-peer-loss shrink --out "$W/run" --save-params "$W/p%r.bin" \
  > /dev/null 2> "$W/launch.log" &
TPID=$!  # `timeout`, whose child is the launcher
PIDS=($TPID)
for _ in $(seq 1 3000); do
  [ -n "$LPID" ] || LPID=$(pgrep -P $TPID | head -n 1 || true)
  [ -n "$LPID" ] && [ "$(ranks_of "$LPID" | wc -l)" -eq 3 ] && break
  sleep 0.02
done
[ -n "$LPID" ] || { echo "no launcher"; cat "$W/launch.log"; exit 1; }
# shellcheck disable=SC2046
wait_stopped $(ranks_of $LPID) || { cat "$W/launch.log"; exit 1; }
cut=$(rank_pid $LPID 2) || { echo "no rank 2 under the launcher"; exit 1; }
env_of() { tr '\0' '\n' < "/proc/$cut/environ" | sed -n "s/^$1=//p"; }
NS=$(env_of DREAMDDP_NETNS)
DEV=$(env_of GLOO_SOCKET_IFNAME)
[ -n "$NS" ] && [ -n "$DEV" ] || { echo "rank 2 has no namespace ($NS) or interface ($DEV)"; exit 1; }
ip -n "$NS" link set dev "$DEV" down
t0=$SECONDS
# shellcheck disable=SC2046
kill -CONT $(ranks_of $LPID)
for _ in $(seq 1 1200); do
  grep -q "^rejoin: rank 2 asks to join but is not reachable on the ranks' network" "$W/launch.log" && break
  sleep 0.05
done
grep -q "^rejoin: rank 2 asks to join but is not reachable" "$W/launch.log" ||
  { echo "rank 0 never said that it cannot reach rank 2:"; grep -v "^step" "$W/launch.log" | tail -n 20; exit 1; }
ip -n "$NS" link set dev "$DEV" up
RC=0
wait $TPID || RC=$?
PIDS=()
echo "launcher exited $RC, $((SECONDS - t0)) s after the cut"
[ "$RC" -eq 0 ] || { echo "the run did not end cleanly:"; tail -n 40 "$W/launch.log"; exit 1; }
grep -q "fewer than half of the others reached it on the ranks' network" "$W/launch.log" ||
  { echo "rank 2 was not fenced out:"; grep -E "shrink|excluded|rejoin" "$W/launch.log"; exit 1; }
ev=$(events_of "$W/run/metrics.h5" shrink)
echo "$ev" | grep -q "3 -> 2 ranks (generation 1: lost rank 2;" || { echo "events: $ev"; exit 1; }
rj=$(events_of "$W/run/metrics.h5" rejoin)
echo "$rj" | grep -q "2 -> 3 ranks (generation 2: rank 2 joined;" || { echo "rejoin events: $rj"; exit 1; }
cmp "$W/p0.bin" "$W/p1.bin" && cmp "$W/p0.bin" "$W/p2.bin" || { echo "the ranks' parameters differ"; exit 1; }
/usr/bin/python3 - "$W/run/metrics.h5" $STEPS <<'PY'
import h5py, sys
steps = list(h5py.File(sys.argv[1], "r")["steps"]["step"])
assert steps == list(range(int(sys.argv[2]))), steps
PY
printf '%s\n%s\n' "$ev" "$rj" | sed 's/^/event: /'
echo "OK: partitioned rank 2 fenced out by its peers' probes, admitted again once reachable; exit 0"
