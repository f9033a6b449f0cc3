# Helpers of the shrink tests (sourced): N ranks started by hand with a file:// rendezvous (no launcher to take the
# others down when one dies), each rank's pid in PIDS[r], its stderr in $W/<tag>.<r>.log. The EXIT trap SIGKILLs
# whatever is left and removes the directory. Needs BIN and W. The rendezvous: $RDZV_URL when set (a redis://
# one), else file://$W/rdzv.<tag>.
source "$(dirname "${BASH_SOURCE[0]}")/../common/pause.sh"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
start_ranks() {  # TAG N TRAIN-ARGS...
  local tag=$1 n=$2
  shift 2
  PIDS=()
  for ((r = 0; r < n; ++r)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n \
      "$BIN" "$@" --rendezvous "${RDZV_URL:-file://$W/rdzv.$tag}" > /dev/null 2> "$W/$tag.$r.log" &
    PIDS+=($!)
  done
}
# Waits (bounded) until LOG has a line matching PATTERN; fails if rank 0 ended before.
wait_for_line() {  # LOG PATTERN
  for _ in $(seq 1 1200); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "${PIDS[0]}" 2>/dev/null || { echo "rank 0 ended before '$2':"; cat "$1"; exit 1; }
    sleep 0.05
  done
  echo "no '$2' in $1 within 60 s:"; cat "$1"; exit 1
}
# Waits for rank R; its exit status in RC (not in a subshell: only this shell can wait for its children).
status_of() {  # R
  RC=0
  wait "${PIDS[$1]}" || RC=$?
}
# The rows of /events of KIND in a metrics.h5, one "step<TAB>detail" line each.
events_of() {  # H5 KIND
  /usr/bin/python3 - "$1" "$2" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1], "r")
ev = f["events"]
dec = lambda v: v.decode() if isinstance(v, bytes) else str(v)
for s, k, d in zip(ev["step"], ev["kind"], ev["detail"]):
    if dec(k) == sys.argv[2]:
        print("%d\t%s" % (int(s), dec(d)))
PY
}
# With DREAMDDP_PAUSE_AFTER_STEPS set for the ranks: waits until every rank in PIDS has stopped itself, SIGKILLs
# the ranks named (by index into PIDS) and lets the others continue. The loss happens at an exact step.
kill_paused() {  # R...
  wait_stopped "${PIDS[@]}" || { dump_logs; exit 1; }
  local r keep=()
  for r in "$@"; do kill -9 "${PIDS[$r]}"; done
  for r in "${!PIDS[@]}"; do [[ " $* " == *" $r "* ]] || keep+=("${PIDS[$r]}"); done
  kill -CONT "${keep[@]}"
}
# The last lines of every log of the test, for a failure's message.
dump_logs() {
  local f
  for f in "$W"/*.log; do [ -e "$f" ] && { echo "== $f"; tail -n 12 "$f"; }; done
}
