#!/usr/bin/env bash
# `bench allreduce` (gloo, redis rendezvous) with 4 ranks on two emulated hosts (tests/cluster/hosts.sh: 2 ranks on
# each, one RATE link per host) against the same 4 ranks on one host, where their traffic never leaves the host.
# Writes OUT (default experiments/results/hosts_allreduce.md) with provenance: command, UTC date, CPU model, load
# before/after, commit. Root only. Usage: experiments/hosts_allreduce.sh BIN [SIZES] [ITERS] [RATE] [OUT]
set -euo pipefail
usage="Usage: experiments/hosts_allreduce.sh BIN [SIZES] [ITERS] [RATE] [OUT]  (root; e.g. build/dreamddp 1M:64M 10 1gbit)"
. "$(dirname "${BASH_SOURCE[0]}")/lib/hosts_bench.sh" hosts_allreduce.sh "$usage" "$@"
bin=$(realpath "$1") sizes=${2:-1M:16M} iters=${3:-5} rate=${4:-1gbit}
out=${5:-$src/experiments/results/hosts_allreduce.md}
name=hb$(($$ % 100000))
hosts_bench_up "$name" "$rate"
cd "$src"
run() {  # run TAG HOST-OF-RANK-0..3: rank 0's table on stdout
  local tag=$1 r pids=(); shift
  local where=("$@")
  for r in 0 1 2 3; do
    "$hosts" exec "$name" "${where[$r]}" env RANK=$r WORLD_SIZE=4 timeout 300 "$bin" bench allreduce --backend gloo \
      --iface eth0 --rendezvous "redis://h0:6379/$name-$tag" --sizes "$sizes" --iters "$iters" --threads 1 \
      >"/tmp/$name.$tag.$r.out" 2>&1 &
    pids+=($!)
  done
  for r in 0 1 2 3; do wait "${pids[$r]}" || { cat "/tmp/$name.$tag.$r.out" >&2; exit 1; }; done
  cat "/tmp/$name.$tag.0.out"
  rm -f /tmp/"$name.$tag".*.out
}
two=$(run two h0 h0 h1 h1)
one=$(run one h0 h0 h0 h0)
{
  echo "# bench allreduce: 2 hosts x 2 ranks at $rate vs 4 ranks on one host"
  echo
  echo "* command: \`experiments/hosts_allreduce.sh build/dreamddp $sizes $iters $rate\`, i.e. on each host"
  echo "  \`RANK=r WORLD_SIZE=4 dreamddp bench allreduce --backend gloo --iface eth0 --rendezvous redis://h0:6379/JOB"
  echo "  --sizes $sizes --iters $iters --threads 1\`; ranks 0, 1 on h0 and 2, 3 on h1 (each host's link shaped to"
  echo "  $rate both ways), then all 4 on h0 (same namespace: loopback-speed, unshaped)"
  hosts_provenance "all 4 ranks of either run"
  echo
  echo "## 2 hosts x 2 ranks, $rate links (rank 0's output)"
  echo
  echo '```'
  echo "$two"
  echo '```'
  echo
  echo "## 4 ranks on one host (rank 0's output)"
  echo
  echo '```'
  echo "$one"
  echo '```'
} >"$out"
echo "wrote $out"
