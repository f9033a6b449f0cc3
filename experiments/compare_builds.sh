#!/usr/bin/env bash
# compare_builds.sh --base BIN --new BIN [--reps N] [--models "mlp cnn resnet20 gpt-mini"] [--net RATE] [--out DIR]
#                   [--no-ranks] [--results FILE]
#
# Two dreamddp builds side by side in one run (a refactoring must not make the engine slower): for each model,
# the single-process step time (synthetic data, 1 thread, the batch of bench_step.sh), then the 4-rank throughput
# of mlp with ddp and dreamddp:h=8 on the emulated cluster (`launch -n 4 --netem RATE`, as root; on loopback with a
# note otherwise). Repetitions alternate base/new; the best of each is reported with new/base. Load average above
# the core count before any run marks the run noisy. Models: mlp, cnn, resnet20, gpt-mini, resnet18 (batch 32)
# and gpt2 (the scaled preset, batch 1). --no-ranks: the single-process step times only. Results: DIR/compare.json (default runs/compare-builds-<time>);
# --results FILE also writes it there (experiments/results/compare_builds.json is what the README renders).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" compare_builds
prov_command -- "$@"
py=/usr/bin/python3
base="" new="" reps=2 models="mlp cnn resnet20 gpt-mini" net=1gbit out="" results="" ranks=1
cmdline="experiments/compare_builds.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage_from_header; exit 0 ;;
    --base|--new|--reps|--models|--net|--out|--results) need_value -- "$@" ;;&
    --base) base=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --net) net=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --no-ranks) ranks=0; shift ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$base" ] && [ -n "$new" ] || die "--base BIN and --new BIN are required"
need_bin "$base"; need_bin "$new"
[[ $reps =~ ^[1-9][0-9]?$ ]] || die "--reps must be an integer in 1..99, got '$reps'"
declare -A batch=([mlp]=64 [cnn]=64 [resnet20]=64 [gpt-mini]=8 [resnet18]=32 [gpt2]=1)
declare -A steps=([mlp]=60 [cnn]=30 [resnet20]=20 [gpt-mini]=20 [resnet18]=12 [gpt2]=12)
for m in $models; do
  [ -n "${batch[$m]:-}" ] || die "unknown model '$m' (mlp, cnn, resnet20, gpt-mini, resnet18, gpt2)"
done
out=${out:-runs/compare-builds-$(date -u +%Y%m%dT%H%M%S)}
[ -e "$out" ] && die "$out exists: never overwriting an earlier run"
mkdir -p "$out"
prov_start
netopt=(--netem "$net")
if [ "$(id -u)" != 0 ]; then netopt=(); net=loopback; echo "# not root: the 4-rank runs use loopback"; fi
echo "# compare_builds: $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg); base $base; new $new; $reps alternating reps"
rows=$out/rows.txt
: > "$rows"
load_max=0
note_load() { local l; l=$(cut -d' ' -f1 /proc/loadavg); load_max=$($py -c "print(max($load_max, $l))"); }
for m in $models; do
  for r in $(seq "$reps"); do
    for side in base new; do
      bin=$base; [ $side = new ] && bin=$new
      d=$out/step-$m-$side-$r
      note_load
      "$bin" train --model "$m" --data synthetic --batch "${batch[$m]}" --threads 1 --steps "${steps[$m]}" \
        --eval-samples 16 --log-every 1000000 --out "$d" > "$d.log" 2>&1 || die "$side train --model $m failed: $(tail -2 "$d.log")"
      echo "step $m $side $($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_ms"])' "$d/summary.json")" >> "$rows"
    done
  done
done
pols="ddp dreamddp:h=8"; [ "$ranks" = 1 ] || pols=""
for pol in $pols; do
  for r in $(seq "$reps"); do
    for side in base new; do
      bin=$base; [ $side = new ] && bin=$new
      d=$out/ranks4-${pol//[:=,]/_}-$side-$r
      note_load
      timeout 600 "$bin" launch -n 4 "${netopt[@]}" -- train --model mlp --data synthetic --batch 64 --threads 1 \
        --steps 200 --policy "$pol" --eval-samples 16 --log-every 1000000 --out "$d" > "$d.log" 2>&1 ||
        die "$side 4-rank $pol failed: $(tail -2 "$d.log")"
      echo "ranks4 $pol $side $($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_s"])' "$d/summary.json")" >> "$rows"
    done
  done
done
$py - "$rows" "$out/compare.json" "$base" "$new" "$net" "$load_max" "$(nproc)" "$cmdline" "$(dirname "$SCRIPT_PATH")/lib" "${results:-}" <<'PY'
import collections, json, os, sys, datetime
rows, dst, base, new, net, load, cores, command, lib, results = sys.argv[1:11]
sys.path.insert(0, lib)
import provenance, peer_rules
v = collections.defaultdict(list)
for line in open(rows):
    kind, what, side, x = line.split()
    v[(kind, what, side)].append(float(x))
def commit_of(binary):
    """The commit of the tree a binary was built in (<tree>/build/dreamddp), dirty or not; None elsewhere."""
    tree = os.path.dirname(os.path.dirname(os.path.abspath(binary)))
    return peer_rules.git_commit(tree) if os.path.isdir(os.path.join(tree, ".git")) or os.path.isfile(os.path.join(tree, ".git")) else None
res = {"study": "compare-builds", "date": datetime.datetime.utcnow().isoformat() + "Z", "base": base, "new": new, "base_commit": commit_of(base), "new_commit": commit_of(new), "net": net,
       "load_max": float(load), "cores": int(cores), "noisy": float(load) > int(cores), "rows": []}
print("%-8s %-14s %12s %12s %9s" % ("what", "config", "base", "new", "new/base"))
for (kind, what) in dict.fromkeys((k, w) for k, w, _ in v):
    b, n = v[(kind, what, "base")], v[(kind, what, "new")]
    if kind == "step":   # ms: lower is better, best = min; ratio as speed (base/new)
        bb, nn = min(b), min(n); ratio = bb / nn; unit = "step ms"
    else:                # samples/s: best = max
        bb, nn = max(b), max(n); ratio = nn / bb; unit = "samples/s"
    res["rows"].append({"kind": kind, "config": what, "unit": unit, "base": b, "new": n, "best_base": bb,
                        "best_new": nn, "speed_ratio": ratio})
    print("%-8s %-14s %12.2f %12.2f %9.3f   (%s; speed ratio, >1 = new faster)" % (kind, what, bb, nn, ratio, unit))
if res["noisy"]:
    print("# NOISY: load average before a run reached %.2f on %s cores" % (float(load), cores))
provenance.stamp_from_env(res)
for p in [dst] + ([results] if results else []):
    provenance.write_json_atomic(p, res)
    print("# written", p)
PY
