#!/usr/bin/env bash
# Schedule study: the DreamDDP solver (1) on the authors' three published GPT-2 profiles (H = 10), compared with the
# modelled time of the authors' own schedule and their published figure, and (2) on a self-profile of our models
# (`dreamddp profile` under `dreamddp launch`, H = 8; per-rank batch gpt-mini 8, resnet20 32, else 64 unless
# --batch); schedule JSONs drawn as layers x phase.
#
#   experiments/schedule_study.sh [--profiles "data/dreamddp-profiles/*"] [--h-paper 10] [--h-self 8]
#                                 [--models "gpt-mini resnet20"] [--ranks 4] [--netem RATE] [--batch B]
#                                 [--profile-steps 10] [--fillin] [--out runs/schedule] [--bin build/dreamddp]
#
# Writes OUT/<name>_schedule.json (`dreamddp schedule --out`), OUT/<name>.log (the solver's full table),
# OUT/profiles/<model>/{bp,comm}.json (self-profiles), OUT/solver_results.json (one row per profile: modelled seconds per
# iteration of ddp, localsgd, plsgd, dreamddp, bound, solve time) and OUT/summary.txt; figures in OUT/figures/.
# An existing OUT is moved to OUT.<time> first.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" schedule_study.sh
cd "$(dirname "$0")/.."

PROFILES=$(ls -d data/dreamddp-profiles/*/ 2>/dev/null | sed 's:/$::' | tr '\n' ' ')
H_PAPER=10 H_SELF=8 MODELS="gpt-mini resnet20" RANKS=4 NETEM="" BATCH="" PROFILE_STEPS=10 FILLIN=0
OUT=runs/schedule BIN=${DREAMDDP_BIN:-build/dreamddp} PY=/usr/bin/python3
while [ $# -gt 0 ]; do
  need_value --fillin -h --help -- "$@"
  case $1 in
    --profiles) PROFILES=$2; shift 2 ;;
    --h-paper) H_PAPER=$2; shift 2 ;;
    --h-self) H_SELF=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --netem) NETEM=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --profile-steps) PROFILE_STEPS=$2; shift 2 ;;
    --fillin) FILLIN=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_positive --raw-name H_PAPER H_SELF RANKS PROFILE_STEPS
need_positive --optional BATCH
need_bin "$BIN"
for p in $PROFILES; do [ -f "$p/bp.json" ] && [ -f "$p/comm.json" ] || die "$p: no bp.json/comm.json"; done

if [ -e "$OUT" ]; then
  keep="$OUT.$(date +%Y%m%d-%H%M%S)"
  mv "$OUT" "$keep"
  echo "schedule_study.sh: moved the earlier $OUT to $keep"
fi
mkdir -p "$OUT/profiles"
NET=() NETNAME=loopback
if [ -n "$NETEM" ]; then NET=(--netem "$NETEM"); NETNAME=$NETEM; fi
{
  echo "date: $(date -Is)"
  echo "host: $(hostname), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: tree at $(git rev-parse --short HEAD 2>/dev/null || echo unknown); binary $BIN built $(date -Is -r "$BIN")"
  echo "self-profiles: $RANKS ranks, network $NETNAME"
} > "$OUT/run_log.txt"
FILL=()
[ "$FILLIN" = 1 ] && FILL=(--fillin)

: > "$OUT/rows.txt"
# $1 name, $2 profile dir, $3 H, $4 kind (paper|self)
solve() {
  local name=$1 dir=$2 h=$3 kind=$4
  echo "== schedule $name (H=$h) from $dir"
  "$BIN" schedule --profile "$dir" --h "$h" "${FILL[@]}" --out "$OUT/${name}_schedule.json" > "$OUT/$name.log" 2>&1 ||
    { tail -n 20 "$OUT/$name.log" >&2; die "schedule on $dir failed"; }
  grep -E '^(gap to bound|solve time)' "$OUT/$name.log" | sed 's/^/   /'
  echo "$name $kind $dir $h" >> "$OUT/rows.txt"
}

for p in $PROFILES; do solve "$(basename "$p")" "$p" "$H_PAPER" paper; done

for m in $MODELS; do
  args=(profile --model "$m" --steps "$PROFILE_STEPS" --threads 1 --out "$OUT/profiles/$m")
  case $m in gpt-mini) b=8 ;; resnet20) b=32 ;; *) b=64 ;; esac   # the batches of the other studies
  args+=(--batch "${BATCH:-$b}")
  echo "== profile $m: $RANKS ranks, network $NETNAME (load $(cut -d' ' -f1 /proc/loadavg))"
  "$BIN" launch -n "$RANKS" "${NET[@]}" -- "${args[@]}" > "$OUT/profiles/$m.log" 2>&1 ||
    { tail -n 20 "$OUT/profiles/$m.log" >&2; die "profile of $m failed"; }
  tail -n 1 "$OUT/profiles/$m.log" | sed 's/^/   /'
  echo "profile $m: load after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/run_log.txt"
  solve "self_$m" "$OUT/profiles/$m" "$H_SELF" self
done

$PY - "$OUT" <<'PYEOF' | tee "$OUT/summary.txt"
import json, os, re, sys

out = sys.argv[1]

def authors(profile_dir):
    """(modelled time of the authors' schedule, their published figure) from the profiles' README table."""
    readme = os.path.join(os.path.dirname(os.path.abspath(profile_dir)), "README.md")
    name = os.path.basename(os.path.abspath(profile_dir))
    if os.path.isfile(readme):
        for line in open(readme):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells and cells[0] == name:
                m = re.match(r"([\d.]+)\s*\(([\d.]+)\)", cells[-1])
                if m:
                    return float(m.group(1)), float(m.group(2))
    return None, None

rows = []
for line in open(os.path.join(out, "rows.txt")):
    name, kind, d, h = line.split()
    log = open(os.path.join(out, name + ".log")).read().splitlines()
    j = json.loads(log[-1])
    solve_s = next((float(re.search(r"([\d.]+) s", l).group(1)) for l in log if l.startswith("solve time")), float("nan"))
    layers = next((int(l.split()[-1]) for l in log if l.startswith("layers")), 0)
    a_model, a_pub = authors(d) if kind == "paper" else (None, None)
    j["H"] = int(h)
    rows.append(dict(name=name, kind=kind, profile=d, layers=layers, solve_s=solve_s,
                     authors_modelled=a_model, authors_published=a_pub, **j))

def f(v, w=10, p=4):
    return f"{'—':>{w}}" if v is None else f"{v:>{w}.{p}f}"

print("\nModelled seconds per iteration (time model of docs/design.md; forward and update excluded)")
print(f"{'profile':<22}{'H':>3}{'layers':>7}{'ddp':>10}{'localsgd':>10}{'plsgd':>10}{'dreamddp':>10}{'bound':>10}"
      f"{'gap %':>7}{'authors':>10}{'(publ.)':>10}{'solve s':>9}")
for r in rows:
    print(f"{r['name']:<22}{r['H']:>3}{r['layers']:>7}{f(r['ddp'])}{f(r['localsgd'])}{f(r['plsgd'])}{f(r['dreamddp'])}"
          f"{f(r['lower_bound'])}{100 * r['gap']:>7.2f}{f(r['authors_modelled'])}{f(r['authors_published'])}"
          f"{r['solve_s']:>9.4f}")
print("\nspeed-up of dreamddp over ddp / localsgd / plsgd, and vs the authors' schedule (modelled):")
for r in rows:
    extra = f", authors' schedule {r['authors_modelled'] / r['dreamddp']:.3f}x" if r["authors_modelled"] else ""
    print(f"  {r['name']:<22}{r['ddp'] / r['dreamddp']:>7.2f}x {r['localsgd'] / r['dreamddp']:>6.3f}x "
          f"{r['plsgd'] / r['dreamddp']:>6.3f}x{extra}")
json.dump(rows, open(os.path.join(out, "solver_results.json"), "w"), indent=1)
PYEOF

$PY analysis/make_figures.py "$OUT"
