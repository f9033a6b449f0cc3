# shellcheck shell=bash
# experiments/lib/hosts_bench.sh: what the benchmarks on two emulated hosts share (hosts_allreduce.sh,
# hosts_policies.sh): the usage check, the hosts themselves (tests/cluster/hosts.sh, redis on h0, torn down on any
# exit) and the provenance lines of the results file. Sourced as
#   . "$(dirname "${BASH_SOURCE[0]}")/lib/hosts_bench.sh" SCRIPT_NAME USAGE "$@"
# which prints USAGE and exits 0 for -h/--help, 2 for another option or no arguments; then sets `src` (the
# repository) and `hosts` (the emulation script).

HB_NAME=${1:?"hosts_bench.sh: source it with the script's name, its usage line and the arguments"}
HB_USAGE=$2
case ${3:-} in
  -h|--help) echo "$HB_USAGE"; exit 0 ;;
  -*) echo "$HB_USAGE" >&2; echo "$HB_NAME: unknown option $3" >&2; exit 2 ;;
  "") echo "$HB_USAGE" >&2; exit 2 ;;
esac
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
hosts=$src/tests/cluster/hosts.sh

# hosts_need_root: exit 2 with one line unless root (the emulation makes namespaces and links).
hosts_need_root() {
  [ "$(id -u)" = 0 ] || { echo "$HB_NAME: needs root (tests/cluster/hosts.sh)" >&2; exit 2; }
}

# hosts_bench_up NAME RATE [DIR]: two hosts h0, h1 (one RATE link each) as cluster NAME, redis-server on h0; on exit
# the cluster goes down and DIR (a work directory, if given) is removed. Root only (exit 2 otherwise). Sets
# load_before (the 1, 5, 15 min load averages before the hosts came up).
hosts_bench_up() {
  local name=$1 rate=$2 dir=${3:-}
  hosts_need_root
  # shellcheck disable=SC2064  # expanded now: the names are fixed for the run
  trap "\"$hosts\" down \"$name\" >/dev/null 2>&1 || true; ${dir:+rm -rf \"$dir\"}" EXIT
  trap 'exit 130' INT TERM
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  "$hosts" up "$name" 2 "$rate" >/dev/null
  "$hosts" start "$name" redis
}

# hosts_provenance WHO: the results file's date, machine (WHO: who shares the cores), load and commit lines.
hosts_provenance() {
  echo "* date (UTC): $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "* machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores shared by $1"
  echo "* load average (1, 5, 15 min) before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "* commit: $(git -C "$src" rev-parse --short HEAD)$(git -C "$src" diff --quiet HEAD -- . || echo ' (with local changes)')"
}
