#!/usr/bin/env bash
# torchft study (ours vs torchft 0.2.0's LocalSGD, DiLoCo, Streaming DiLoCo on the emulated cluster): a thin front
# for experiments/torchft_study.py, which holds the options (--help) and writes experiments/results/torchft.json,
# docs/figures/torchft.png. Needs root; DREAMDDP_BIN and PEER_PYTHON as the other studies.
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/torchft_study.py" "$@"
