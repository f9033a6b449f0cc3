#!/usr/bin/env bash
# experiments/bench_step_ab.sh: experiments/bench_step.sh for two builds side by side, alternating, in one
# sitting: "before" (an earlier commit's dreamddp and the peer file of that commit) and "after" (this tree's
# build and peer), rounds in the order before/after, after/before, ... so that a load that drifts hits both.
#
#   BEFORE_COMMIT=abc1234 BEFORE_BIN=path/to/its/dreamddp [ROUNDS=2] [REPS=2] [THREADS=1] [SAVE=FILE] \
#     experiments/bench_step_ab.sh MODEL...
#
# BEFORE_BIN must be a build of BEFORE_COMMIT (the script cannot check it; the results file records both); the
# before peer is BEFORE_COMMIT's peers/torch_ddp.py, with the peers/ modules of that commit beside it. Every round is a whole bench_step.sh run (its own
# alternation of ours and the peer, REPS repetitions, its GEMM check of the peer), kept whole under "rounds". The
# summary per model and build is the best (lowest) step over all rounds, ours and the peer's, and their ratio;
# `peer_ok` is false where any round's peer failed the peer rules (experiments/lib/peer_rules.py), and then the
# ratio is given as `ratio_unchecked` only. WORK=DIR keeps the rounds' files there (a round whose file exists is
# not run again). The machine block's date and load are the sitting's (first round's start, last round's end);
# each round keeps its own date, load, commit and tree state (the tree's: the before build is BEFORE_COMMIT's).
# Prints one JSON line; SAVE=FILE also writes it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" bench_step_ab
prov_command BEFORE_COMMIT ROUNDS REPS THREADS -- "$@"
case ${1-} in -h|--help) usage_from_header; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
[[ $# -gt 0 ]] || die "name at least one model (those of bench_step.sh)"
for m in "$@"; do [[ $m != -* ]] || die "unknown option '$m' (the settings are environment variables: see --help)"; done
[[ -n ${BEFORE_COMMIT:-} ]] || die "BEFORE_COMMIT must name the commit BEFORE_BIN was built from"
git -C "$root" rev-parse -q --verify "${BEFORE_COMMIT}^{commit}" >/dev/null || die "no commit '$BEFORE_COMMIT' here"
need_bin "${BEFORE_BIN:-}" "set BEFORE_BIN to a build of $BEFORE_COMMIT"
rounds=${ROUNDS:-2}
need_positive --raw-name rounds
work=${WORK:-$(mktemp -d /tmp/dd-bench-ab-XXXXXX)}
mkdir -p "$work"
# The before peer with the modules beside it that it imports (peers/ as it was at BEFORE_COMMIT).
mkdir -p "$work/peers_before"
git -C "$root" archive "$BEFORE_COMMIT" peers | tar -x -C "$work/peers_before" --strip-components=1
prov_start

for ((r = 1; r <= rounds; ++r)); do
  order=(before after)
  ((r % 2)) || order=(after before)
  for which in "${order[@]}"; do
    f=$work/$which.$r.json
    [[ -s $f ]] && continue
    echo "# round $r: $which ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))" >&2
    if [[ $which == before ]]; then
      DREAMDDP_BIN=$BEFORE_BIN DREAMDDP_PEER=$work/peers_before/torch_ddp.py SAVE=$f "$here/bench_step.sh" "$@" >"$f.log"
    else
      SAVE=$f "$here/bench_step.sh" "$@" >"$f.log"
    fi
  done
done

/usr/bin/python3 - "$here/lib" "$work" "$rounds" "${SAVE:-}" "$BEFORE_COMMIT" <<'EOF'
import json, os, sys
sys.path.insert(0, sys.argv[1])
import provenance
work, rounds, save, before_commit = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
runs = []
for r in range(1, rounds + 1):
    for which in ("before", "after") if r % 2 else ("after", "before"):
        d = json.load(open(os.path.join(work, "%s.%d.json" % (which, r))))
        runs.append({"round": r, "build": which, "date": d["machine"]["date"], "load_1m": d["machine"]["load_1m"],
                     "load_1m_end": d["machine"]["load_1m_end"], "commit": d["machine"]["commit"],
                     "tree_clean": d["machine"]["tree_clean"], "ours_gemm_gflops": d["ours_gemm_gflops"],
                     "results": d["results"]})
summary = []
for m in dict.fromkeys(x["model"] for run in runs for x in run["results"]):
    row = {"model": m}
    for which in ("before", "after"):
        xs = [x for run in runs if run["build"] == which for x in run["results"] if x["model"] == m]
        ours = min(v for x in xs for v in x["ours_runs_ms"])
        torch = [v for x in xs for v in x["torch_runs_ms"] if v]
        ok = all(x["peer_ok"] for x in xs)
        row[which] = {"ours_step_ms": ours, "torch_step_ms": min(torch) if torch else None, "peer_ok": ok,
                      "max_load": max(x["max_load"] for x in xs),
                      ("ratio" if ok else "ratio_unchecked"): ours / min(torch) if torch else None}
    row["ours_after_over_before"] = row["after"]["ours_step_ms"] / row["before"]["ours_step_ms"]
    summary.append(row)
out = {"study": "bench_step_ab", "before_commit": before_commit, "rounds": runs, "summary": summary}
first = next(x["peer"] for run in runs if run["build"] == "after" for x in run["results"] if x.get("peer"))
provenance.stamp_from_env(out, peer={k: first.get(k) for k in ("peer", "blas", "gemm_gflops", "threads")},
                          peer_script="peers/torch_ddp.py")
# The sitting is the rounds': its date and load from the first round's start to the last round's end.
out["machine"].update({"date": runs[0]["date"], "load_1m": runs[0]["load_1m"], "load_1m_end": runs[-1]["load_1m_end"]})
if save:
    json.dump(out, open(save, "w"), indent=1)
print(json.dumps(out))
EOF
