#!/usr/bin/env bash
# Throughput study: ours (ddp, localsgd:k=8, plsgd:h=8, dreamddp:h=8) against the PyTorch peer (ddp, localsgd k=8),
# 4 ranks on the emulated cluster, one run per network, systems alternated; table + throughput.json + figures.
#
#   experiments/throughput.sh [--steps N] [--nets "1gbit 10gbit"] [--models mlp] [--out runs/throughput]
#                             [--repeats R] [--ranks N] [--batch B] [--bin build/dreamddp] [--peer-blas auto|system|DIR]
#                             [--policies "ddp localsgd:k=8 plsgd:h=8 dreamddp:h=8"] [--peer-algos "ddp localsgd"]
#                             [--loopback]
# Relative paths given as options are taken from the caller's directory; the defaults from the repository root.
# --peer-algos "" runs ours only. Environment: DREAMDDP_BIN, DREAMDDP_PEER (default peers/torch_ddp.py), PEER_PYTHON
# (the peer's interpreter; default the project's .venv-peer from `make deps-peer`, else Debian's python3-torch).
# The peer must run at its best (experiments/lib/peer_rules.py): our GEMM rate is measured at the start of the run
# and every ratio against a peer run whose own gemm_gflops is below 0.7x ours, above 1.5x ours or its own rate
# alone (more cores than given) or on netlib's BLAS is withheld (it reads '-') and the run marked misconfigured; the peer's BLAS, GEMM rate and threads are printed beside the table;
# a run that started with the load average above the core count is marked noisy.
#
# Our runs: OUT/<net>/<policy>/ (policy with ':' and '=' made path-safe, e.g. dreamddp-h8; repeat r>1 adds .r<r>);
# the peer's JSON line and log: OUT/<net>/torch-<algo>/. A run folder that already exists is moved to
# OUT/previous-<time>/ first (nothing is overwritten). With several --models, OUT/<model>/ takes the place of OUT/.
# Peer BLAS: Debian's python3-torch does its Linear layers in whatever libblas.so.3 the system provides; the
# reference BLAS makes the peer ~5x slower than OpenBLAS, which would flatter us. `auto` (default) uses the
# system BLAS if it is OpenBLAS, else an OpenBLAS unpacked (not installed) under ~/.cache/dreamddp/openblas,
# fetching it with `apt-get download libopenblas0-pthread` if needed; `system` forces the system's BLAS.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" throughput.sh
prov_command PEER_PYTHON DREAMDDP_PEER -- "$@"
REPO=$(cd "$(dirname "$0")/.." && pwd)

# Defaults are relative to the repository root; paths given on the command line to the caller's directory.
STEPS=200 NETS="1gbit 10gbit" MODELS=mlp OUT=runs/throughput REPEATS=1 RANKS=4 BATCH=64
POLICIES="ddp localsgd:k=8 plsgd:h=8 dreamddp:h=8" PEER_ALGOS="ddp localsgd" LOOPBACK=0
BIN=${DREAMDDP_BIN:-build/dreamddp} PEER=${DREAMDDP_PEER:-$REPO/peers/torch_ddp.py} PEER_BLAS=auto
PY=/usr/bin/python3
abs() { if [[ "$1" = /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
while [ $# -gt 0 ]; do
  need_value --loopback -h --help -- "$@"
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --nets) NETS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --out) OUT=$(abs "$2"); shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --bin) BIN=$(abs "$2"); shift 2 ;;
    --peer) PEER=$(abs "$2"); shift 2 ;;
    --peer-blas) PEER_BLAS=$2; [[ "$2" = auto || "$2" = system ]] || PEER_BLAS=$(abs "$2"); shift 2 ;;
    --policies) POLICIES=$2; shift 2 ;;
    --peer-algos) PEER_ALGOS=$2; shift 2 ;;
    --loopback) LOOPBACK=1; shift ;;
    -h|--help) usage_from_header; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
cd "$REPO"
[ -n "$POLICIES" ] || die "--policies is empty"
for a in $PEER_ALGOS; do [[ "$a" = ddp || "$a" = localsgd ]] || die "--peer-algos: '$a' is not ddp or localsgd"; done
need_positive STEPS REPEATS RANKS BATCH
need_bin "$BIN"
if [ -n "$PEER_ALGOS" ]; then
  [ -f "$PEER" ] || die "no PyTorch peer at $PEER (pass --peer or DREAMDDP_PEER)"
  peer_python_init
  "$PEER_PY" -c 'import torch' 2>/dev/null || die "$PEER_PY has no torch (make deps-peer)"
fi

# Emulated cluster when we may build one; otherwise loopback, said in the table header.
NETEM=1
if [ "$LOOPBACK" = 1 ]; then
  NETEM=0 NETS=loopback
elif [ "$(id -u)" != 0 ] || ! command -v tc >/dev/null || ! ip netns list >/dev/null 2>&1; then
  NETEM=0 NETS=loopback
  echo "throughput.sh: --netem unavailable (needs root, ip and tc): measuring on LOOPBACK, not a shaped network" >&2
fi

# The peer's BLAS (see the header comment). PEER_ENV goes in front of the peer's command line.
sys_blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
PEER_ENV=(/usr/bin/env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1)
BLAS_NOTE="no peer runs"
if [ -n "$PEER_ALGOS" ]; then
  case $PEER_BLAS in
    system) BLAS_NOTE="system ($sys_blas)" ;;
    auto)
      if [[ "$sys_blas" == *openblas* ]]; then
        BLAS_NOTE="system OpenBLAS ($sys_blas)"
      else
        cache=${XDG_CACHE_HOME:-$HOME/.cache}/dreamddp/openblas
        lib=$cache/usr/lib/x86_64-linux-gnu/openblas-pthread
        if [ ! -f "$lib/libblas.so.3" ] && command -v apt-get >/dev/null; then
          echo "throughput.sh: system BLAS is $sys_blas; unpacking OpenBLAS for the peer into $cache" >&2
          tmp=$(mktemp -d)
          if (cd "$tmp" && apt-get download libopenblas0-pthread >/dev/null 2>&1); then
            mkdir -p "$cache" && dpkg -x "$tmp"/libopenblas0-pthread_*.deb "$cache"
          fi
          rm -rf "$tmp"
        fi
        if [ -f "$lib/libblas.so.3" ]; then
          PEER_ENV+=(LD_LIBRARY_PATH="$lib")
          BLAS_NOTE="OpenBLAS ($lib, 1 thread)"
        else
          BLAS_NOTE="system ($sys_blas) - OpenBLAS not available, the peer is handicapped"
          echo "throughput.sh: WARNING: $BLAS_NOTE" >&2
        fi
      fi ;;
    *)
      [ -f "$PEER_BLAS/libblas.so.3" ] || die "--peer-blas $PEER_BLAS: no libblas.so.3 there"
      PEER_ENV+=(LD_LIBRARY_PATH="$(cd "$PEER_BLAS" && pwd)")
      BLAS_NOTE="$PEER_BLAS" ;;
  esac
fi

prov_start
OUR_GEMM=$($PY -c 'import sys; sys.path.insert(0, sys.argv[1]); import peer_rules; print(peer_rules.our_gemm_gflops(sys.argv[2]))' \
  "$REPO/experiments/lib" "$BIN")
# The peer's GEMM rate alone, next to ours (judges the peer with its in-run rate: peer_rules.judge_peer).
PEER_ALONE=0
if [ -n "$PEER_ALGOS" ]; then
  PEER_ALONE=$($PY -c 'import sys; sys.path.insert(0, sys.argv[1]); import peer_rules
p = peer_rules.peer_gemm_alone(sys.argv[2], sys.argv[3:]); print(p["gemm_gflops"] if p else 0)' \
    "$REPO/experiments/lib" "$PEER" "${PEER_ENV[@]}")
fi
STAMP=$(date +%Y%m%d-%H%M%S)
safe() { local s=${1//:/-}; s=${s//=/}; echo "${s//,/-}"; }
# move_aside DIR ROOT: an existing DIR goes to ROOT/previous-STAMP/<its path below ROOT>.
move_aside() {
  local dir=$1 root=$2
  [ -e "$dir" ] || return 0
  local dest=$root/previous-$STAMP/${dir#"$root"/}
  mkdir -p "$(dirname "$dest")"
  mv "$dir" "$dest"
  echo "  (kept the earlier $dir as $dest)"
}
load1() { cut -d' ' -f1 /proc/loadavg; }

NET_ARGS() { if [ "$NETEM" = 1 ]; then echo "--netem $1"; fi; }

for MODEL in $MODELS; do
  root=$OUT
  if [ "$(wc -w <<<"$MODELS")" -gt 1 ]; then root=$OUT/$MODEL; fi
  mkdir -p "$root"
  records=$root/records.jsonl  # one line per measured run of this run; the table is made from it
  move_aside "$records" "$root"
  move_aside "$root/throughput.json" "$root"
  {
    echo "# throughput run $STAMP on $(hostname): $(nproc) cores, load at start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# model $MODEL, $RANKS ranks x batch $BATCH, 1 thread per rank, synthetic data, $STEPS timed steps, repeats $REPEATS"
    echo "# peer BLAS: $BLAS_NOTE; netem: $NETEM; GEMM 64x1024.1024x1024, 1 thread: ours $OUR_GEMM GFLOP/s, the peer's alone $PEER_ALONE"
  } > "$root/run_log.txt"
  cat "$root/run_log.txt"

  for NET in $NETS; do
    mkdir -p "$root/$NET"
    # The peer's algorithms (ddp, localsgd k=8) are interleaved with ours, and even rounds run in reverse order,
    # so slow drifts of the machine (other jobs) fall on both systems alike.
    order=()
    read -ra pol <<<"$POLICIES"
    peers=()
    for a in $PEER_ALGOS; do
      if [ "$a" = ddp ]; then peers+=("ddp"); else peers+=("localsgd --k 8"); fi
    done
    for ((i = 0; i < ${#pol[@]} || i < ${#peers[@]}; i++)); do
      if [ $i -lt ${#pol[@]} ]; then order+=("ours|${pol[$i]}"); fi
      if [ $i -lt ${#peers[@]} ]; then order+=("peer|${peers[$i]}"); fi
    done
    for ((rep = 1; rep <= REPEATS; rep++)); do
      seq_=("${order[@]}")
      if ((rep % 2 == 0)); then seq_=(); for ((i = ${#order[@]} - 1; i >= 0; i--)); do seq_+=("${order[$i]}"); done; fi
      for item in "${seq_[@]}"; do
        sys=${item%%|*} what=${item#*|}
        suffix=""; if [ "$rep" -gt 1 ]; then suffix=".r$rep"; fi
        ld=$(load1)
        if [ "$sys" = ours ]; then
          dir=$root/$NET/$(safe "$what")$suffix
          move_aside "$dir" "$root"
          log=$(mktemp)
          echo "== $NET ours $what ($STEPS steps + 5 warm-up, load $ld)"
          t0=$(date +%s.%N)
          # shellcheck disable=SC2046
          "$BIN" launch -n "$RANKS" $(NET_ARGS "$NET") -- train --model "$MODEL" --data synthetic --batch "$BATCH" \
            --threads 1 --steps $((STEPS + 5)) --policy "$what" --out "$dir" --log-every 50 >"$log" 2>&1 ||
            { cat "$log" >&2; die "our $what run failed on $NET (log above)"; }
          t1=$(date +%s.%N)
          mv "$log" "$dir/launch.log"
          $PY - "$records" "$dir/summary.json" "$what" "$NET" "$MODEL" "$dir" "$ld" "$t0" "$t1" <<'PYEOF'
import json, sys
records, path, policy, net, model, d, ld, t0, t1 = sys.argv[1:]
s = json.load(open(path))
r = {"system": "dreamddp", "policy": policy, "network": net, "model": model,
     "samples_per_s": s["samples_per_s"], "exposed_comm_fraction": s["exposed_comm_fraction"],
     "step_ms": s["step_ms"], "run_dir": d, "load_1m": float(ld), "run_s": float(t1) - float(t0)}
open(records, "a").write(json.dumps(r) + "\n")
print(f"   {r['samples_per_s']:.0f} samples/s, exposed comm {100 * r['exposed_comm_fraction']:.1f}%, {r['run_s']:.0f} s")
PYEOF
        else
          algo=${what%% *}
          dir=$root/$NET/torch-$algo$suffix
          move_aside "$dir" "$root"
          mkdir -p "$dir"
          store=$(mktemp -u /tmp/dd-peer-store.XXXXXX)
          echo "== $NET peer --algo $what ($STEPS steps + 5 warm-up, load $ld)"
          t0=$(date +%s.%N)
          # shellcheck disable=SC2046,SC2086
          "$BIN" launch -n "$RANKS" $(NET_ARGS "$NET") -- "${PEER_ENV[@]}" THREADS=1 "$PEER_PY" "$PEER" --model "$MODEL" \
            --algo $what --batch "$BATCH" --steps "$STEPS" --warmup 5 --store "$store" >"$dir/launch.log" 2>&1 ||
            { cat "$dir/launch.log" >&2; die "peer --algo $what failed on $NET (log above)"; }
          t1=$(date +%s.%N)
          rm -f "$store"
          grep '^{' "$dir/launch.log" | tail -n 1 >"$dir/result.json"
          $PY - "$records" "$dir/result.json" "$algo" "$NET" "$MODEL" "$dir" "$ld" "$t0" "$t1" "$BLAS_NOTE" <<'PYEOF'
import json, sys
records, path, algo, net, model, d, ld, t0, t1, blas = sys.argv[1:]
s = json.load(open(path))
policy = "ddp" if algo == "ddp" else f"localsgd:k={s['k']}"
r = {"system": "torch", "policy": policy, "network": net, "model": model,
     "samples_per_s": s["samples_per_s"], "exposed_comm_fraction": None, "step_ms": s["step_ms"],
     "run_dir": d, "load_1m": float(ld), "run_s": float(t1) - float(t0), "peer": s["peer"], "peer_blas": blas,
     "peer_config": {k: s.get(k) for k in ("peer", "blas", "gemm_gflops", "threads", "openblas_coretype")}}
open(records, "a").write(json.dumps(r) + "\n")
print(f"   {r['samples_per_s']:.0f} samples/s, {r['run_s']:.0f} s")
PYEOF
        fi
      done
    done
  done
  echo "# load at end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$root/run_log.txt"

  # Table (median over repeats), throughput.json (the analysis/fig_throughput.py format, one per network in
  # OUT/<net>/ too, so `make_figures.py OUT` draws it beside that network's curves and timelines).
  $PY - "$root" "$NETEM" "$BLAS_NOTE" "$OUR_GEMM" "$REPO/experiments/lib" "$PEER_ALONE" "$PEER" "$REPO" <<'PYEOF'
import json, os, statistics, sys
root, netem, blas, our_gemm = sys.argv[1], sys.argv[2] == "1", sys.argv[3], float(sys.argv[4])
alone = float(sys.argv[6]) or None
sys.path.insert(0, sys.argv[5])
import provenance, peer_rules
recs = [json.loads(l) for l in open(os.path.join(root, "records.jsonl")) if l.strip()]
rows = {}
for r in recs:
    rows.setdefault((r["network"], r["system"], r["policy"]), []).append(r)
out = []
for (net, system, policy), rs in rows.items():
    sps = [r["samples_per_s"] for r in rs]
    exp = [r["exposed_comm_fraction"] for r in rs if r["exposed_comm_fraction"] is not None]
    out.append({"system": system, "policy": policy, "network": net, "model": rs[0]["model"],
                "samples_per_s": statistics.median(sps), "exposed_comm_fraction": statistics.median(exp) if exp else None,
                "samples_per_s_runs": sps, "load_1m_runs": [r["load_1m"] for r in rs],
                "run_dirs": [r["run_dir"] for r in rs], "noisy": any(peer_rules.noisy(r["load_1m"]) for r in rs),
                **({"peer_blas": blas, "peer_configs": [r.get("peer_config") for r in rs],
                    "peer_ok": all(peer_rules.judge_peer(r.get("peer_config"), our_gemm, alone)[0] for r in rs),
                    "peer_note": "; ".join(sorted({peer_rules.judge_peer(r.get("peer_config"), our_gemm, alone)[1]
                                                  for r in rs}))}
                   if system == "torch" else {})})
# {"results": [...]} with the provenance fields (analysis/fig_throughput.py reads the list from "results").
peer_line = next((r.get("peer_config") for r in recs if r["system"] == "torch" and r.get("peer_config")), None)
def doc(rows):
    return provenance.stamp_from_env({"study": "throughput", "results": rows}, peer=peer_line,
                                     peer_script=provenance.rel_to_repo(sys.argv[7], sys.argv[8]))
provenance.write_json_atomic(os.path.join(root, "throughput.json"), doc(out))
for net in dict.fromkeys(e["network"] for e in out):
    provenance.write_json_atomic(os.path.join(root, net, "throughput.json"), doc([e for e in out if e["network"] == net]))

head = open(os.path.join(root, "run_log.txt")).read()
print()
print(head.rstrip())
if not netem:
    print("# NOTE: no emulated cluster (--loopback, or not root / no tc): every run used LOOPBACK, unshaped")
print(f"{'network':<9} {'system':<9} {'policy':<14} {'samples/s':>10} {'exposed comm':>13} {'vs peer ddp':>12} {'vs peer lsgd':>13}")
# A peer that did not run at its best gives no ratio (peer_rules.judge_peer).
val = {(e["network"], e["system"], e["policy"]): e["samples_per_s"] for e in out
       if e["system"] != "torch" or e["peer_ok"]}
for e in out:
    if e["system"] == "torch":
        print(f"# peer {e['network']} {e['policy']}: {e['peer_note']}" + ("" if e["peer_ok"] else "  -> NO RATIOS"))
for e in out:
    pd, pl = val.get((e["network"], "torch", "ddp")), val.get((e["network"], "torch", "localsgd:k=8"))
    exp = "-" if e["exposed_comm_fraction"] is None else f"{100 * e['exposed_comm_fraction']:.1f}%"
    spread = "" if len(e["samples_per_s_runs"]) < 2 else f" ({min(e['samples_per_s_runs']):.0f}-{max(e['samples_per_s_runs']):.0f})"
    ratio = lambda d, w: f"{e['samples_per_s'] / d:>{w - 1}.2f}x" if d else f"{'-':>{w}}"  # no peer, or refused
    print(f"{e['network']:<9} {e['system']:<9} {e['policy']:<14} {e['samples_per_s']:>10.0f} {exp:>13} "
          f"{ratio(pd, 12)} {ratio(pl, 13)}{spread}"
          + ("  noisy" if e["noisy"] else ""))
print("\nacceptance:")
for net in dict.fromkeys(e["network"] for e in out):
    pd, pl = val.get((net, "torch", "ddp")), val.get((net, "torch", "localsgd:k=8"))
    od, dr = val.get((net, "dreamddp", "ddp")), val.get((net, "dreamddp", "dreamddp:h=8"))
    for name, a, b, target in (("ours ddp / peer ddp", od, pd, 1.0), ("ours dreamddp:h=8 / peer ddp", dr, pd, 2.5),
                               ("ours dreamddp:h=8 / peer localsgd k=8", dr, pl, 1.1)):
        if a and b:
            print(f"  {net:<9} {name:<40} {a / b:5.2f}  (target >= {target})  {'PASS' if a / b >= target else 'MISS'}")
PYEOF
  $PY analysis/make_figures.py "$root" | sed 's/^/  /'
  $PY analysis/make_figures.py throughput "$root/throughput.json" --out "$root/figures" | sed 's/^/  /'
  echo "throughput.sh: results $root/throughput.json, figures $root/figures/ and $root/<net>/figures/"
done
