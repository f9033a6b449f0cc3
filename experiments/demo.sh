#!/usr/bin/env bash
# make demo: 4 local ranks over Gloo on Fashion-MNIST, DDP versus DreamDDP (and Local SGD for reference), on
# loopback; DEMO_NET=1gbit (root) runs it on an emulated 1 Gbit/s cluster instead (network namespaces + tc).
# Runs go to runs/demo/<policy>/, figures to runs/demo/figures/; an earlier runs/demo is kept as runs/demo.<time>.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${DREAMDDP_BIN:-build/dreamddp}
PY=/usr/bin/python3
STEPS=${DEMO_STEPS:-300}
MODEL=${DEMO_MODEL:-mlp}
OUT=runs/demo
if [ -e "$OUT" ]; then
  keep="$OUT.$(date +%Y%m%d-%H%M%S)"
  mv "$OUT" "$keep"
  echo "demo: kept the earlier demo run as $keep"
fi
mkdir -p "$OUT"

NET=()
NETNAME=loopback
if [ -n "${DEMO_NET:-}" ]; then
  NET=(--netem "$DEMO_NET")
  NETNAME=$DEMO_NET
fi
echo "demo: $MODEL, 4 ranks x batch 64, $STEPS steps per policy, network: $NETNAME"

for policy in ddp dreamddp:h=8 localsgd:k=8; do
  name=${policy%%:*}
  echo "== $policy"
  "$BIN" launch -n 4 "${NET[@]}" -- train --model "$MODEL" --data fashion-mnist --batch 64 --steps "$STEPS" \
    --threads 1 --policy "$policy" --eval-every $((STEPS / 3)) --out "$OUT/$name" --log-every $((STEPS / 6)) \
    | tail -n 1 > "$OUT/$name.summary-line.json"
done

$PY analysis/make_figures.py "$OUT" >/dev/null
$PY - "$OUT" "$NETNAME" <<'PYEOF'
import json, sys, os
out, net = sys.argv[1], sys.argv[2]
rows = []
for name in ("ddp", "dreamddp", "localsgd"):
    s = json.load(open(os.path.join(out, name, "summary.json")))
    rows.append((s["policy"], s["samples_per_s"], s["exposed_comm_fraction"], s["comm_bytes"] / 1e6, s.get("test_accuracy", float("nan"))))
base = rows[0][1]
print(f"\nDDP versus DreamDDP, 4 ranks, network {net}")
print(f"{'policy':<16}{'samples/s':>12}{'vs ddp':>9}{'exposed comm':>14}{'MB sent/rank':>14}{'test acc':>10}")
for p, sps, exp, mb, acc in rows:
    print(f"{p:<16}{sps:>12.0f}{sps / base:>8.2f}x{100 * exp:>13.1f}%{mb:>14.0f}{100 * acc:>9.2f}%")
print(f"\nfigures: {out}/figures/")
PYEOF
