#!/bin/bash
# Generates a synthetic study with the C++ writer, runs analysis/make_figures.py on it, checks every figure exists
# and is non-trivial (> 10 KB PNG, PDF present). Usage: figures_test.sh SYNTH_EXE MAKE_FIGURES_PY WORK_DIR
set -euo pipefail
synth=$1; figures=$2; work=$3
rm -rf "$work"
"$synth" "$work"
/usr/bin/python3 "$figures" "$work"
expected="cosine_vs_delay cosine_heatmap loss_vs_time loss_vs_samples accuracy_vs_time accuracy_vs_samples
  overlap_timeline schedule throughput"
status=0
for name in $expected; do
  png="$work/study_a/figures/$name.png"
  pdf="$work/study_a/figures/$name.pdf"
  if [[ ! -f $png || ! -f $pdf ]]; then echo "missing figure $png or its PDF"; status=1; continue; fi
  size=$(stat -c %s "$png")
  if (( size <= 10240 )); then echo "figure $png is only $size bytes"; status=1; fi
done
exit $status
