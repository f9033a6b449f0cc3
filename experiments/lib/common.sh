# shellcheck shell=bash
# experiments/lib/common.sh: the argument checks the experiment scripts share, sourced as
#   . "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" NAME
# NAME is the prefix of the script's messages ("sensitivity.sh", "bench_step"): passed, not taken from $0, so a
# script keeps its wording however it is invoked. Source it before any cd (it resolves "$0" to an absolute path).

SCRIPT_NAME=${1:?"experiments/lib/common.sh: source it with the script's name as argument"}
# The script's absolute path, so --help works after the script has cd'd elsewhere.
SCRIPT_PATH=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

# die MESSAGE...: the usage-error exit every script shares (status 2, message on stderr).
die() { echo "$SCRIPT_NAME: $*" >&2; exit 2; }

# usage_from_header: print the script's leading comment block (after the #! line) without the '# '.
usage_from_header() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$SCRIPT_PATH"; }

# has_value [FLAG...] -- OPT [ARG...]: true when OPT has a word after it or is one of the FLAGs (options that
# take no value). Call it as `has_value FLAGS -- "$@"` at the top of the option loop.
has_value() {
  local flags=() f
  while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  [ $# -ge 2 ] && return 0
  for f in "${flags[@]}"; do [ "${1-}" = "$f" ] && return 0; done
  return 1
}

# need_value [FLAG...] -- "$@": die "OPT needs a value" when has_value says no, or "unknown option" when OPT is
# not in the script's usage header at all (a mistyped last option is not one that lacks its value).
need_value() {
  has_value "$@" && return 0
  while [ "$1" != -- ]; do shift; done
  if [[ $2 == -* ]] && ! usage_from_header | grep -qE -- "(^|[^a-z0-9-])$2([^a-z0-9-]|\$)"; then
    die "unknown option '$2' (see --help)"
  fi
  die "$2 needs a value"
}

# need_bin PATH [HINT]: die unless PATH is an executable dreamddp binary; HINT says how to get one.
need_bin() {
  [ -x "$1" ] || die "no dreamddp binary at $1 (${2:-build it: make build, or pass --bin / DREAMDDP_BIN})"
}

# need_positive [--optional] [--got] [--raw-name] VAR...: die "--var-name must be a positive integer" unless every
# $VAR is one (VAR_NAME is named as its option, --var-name). The options keep the older scripts' wording:
#   --optional  an empty value passes (the option was not given)
#   --got       the message ends " (got 'VALUE')"
#   --raw-name  the message names var_name (the variable in lower case) rather than the option
# need_nonneg: the same for non-negative integers.
need_positive() { _need_int '^[1-9][0-9]*$' positive "$@"; }
need_nonneg() { _need_int '^[0-9]+$' non-negative "$@"; }

_need_int() {
  local re=$1 kind=$2 optional=0 got=0 raw=0 v name
  shift 2
  while [[ ${1-} == --* ]]; do
    case $1 in
      --optional) optional=1 ;;
      --got) got=1 ;;
      --raw-name) raw=1 ;;
      *) die "need_positive/need_nonneg: unknown option '$1'" ;;
    esac
    shift
  done
  for v in "$@"; do
    if [ "$optional" = 1 ] && [ -z "${!v}" ]; then continue; fi
    if [[ ${!v} =~ $re ]]; then continue; fi
    name=${v,,}
    [ "$raw" = 1 ] || name=--${name//_/-}
    if [ "$got" = 1 ]; then die "$name must be a $kind integer (got '${!v}')"; fi
    die "$name must be a $kind integer"
  done
}

# Provenance (experiments/lib/provenance.py, the one module every results writer uses):
#   prov_command [VAR...] -- "$@"   at the top, before the options are shifted: PROV_COMMAND = the command line
#                                   as typed (VAR=value for each set VAR the script reads, the script's path from
#                                   the repository root, its arguments shell-quoted)
#   prov_start                      at the start of the measurement: PROV_START = the machine block (JSON text)
#   (both are exported: a script's embedded python calls provenance.stamp_from_env(doc, ...) instead)
#   prov_stamp FILE [PEER_JSON [PEER_SCRIPT]]
#                                   after FILE (a JSON object) is written: adds "command", "machine" (with
#                                   load_1m_end) and "peer" (null without PEER_JSON: a line or a file holding it)
PROV_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PROV_LIB
PROV_REPO=$(dirname "$(dirname "$PROV_LIB")")
prov_command() {
  local envs=() a
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  PROV_COMMAND=""
  for a in "${envs[@]}"; do
    [ -n "${!a-}" ] && PROV_COMMAND+="$a=$(printf '%q' "${!a}") "
  done
  PROV_COMMAND+="${SCRIPT_PATH#"$PROV_REPO"/}"
  for a in "$@"; do PROV_COMMAND+=" $(printf '%q' "$a")"; done
  export PROV_COMMAND
}
# provenance.py under PROV_PYTHON (it needs the standard library only; default /usr/bin/python3).
provenance_py() { "${PROV_PYTHON:-/usr/bin/python3}" "$PROV_LIB/provenance.py" "$@"; }
prov_start() { PROV_START=$(provenance_py start "$PROV_REPO"); export PROV_START; }
prov_stamp() {
  [ -n "${PROV_START-}" ] || prov_start
  provenance_py stamp "$1" --start "$PROV_START" --command "${PROV_COMMAND:-?}" \
    ${2:+--peer-json "$2"} ${3:+--peer-script "$3"}
}

# The peer's interpreter (peers/README.md): PEER_PYTHON when set; else the project's virtual environment
# .venv-peer (`make deps-peer`: a pinned current PyTorch from PyPI); else Debian's /usr/bin/python3 (python3-torch),
# said once on stderr so that a results file measured against the old PyTorch does not pass for the current one.
#   peer_python_init   sets PEER_PY (the interpreter) and PEER_ORIGIN (venv | debian | PEER_PYTHON), exported
peer_python_init() {
  if [ -n "${PEER_PYTHON-}" ]; then
    PEER_PY=$PEER_PYTHON PEER_ORIGIN=PEER_PYTHON
  elif [ -x "$PROV_REPO/.venv-peer/bin/python" ]; then
    PEER_PY=$PROV_REPO/.venv-peer/bin/python PEER_ORIGIN=venv
  else
    PEER_PY=/usr/bin/python3 PEER_ORIGIN=debian
    echo "$SCRIPT_NAME: no .venv-peer (make deps-peer): the peer runs on Debian's PyTorch," \
      "$("$PEER_PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not installed')" >&2
  fi
  export PEER_PY PEER_ORIGIN
}
