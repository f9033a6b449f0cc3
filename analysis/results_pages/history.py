"""docs/results/history.md: the index of every results file and the records kept only there."""
import os
from .common import _absent, _load, _read, missing_fields, scrub


def render_ops(results):
    d = _load(results, "ops_vs_torch.json")
    if not d:
        return _absent('per-op times', 'run `experiments/bench_ops_vs_torch.sh`')
    out = ["| op (our shapes, %d thread) | ours ms | torch ms | ours / torch |" % d["threads"], "|---|---|---|---|"]
    for r in d["rows"]:
        out.append("| %s | %.3f | %.3f | %s |" % (r["op"], r["ours_ms"], r["torch_ms"],
                                                 ("**%.2f**" if r["ratio"] > 1 else "%.2f") % r["ratio"]))
    flags = "/".join(f for f in ("avx2", "avx512f") if d.get(f))
    out += ["", "**Not a valid comparison**: the peer's GEMM ran at %.3fx ours (%.1f against %.1f GFLOP/s, "
                "64x1024x1024), ours and the peer ran one after the other instead of alternating, at a load of %s on "
                "%d cores, and no commit was recorded. `%s` — %s, %s (%s); torch %s on %s." % (
                    d["torch_gemm_gflops"] / d["ours_gemm_gflops"], d["torch_gemm_gflops"], d["ours_gemm_gflops"],
                    d["loadavg_start"].split()[0], d["nproc"], scrub(d["command"]), d["date"], d["cpu_model"], flags,
                    d["torch"], os.path.basename(d["torch_blas"][-1]) if d["torch_blas"] else "?"), ""]
    return "\n".join(out)


def render_json_table(results, name):
    """Fallback for results files that carry a ready `markdown` field (e.g. ops_vs_torch.json, simulate_*.json)."""
    d = _load(results, name + ".json")
    if not d:
        return _absent("results file %s.json" % name, "see its script")
    md = d.get("markdown")
    if not md:
        return "_%s.json has no markdown table._\n" % name
    return md.rstrip() + "\n"


# --- the history page ----------------------------------------------------------------------------------------------

def _date_of(d):
    if not isinstance(d, dict):
        return "-"
    return (d.get("machine") or {}).get("date") or d.get("date") or d.get("time_utc") or "-"


def render_history_index(results):
    out = ["| results file | study | date | record |", "|---|---|---|---|"]
    for f in sorted(os.listdir(results)):
        if not f.endswith(".json"):
            continue
        d = _read(results, f)
        miss = missing_fields(d)
        status = "complete" if not miss else "incomplete: no " + ", ".join(miss)
        if f == "ops_vs_torch.json":
            status = "breaks the comparison rules (see below); " + status
        out.append("| `%s` | %s | %s | %s |" % (f, d.get("study") or d.get("bench") or "-" if isinstance(d, dict)
                                                 else "-", _date_of(d), status))
    mds = sorted(f for f in os.listdir(results) if f.endswith(".md"))
    out += ["", "Written records without a machine-readable file (their numbers are not rendered anywhere): %s." %
            ", ".join("`%s`" % f for f in mds), ""]
    return "\n".join(out)
