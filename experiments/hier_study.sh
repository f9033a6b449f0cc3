#!/usr/bin/env bash
# Two-level topology study: `hier` against the flat `dreamddp:h=8` on an emulated 2-node cluster.
#   speed:    launch --nodes 2x2 --netem RATE, mlp, synthetic data, batch 64/rank, 1 thread/rank; the two policies
#             alternated REPEATS times in one run; median samples/s and the ratio hier / dreamddp.
#   accuracy: the same policies (nodes 2x2 on loopback: accuracy does not depend on the link) on Fashion-MNIST.
#
#   experiments/hier_study.sh [--nets "1gbit 100mbit"] [--steps 150] [--repeats 2] [--acc-steps 1000]
#                             [--hier hier:nodes=auto] [--flat dreamddp:h=8] [--bin build/dreamddp] [--out runs/hier]
# --acc-steps 0 skips the accuracy runs. Results: OUT/summary.txt and OUT/hier.json. A run folder that exists is never overwritten (OUT gets a time suffix).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" hier_study.sh
prov_command -- "$@"
REPO=$(cd "$(dirname "$0")/.." && pwd)
NETS="1gbit 100mbit" STEPS=150 REPEATS=2 ACC_STEPS=1000 HIER=hier:nodes=auto FLAT=dreamddp:h=8
BIN=${DREAMDDP_BIN:-$REPO/build/dreamddp} OUT=$REPO/runs/hier
abs() { if [[ "$1" = /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
while [ $# -gt 0 ]; do
  need_value -h --help -- "$@"
  case $1 in
    -h|--help) usage_from_header; exit 0 ;;
    --nets) NETS=$2 ;; --steps) STEPS=$2 ;; --repeats) REPEATS=$2 ;; --acc-steps) ACC_STEPS=$2 ;;
    --hier) HIER=$2 ;; --flat) FLAT=$2 ;; --bin) BIN=$(abs "$2") ;; --out) OUT=$(abs "$2") ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift 2
done
need_positive STEPS REPEATS
need_nonneg ACC_STEPS
need_bin "$BIN" "make build, or --bin"
[ "$(id -u)" = 0 ] || die "the emulated cluster needs root (network namespaces)"
[ -e "$OUT" ] && OUT="$OUT.$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
prov_start
safe() { echo "$1" | tr ':=,' '-__'; }
field() { /usr/bin/python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d[sys.argv[2]])" "$1" "$2"; }

echo "hier study: $HIER vs $FLAT, mlp synthetic batch 64/rank, $STEPS steps, nets: $NETS, repeats $REPEATS -> $OUT"
summary=$OUT/summary.txt
printf "%-8s %-28s %-4s %10s %8s %12s %6s\n" net policy rep samples/s exposed "MB/rank" load | tee "$summary"
for net in $NETS; do
  for r in $(seq 1 "$REPEATS"); do
    order="$HIER $FLAT"; (( r % 2 == 0 )) && order="$FLAT $HIER"
    for p in $order; do
      d=$OUT/$net/$(safe "$p").r$r
      mkdir -p "$(dirname "$d")"
      load=$(cut -d' ' -f1 /proc/loadavg)
      "$BIN" launch --nodes 2x2 --netem "$net" -- train --model mlp --data synthetic --batch 64 --threads 1 \
        --steps "$STEPS" --policy "$p" --out "$d" > "$d.log" 2>&1 || die "run failed, see $d.log"
      printf "%-8s %-28s %-4s %10.0f %7.1f%% %12.0f %6s\n" "$net" "$p" "$r" "$(field "$d.log" samples_per_s)" \
        "$(/usr/bin/python3 -c "print(100*$(field "$d.log" exposed_comm_fraction))")" \
        "$(/usr/bin/python3 -c "print($(field "$d.log" comm_bytes)/1e6)")" "$load" | tee -a "$summary"
    done
  done
done
/usr/bin/python3 - "$summary" "$HIER" "$FLAT" <<'EOF' | tee -a "$summary"
import sys, statistics, collections
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
by = collections.defaultdict(list)
for r in rows:
    by[(r[0], r[1])].append(float(r[3]))
for net in dict.fromkeys(r[0] for r in rows):
    h, f = statistics.median(by[(net, sys.argv[2])]), statistics.median(by[(net, sys.argv[3])])
    print(f"{net}: median samples/s {sys.argv[2]} {h:.0f}, {sys.argv[3]} {f:.0f} -> ratio {h / f:.2f}")
EOF
if [ "$ACC_STEPS" -gt 0 ]; then
  for p in "$HIER" "$FLAT"; do
    d=$OUT/accuracy/$(safe "$p")
    mkdir -p "$(dirname "$d")"
    "$BIN" launch --nodes 2x2 -- train --model mlp --data fashion-mnist --batch 64 --threads 1 --steps "$ACC_STEPS" \
      --lr 0.02 --policy "$p" --eval-every "$ACC_STEPS" --eval-samples 10000 --out "$d" > "$d.log" 2>&1 \
      || die "run failed, see $d.log"
    echo "accuracy (mlp, fashion-mnist, 4 ranks x 64, $ACC_STEPS steps, 10k test images): $p $(field "$d.log" test_accuracy) ($(/usr/bin/python3 -c "print(round($(field "$d.log" comm_bytes)/1e6))") MB/rank)" | tee -a "$summary"
  done
fi
# OUT/hier.json: the same measurements as JSON, with the provenance fields (experiments/lib/provenance.py).
/usr/bin/python3 - "$OUT" "$HIER" "$FLAT" "$ACC_STEPS" <<'EOF'
import json, os, statistics, sys
sys.path.insert(0, os.environ["PROV_LIB"])
import provenance
out, hier, flat, acc_steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
runs = []
for l in open(os.path.join(out, "summary.txt")).read().splitlines()[1:]:
    t = l.split()
    if len(t) == 7 and t[2].isdigit():
        runs.append({"network": t[0], "policy": t[1], "rep": int(t[2]), "samples_per_s": float(t[3]),
                     "exposed_comm_fraction": float(t[4].rstrip("%")) / 100, "mb_per_rank": float(t[5]),
                     "load_1m": float(t[6])})
speed = []
for net in dict.fromkeys(r["network"] for r in runs):
    med = {p: statistics.median(r["samples_per_s"] for r in runs if r["network"] == net and r["policy"] == p)
           for p in (hier, flat)}
    speed.append({"network": net, "hier": hier, "flat": flat, "median_samples_per_s": med,
                  "ratio_hier_over_flat": med[hier] / med[flat]})
accuracy = []
if acc_steps > 0:
    for p in (hier, flat):
        log = os.path.join(out, "accuracy", p.translate(str.maketrans(":=,", "-__")) + ".log")
        s = json.loads([l for l in open(log).read().splitlines() if l.startswith("{")][-1])
        accuracy.append({"policy": p, "steps": acc_steps, "test_accuracy": s.get("test_accuracy"),
                         "mb_per_rank": s["comm_bytes"] / 1e6})
provenance.write_json_atomic(os.path.join(out, "hier.json"), provenance.stamp_from_env(
    {"study": "hier", "runs": runs, "speed": speed, "accuracy": accuracy}))
print("hier study: results %s" % os.path.join(out, "hier.json"))
EOF
