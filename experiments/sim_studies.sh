#!/usr/bin/env bash
# Simulation studies on SimGrid (`dreamddp simulate`): the artifact's three GPT-2 profiles beside the time model,
# scaling 4..256 ranks at 1 and 10 Gbit/s, hier vs flat dreamddp on 16 nodes x 8 ranks, stragglers, and the
# paper's tables at 8, 16 and 32 workers from the artifact's GPT-2 and Llama-2 profiles (paper_scale).
#
#   experiments/sim_studies.sh [--study artifact|scaling|scaling_gptmini|hier|stragglers|copies_cost|paper_scale|all]
#                              [--quick] [--bin build/dreamddp]
#
# Writes experiments/results/simulate_<study>.json (one row per simulation, with the command that produced it);
# experiments/results/simulate.md holds the tables and their reading. Needs a dreamddp built with SimGrid.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" sim_studies.sh
prov_command -- "$@"
cd "$(dirname "$0")/.."
BIN=${DREAMDDP_BIN:-build/dreamddp} ARGS=()
while [ $# -gt 0 ]; do
  need_value --quick -h --help -- "$@"
  case $1 in
    --study) ARGS+=(--study "$2"); shift 2 ;;
    --quick) ARGS+=(--quick); shift ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_bin "$BIN"
SIM_STUDIES_COMMAND=$PROV_COMMAND exec /usr/bin/python3 experiments/sim_studies.py --bin "$BIN" "${ARGS[@]}"
