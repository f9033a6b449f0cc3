#!/bin/bash
# Emulated cluster by hand (the same topology `dreamddp launch --netem` builds for one job): N network
# namespaces on a private bridge, every link shaped with tc. Needs root and iproute2.
#
#   netem_cluster.sh up N RATE[,delay=D][,loss=P] [NAME]   create NAME-0 .. NAME-(N-1) (NAME default: ddc)
#   netem_cluster.sh down [NAME]                           remove them
#   netem_cluster.sh status [NAME]                         show namespaces, addresses and qdiscs
#   netem_cluster.sh clean [PREFIX]                        remove what a killed `launch --netem` left behind
#                                                          (names PREFIXbr<id>, PREFIXns<id>-<r>, PREFIXh<id>r<r>,
#                                                          PREFIXu<id>r<r>; PREFIX default dd; run while no
#                                                          launch is running)
#   netem_cluster.sh measure N SPEC...                     per SPEC, through `dreamddp launch --netem SPEC`: median
#                                                          and p90 TCP round trip between two nodes, N-rank Gloo
#                                                          allreduce busbw, and the frames the userspace forwarder
#                                                          dropped (binary $DREAMDDP, default build/dreamddp;
#                                                          SIZE default 16M, ITERS default 5); a Markdown table
# Rank r lives in namespace NAME-r with address 10.77.200.(r+1)/24 on interface eth0; run it with e.g.
#   ip netns exec ddc-1 env RANK=1 WORLD_SIZE=4 MASTER_ADDR=10.77.200.1 GLOO_SOCKET_IFNAME=eth0 \
#       DREAMDDP_RENDEZVOUS=file:///tmp/rdzv build/dreamddp train ...
# Delay D is the one-way latency between two ranks (netem on each namespace's egress); RATE applies to both
# directions of every link (tbf on both veth ends). No address on the bridge, no routes, no NAT. `up` needs the
# kernel's sch_netem for delay/loss; `dreamddp launch --netem` does not (it forwards through userspace instead).
set -euo pipefail

die() { echo "netem_cluster.sh: $*" >&2; exit 2; }
need_root() { [ "$(id -u)" = 0 ] || die "needs root (network namespaces, veth, tc)"; command -v ip >/dev/null && command -v tc >/dev/null || die "needs ip and tc (iproute2)"; }

# shape DEV NETNS(or "") RATE DELAY LOSS: tbf for the rate, netem child for delay/loss.
shape() {
  local dev=$1 ns=$2 rate=$3 delay=$4 loss=$5 tcn=(tc)
  [ -n "$ns" ] && tcn=(tc -n "$ns")
  "${tcn[@]}" qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst 98304 latency 50ms
  if [ -n "$ns" ] && { [ -n "$delay" ] || [ -n "$loss" ]; }; then
    "${tcn[@]}" qdisc add dev "$dev" parent 1:1 handle 10: netem limit 10000 ${delay:+delay $delay} ${loss:+loss $loss} \
      || die "netem qdisc refused (kernel without sch_netem?); use a rate-only spec, or \`dreamddp launch --netem\`, which emulates delay/loss in userspace"
  fi
}

up() {
  local n=${1:-} spec=${2:-} name=${3:-ddc}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "up: N must be 1..250"
  [[ "$name" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "up: NAME must be 1-8 lower-case letters/digits"
  local rate=${spec%%,*} delay="" loss="" field
  [[ "$rate" =~ ^[0-9.]+(bit|kbit|mbit|gbit|tbit)$ ]] || die "up: bad RATE '$rate' (e.g. 1gbit, 100mbit)"
  IFS=, read -ra fields <<<"${spec#"$rate"}"
  for field in "${fields[@]}"; do
    case $field in
      "") ;;
      delay=*) delay=${field#delay=}; [[ "$delay" =~ ^[0-9.]+(us|ms|s)$ ]] || die "up: bad delay '$delay'" ;;
      loss=*) loss=${field#loss=}; loss=${loss%\%}%; [[ "$loss" =~ ^[0-9.]+%$ ]] || die "up: bad loss '$loss'" ;;
      *) die "up: unknown field '$field' (RATE[,delay=D][,loss=P])" ;;
    esac
  done
  ip link show "${name}br" >/dev/null 2>&1 && die "up: cluster '$name' exists (netem_cluster.sh down $name)"
  trap 'down "$name" >/dev/null 2>&1' EXIT  # a failed step (set -e or die) leaves nothing behind
  ip link add name "${name}br" type bridge
  ip link set dev "${name}br" up
  for ((r = 0; r < n; r++)); do
    ip netns add "$name-$r"
    ip link add name "${name}h$r" type veth peer name eth0 netns "$name-$r"
    ip link set dev "${name}h$r" master "${name}br"
    ip link set dev "${name}h$r" up
    ip -n "$name-$r" link set dev lo up
    ip -n "$name-$r" addr add "10.77.200.$((r + 1))/24" dev eth0
    ip -n "$name-$r" link set dev eth0 up
    shape eth0 "$name-$r" "$rate" "$delay" "$loss"
    shape "${name}h$r" "" "$rate" "" ""
  done
  trap - EXIT
  echo "cluster $name: $n namespaces $name-0..$name-$((n - 1)), 10.77.200.1..$n on eth0, $spec"
}

down() {
  local name=${1:-ddc} ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$name-[0-9]+$" || true); do
    ip link del dev "${name}h${ns##*-}" 2>/dev/null || true
    ip netns del "$ns"
  done
  ip link del dev "${name}br" 2>/dev/null || true
}

status() {
  local name=${1:-ddc} ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$name-[0-9]+$" || true); do
    echo "== $ns"; ip -n "$ns" -brief addr show dev eth0; tc -n "$ns" qdisc show dev eth0
  done
  ip -brief link show "${name}br" 2>/dev/null || echo "no bridge ${name}br"
}

clean() {
  local p=${1:-dd} ns dev
  [[ "$p" =~ ^[a-zA-Z][a-zA-Z0-9]{0,3}$ ]] || die "clean: bad PREFIX '$p'"
  for dev in $(ls /sys/class/net | grep -E "^${p}[hu][0-9]+r[0-9]+$" || true); do ip link del dev "$dev" || true; done
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${p}ns[0-9]+-[0-9]+$" || true); do ip netns del "$ns" || true; done
  for dev in $(ls /sys/class/net | grep -E "^${p}br[0-9]+$" || true); do ip link del dev "$dev" || true; done
}

# measure N SPEC...: one table row per SPEC (see the header).
measure() {
  local n=${1:-} spec bin=${DREAMDDP:-$(dirname "$0")/../build/dreamddp} size=${SIZE:-16M} iters=${ITERS:-5}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] || die "measure: N must be at least 2"
  shift
  [ $# -ge 1 ] || die "measure: give at least one SPEC, e.g. 1gbit 1gbit,delay=2ms,loss=1%"
  [ -x "$bin" ] || die "measure: no dreamddp binary at $bin (set DREAMDDP)"
  command -v python3 >/dev/null || die "measure: needs python3 (the round-trip probe)"
  local probe; probe=$(cd "$(dirname "$0")" && pwd)/netem/netprobe.py  # the 2-rank round-trip probe
  local tmp; tmp=$(mktemp -d /tmp/netem-measure-XXXXXX)
  trap 'rm -rf "$tmp"' RETURN
  echo "| --netem SPEC | RTT median / p90 (ms) | busbw $size, $n ranks (GB/s) | forwarder drops (frames) |"
  echo "|---|---|---|---|"
  for spec in "$@"; do
    rm -f "$tmp/rtt"
    sleep 2  # the kernel frees the last run's namespaces in the background: let that settle before timing
    "$bin" launch -n 2 --netem "$spec" --grace 2 -- python3 "$probe" rtt "$tmp" 200 >/dev/null 2>"$tmp/err.rtt" \
      || die "measure: round trip under $spec failed: $(tail -3 "$tmp/err.rtt")"
    "$bin" launch -n "$n" --netem "$spec" --grace 2 -- bench allreduce --backend gloo --sizes "$size" \
      --iters "$iters" >"$tmp/bench" 2>"$tmp/err.bench" || die "measure: allreduce under $spec failed: $(tail -3 "$tmp/err.bench")"
    local busbw drops
    busbw=$(python3 -c 'import json,sys; print("%.3f" % json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["results"][0]["busbw_GBps"])' "$tmp/bench")
    # Sum of every node's "N frames, D dropped" lines from the allreduce run; "-" where no forwarder ran.
    drops=$(awk '/netem: node[0-9]+ uplink:/ { for (i = 1; i < NF; i++) { if ($(i+1) == "frames,") f += $i; if ($(i+1) == "dropped") d += $i } }
                 END { if (f) printf "%d of %d (%.2f%%)", d, f, 100 * d / f; else print "-" }' "$tmp/err.bench")
    echo "| $spec | $(awk '{print $1 " / " $2}' "$tmp/rtt") | $busbw | $drops |"
  done
}

cmd=${1:-}
shift || true
case $cmd in
  up) need_root; up "$@" ;;
  down) need_root; down "$@" ;;
  status) status "$@" ;;
  clean) need_root; clean "$@" ;;
  measure) need_root; measure "$@" ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
     die "${cmd:+unknown command '$cmd'; }expected up, down, status, clean or measure (usage above)" ;;
esac
