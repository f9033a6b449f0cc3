#!/usr/bin/env bash
# experiments/regime_map.sh: the regime map (where layer-wise partial sync pays off, measured on the emulated
# cluster, beside the schedule model and the PyTorch peer). The driver is experiments/regime_map.py; --help there.
#
#   experiments/regime_map.sh [--models "mlp"] [--ranks "2 4"] [--rates "100mbit 300mbit 1gbit 3gbit 10gbit"]
#                             [--cells "mlp:2:1gbit ..."] [--h 8] [--repeats 2] [--budget-s 6] [--out runs/regime]
#                             [--resume-cells] [--results experiments/results/regime_map.json] [--no-peer]
set -euo pipefail
REGIME_MAP_ENTRY=experiments/regime_map.sh exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/regime_map.py" "$@"
