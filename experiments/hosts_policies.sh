#!/usr/bin/env bash
# The seed's two-level topology on hosts: `train` with 4 ranks on two emulated hosts (tests/cluster/hosts.sh: ranks
# 0, 1 on h0 and 2, 3 on h1, one RATE link per host, the two ranks of a host over its loopback), gloo with the store
# in redis on h0, one policy after another and REPS alternating repetitions (policy order reversed on even reps).
# Each run is timed from the start of its first rank to the exit of its last (launch to exit), beside the trainer's
# own windowed samples/s. Writes OUT (default experiments/results/hosts_policies.md) with provenance: command, UTC
# date, CPU model, load before/after, commit.
# Root only. Usage: experiments/hosts_policies.sh BIN [STEPS] [BATCH] [RATE] [REPS] [OUT] [POLICY...]
set -euo pipefail
usage="Usage: experiments/hosts_policies.sh BIN [STEPS] [BATCH] [RATE] [REPS] [OUT] [POLICY...]  (root; e.g. build/dreamddp 300 8 1gbit 2)"
. "$(dirname "${BASH_SOURCE[0]}")/lib/hosts_bench.sh" hosts_policies.sh "$usage" "$@"
bin=$(realpath "$1") steps=${2:-300} batch=${3:-8} rate=${4:-1gbit} reps=${5:-2}
out=${6:-$src/experiments/results/hosts_policies.md}
shift $(($# < 6 ? $# : 6))
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=(ddp localsgd:k=8 plsgd:h=8 dreamddp:h=8 hier:nodes=auto)
for v in "$steps" "$batch" "$reps"; do
  [[ $v =~ ^[1-9][0-9]{0,5}$ ]] || { echo "$usage" >&2; echo "hosts_policies.sh: not a count: $v" >&2; exit 2; }
done
name=hp$(($$ % 100000))
hosts_need_root
# Run directories in the machine's /var/tmp: each host's /tmp is its own, and only rank 0 writes the summary.
work=$(mktemp -d /var/tmp/hosts_policies.XXXXXX)
hosts_bench_up "$name" "$rate" "$work"
cd "$src"
where=(h0 h0 h1 h1)
rows=()
run() {  # run POLICY REP: one row "policy rep run_s e2e_samples_per_s window_samples_per_s MB_per_rank loss"
  local pol=$1 rep=$2 r pids=() t0 t1 dir job
  dir=$work/$(echo "$pol" | tr ':=,+' '____').$rep
  local job=$name-$rep-$RANDOM
  t0=$(date +%s.%N)
  for r in 0 1 2 3; do
    "$hosts" exec "$name" "${where[$r]}" env RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 timeout 600 "$bin" train \
      --model mlp --data synthetic --batch "$batch" --steps "$steps" --threads 1 --policy "$pol" --backend gloo \
      --iface eth0 --rendezvous "redis://h0:6379/$job" --out "$dir" >"$work/log.$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1 2 3; do wait "${pids[$r]}" || { cat "$work/log.$r" >&2; exit 1; }; done
  t1=$(date +%s.%N)
  /usr/bin/python3 - "$dir/summary.json" "$t0" "$t1" "$pol" "$rep" "$steps" "$batch" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
t = float(sys.argv[3]) - float(sys.argv[2])
steps, batch = int(sys.argv[6]), int(sys.argv[7])
print(f"{sys.argv[4]:<18} {sys.argv[5]:>3} {t:8.2f} {steps * batch * 4 / t:9.0f} {s['samples_per_s']:9.0f} "
      f"{s['comm_bytes'] / 1e6:9.1f} {s.get('final_loss', float('nan')):9.4f}")
EOF
}
for ((rep = 1; rep <= reps; rep++)); do
  order=("${policies[@]}")
  if ((rep % 2 == 0)); then
    order=(); for ((i = ${#policies[@]} - 1; i >= 0; i--)); do order+=("${policies[$i]}"); done
  fi
  for pol in "${order[@]}"; do
    row=$(run "$pol" "$rep")
    echo "$row" >&2
    rows+=("$row")
  done
done
table=$(printf '%s\n' "${rows[@]}")
medians=$(echo "$table" | /usr/bin/python3 -c '
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip()]
pols = list(dict.fromkeys(r[0] for r in rows))
med = {p: statistics.median(float(r[3]) for r in rows if r[0] == p) for p in pols}
win = {p: statistics.median(float(r[4]) for r in rows if r[0] == p) for p in pols}
flat = [p for p in pols if not p.startswith("hier")]
best = max(flat, key=lambda p: med[p]) if flat else None
print("| policy | launch to exit, samples/s (median) | timed window, samples/s (median) | / best flat, end to end |")
print("|---|---|---|---|")
for p in pols:
    ratio = f"{med[p] / med[best]:.2f}" if best else "-"
    print(f"| `{p}` | {med[p]:.0f} | {win[p]:.0f} | {ratio} |")
if best:
    print()
    print(f"Best flat policy end to end: `{best}`.")
')
{
  echo "# Policies on 2 hosts x 2 ranks at $rate"
  echo
  echo "* command: \`experiments/hosts_policies.sh build/dreamddp $steps $batch $rate $reps\`, i.e. on each host"
  echo "  \`RANK=r WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 dreamddp train --model mlp --data synthetic --batch $batch --steps $steps"
  echo "  --threads 1 --policy P --backend gloo --iface eth0 --rendezvous redis://h0:6379/JOB\`; ranks 0, 1 on h0 and"
  echo "  2, 3 on h1, each host's link shaped to $rate both ways, the ranks of a host over its loopback"
  hosts_provenance "all 4 ranks"
  echo
  echo "Launch to exit: from the start of the first rank to the exit of the last, $steps x $batch x 4 samples over"
  echo "that time. Timed window: the trainer's own \`samples_per_s\` (after its warm-up steps). MB: bytes rank 0 sent."
  echo
  echo '```'
  echo "policy             rep    run_s  e2e_sps   win_sps   MB_rank      loss"
  echo "$table"
  echo '```'
  echo
  echo "$medians"
} >"$out"
echo "wrote $out"
