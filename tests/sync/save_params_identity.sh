#!/usr/bin/env bash
# Bitwise identity of the sync engine across a refactor: trains every registered policy (and the merge keys, a
# composite and a switch) for a few steps on 2 ranks and writes each run's --save-params, so that two builds can be
# compared file by file.
#   save_params_identity.sh run BUILD_DIR OUT_DIR PROFILE_DIR   # PROFILE_DIR is written first when it is missing
#   save_params_identity.sh cmp BEFORE_DIR AFTER_DIR            # cmp of every file; exit 1 on any difference
# Keep PROFILE_DIR for both builds: dreamddp's schedule is a function of the profile it reads.
set -euo pipefail

specs() {
  local p=$1
  cat <<SPECS
ddp
localsgd:k=4
localsgd:k=4,outer=nesterov
localsgd:k=4,delay=2
plsgd:h=4
plsgd:h=4,delay=2
plsgd:h=4,compress=int8
plsgd:h=4,outer=nesterov:lr=0.7,momentum=0.9
dreamddp:h=4,profile=$p
dreamddp:h=4,profile=$p,fillin=0,delay=1
dreamddp:h=4,profile=$p+staleness:t=3
fixed
fixed:default=3
threshold
autothreshold
staleness:t=4
hybrid:t=4
hier:nodes=2x1,profile_steps=4
normdrift:drift=0.2,max=6
SPECS
}

case "${1:-}" in
run)
  build=$2 out=$3 prof=$4
  mkdir -p "$out"
  if [[ ! -e "$prof/bp.json" ]]; then
    "$build/dreamddp" launch -n 2 -- profile --model mlp --batch 16 --threads 1 --out "$prof" >/dev/null 2>&1
  fi
  i=0
  while read -r spec; do
    i=$((i + 1))
    name=$(printf '%02d' "$i")
    echo "$name $spec" >>"$out/index.txt"
    "$build/dreamddp" launch -n 2 -- train --model mlp --data synthetic --steps 30 --batch 16 --threads 1 \
      --policy "$spec" --save-params "$out/$name.p%r.bin" --out "$out/run$name" >"$out/$name.log" 2>&1 ||
      echo "$name FAILED" >>"$out/index.txt"
  done < <(specs "$prof")
  # The instruments around the step: the sensitivity probe (its cosines are compared as a file too), the anomaly
  # guard on a poisoned batch, and a resume from a checkpoint.
  for extra in "sens --sensitivity delays=1/2,every=5" "anom --anomaly fallback --inject-nan 7" \
               "ckpt --checkpoint-every 12"; do
    name=${extra%% *}
    echo "$name dreamddp:h=4,profile=$prof ${extra#* }" >>"$out/index.txt"
    # shellcheck disable=SC2086
    "$build/dreamddp" launch -n 2 -- train --model mlp --data synthetic --steps 30 --batch 16 --threads 1 \
      --policy dreamddp:h=4,profile=$prof ${extra#* } --save-params "$out/$name.p%r.bin" --out "$out/run$name" \
      >"$out/$name.log" 2>&1 || echo "$name FAILED" >>"$out/index.txt"
  done
  "$build/dreamddp" launch -n 2 -- train --model mlp --data synthetic --steps 30 --batch 16 --threads 1 \
    --policy dreamddp:h=4,profile=$prof --resume "$out/runckpt" --save-params "$out/resume.p%r.bin" \
    --out "$out/runresume" >"$out/resume.log" 2>&1 || echo "resume FAILED" >>"$out/index.txt"
  if [[ -e "$out/runsens/metrics.h5" ]]; then
    /usr/bin/python3 -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r"); g = f["sensitivity"]
open(sys.argv[2], "wb").write(b"".join(g[k][()].tobytes() for k in sorted(g.keys())))' \
      "$out/runsens/metrics.h5" "$out/sens.cosines.bin"
  fi
  # Switches: into every kind of policy at a step > 0, and out of one.
  j=0
  for sw in "10:dreamddp:h=4,profile=$prof" "12:localsgd:k=4,outer=nesterov" "8:threshold" "9:hier:nodes=2x1,profile_steps=4"; do
    j=$((j + 1))
    name=sw$j
    echo "$name ddp --switch $sw" >>"$out/index.txt"
    "$build/dreamddp" launch -n 2 -- train --model mlp --data synthetic --steps 30 --batch 16 --threads 1 \
      --policy ddp --switch "$sw" --save-params "$out/$name.p%r.bin" --out "$out/run$name" >"$out/$name.log" 2>&1 ||
      echo "$name FAILED" >>"$out/index.txt"
  done
  ;;
cmp)
  a=$2 b=$3 bad=0
  for f in "$a"/*.bin; do
    g="$b/$(basename "$f")"
    if cmp -s "$f" "$g"; then echo "same    $(basename "$f")"; else echo "DIFFERS $(basename "$f")"; bad=1; fi
  done
  exit $bad
  ;;
*)
  sed -n '2,7p' "$0"
  exit 2
  ;;
esac
