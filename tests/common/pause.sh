# Sourced by fault tests: their side of DREAMDDP_PAUSE_AFTER_STEPS (core/train/pause_points.h), which makes every
# rank stop itself (SIGSTOP) after an exact step.
# wait_stopped PID...: waits (bounded, 60 s) until every PID is stopped; fails when one ends first.
wait_stopped() {
  local p st all
  for _ in $(seq 1 3000); do
    all=1
    for p in "$@"; do
      st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
      case $st in
        T|t) ;;
        ""|Z|X) echo "pid $p ended before its pause"; return 1 ;;
        *) all=0 ;;
      esac
    done
    [ $all -eq 1 ] && return 0
    sleep 0.02
  done
  echo "pids $* were not all stopped within 60 s"
  return 1
}
# ranks_of LAUNCHER_PID: the pids of the ranks `dreamddp launch` started (its children), one per line.
ranks_of() { pgrep -P "$1"; }
# rank_pid LAUNCHER_PID R: the pid of the launcher's child with RANK=R in its environment.
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2"; then echo "$p"; return 0; fi
  done
  return 1
}
# launch_killed_after N STEP LOG CMD...: runs CMD (a `dreamddp launch -n N -- ...` command line) with every rank
# pausing after STEP, its stderr in LOG; once all N ranks have stopped, SIGKILLs them (a kill -9 of the whole job at
# an exact step). Fails, printing LOG, when the ranks do not all reach the pause.
launch_killed_after() {
  local n=$1 step=$2 log=$3 lpid ranks
  shift 3
  DREAMDDP_PAUSE_AFTER_STEPS=$step "$@" > /dev/null 2> "$log" &
  lpid=$!
  for _ in $(seq 1 3000); do [ "$(ranks_of $lpid | wc -l)" -eq "$n" ] && break; sleep 0.02; done
  ranks=$(ranks_of $lpid)
  # shellcheck disable=SC2086
  wait_stopped $ranks || { cat "$log"; return 1; }
  grep -q "^step $step/" "$log" || { echo "paused, but not after step $step:"; cat "$log"; return 1; }
  # shellcheck disable=SC2086
  kill -9 $ranks
  wait $lpid 2>/dev/null || true
}
