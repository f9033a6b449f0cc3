"""docs/results/compare-builds.md: one study on two builds."""
from .common import _absent, _load, _prov


def render_compare_builds(results):
    d = _load(results, "compare_builds.json")
    if not d:
        return _absent('two builds side by side', 'run `experiments/compare_builds.sh`')
    out = ["| what | config | base (%s) | new (%s) | speed new/base |" % (d.get("base_commit") or "base",
                                                                   d.get("new_commit") or "new"),
           "|---|---|---|---|---|"]
    for r in d["rows"]:
        what = "step ms, 1 process" if r["kind"] == "step" else "samples/s, 4 ranks, %s" % d["net"]
        out.append("| %s | %s | %.2f | %.2f | %.3f |" % (what, r["config"], r["best_base"], r["best_new"],
                                                        r["speed_ratio"]))
    spread = max(max(r[k]) / min(r[k]) - 1 for r in d["rows"] for k in ("base", "new"))
    out += ["", "Best of %d alternating repetitions per side (lower step time / higher samples/s); the repetitions of "
                "one side differ by up to %.1f%%%s. %s" % (
                    len(d["rows"][0]["base"]), 100 * spread,
                    "; noisy: load %.2f before a run on %d cores" % (d["load_max"], d["cores"]) if d.get("noisy")
                    else "", _prov(d)), ""]
    return "\n".join(out)
