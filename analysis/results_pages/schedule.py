"""docs/results/schedule.md: the schedule solver."""
from .common import _absent, _f, _load, _prov, _target


# --- the schedule solver -------------------------------------------------------------------------------------------

def render_schedule(results):
    d = _load(results, "schedule_solver.json")
    if not d:
        return _absent("the schedule solver on the artifact's profiles", "run `experiments/schedule_study.sh`")
    out = ["| profile | H | ddp | localsgd | plsgd | dreamddp (ours) | lower bound | authors' schedule, modelled | "
           "authors' published | dreamddp vs localsgd | solve ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        out.append("| %s | %d | %.4f | %.4f | %.4f | **%.4f** | %.4f%s | %s | %s | %.2fx | %.0f |" % (
            r["name"], r["H"], r["ddp"], r["localsgd"], r["plsgd"], r["dreamddp"], r["lower_bound"],
            " (optimal)" if r["gap"] < 1e-9 else "", _f(r.get("authors_modelled"), "%.4f"),
            _f(r.get("authors_published"), "%.4f"), r["localsgd"] / r["dreamddp"], 1e3 * r["solve_s"]))
    out += ["", "Seconds per iteration under [the time model](%s) (forward and update excluded); ddp is the serial "
                "`B + C`. \"authors' schedule, modelled\" is the artifact's own schedule scored by the same model; "
                "\"published\" is the figure the artifact reports. The solver is deterministic. %s" % (
                    "../design.md#the-time-model" if _target[0] != "README.md" else "docs/design.md#the-time-model",
                    _prov(d)), ""]
    return "\n".join(out)
