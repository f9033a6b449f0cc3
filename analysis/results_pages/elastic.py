"""docs/results/elastic.md: the chaos study and the cost of shrinking."""
import re

from .common import _absent, _f, _load, _median, _prov


def _full_again(run):
    """Seconds from each loss to a full world again, from the rejoin events that say so."""
    return [float(m.group(1)) for _, k, d in run.get("events", []) if k == "rejoin"
            for m in [re.search(r"full world again ([0-9.]+) s after the loss", d)] if m]


def render_chaos(results, name="chaos.json"):
    d = _load(results, name)
    if not d:
        return _absent("the chaos study", "run `experiments/chaos.py`")
    u = d["set_up"]
    how = {"none": "no fault", "rejoin": "shrink, then the lost rank rejoins",
           "restart": "restart all from the newest checkpoint (every %d steps)" % u["checkpoint_every"],
           "exit": "exit 3 at the first loss (the default)"}
    out = ["| model | policy | fault | handling | faults | rc | wall | samples in the final model | **goodput** | "
           "test accuracy | per loss: detect, agree, rebuild (median) | per rejoin: admit; full world again after the "
           "loss (median) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        shr = [x for x in r["recoveries"] if "detect_s" in x]
        adm = [x["admit_s"] for x in r["recoveries"] if "admit_s" in x]
        per = ("%d: %s, %s, %s s" % (len(shr), _f(_median([x["detect_s"] for x in shr]), "%.1f"),
                                     _f(_median([x["agree_s"] for x in shr]), "%.1f"),
                                     _f(_median([x["rebuild_s"] for x in shr]), "%.2f")) if shr else "-")
        if r["mode"] == "restart":
            per = "%d restarts" % r["restarts"]
        handling = how[r["mode"]] + (" (did not finish)" if r["rc"] != 0 and r["mode"] != "exit" else "")
        share = 100.0 * r["samples"] / (r["steps"] * u["ranks"] * u["batch"])
        if r["mode"] == "exit":  # the job is over: what its last checkpoint holds, of what was asked
            good = "ended; %.0f%% of the samples" % share
        elif r["rc"] != 0:  # a run that did not finish the requested steps has earned no goodput
            good = "did not finish; %.0f%% of the samples" % share
        else:
            good = _f(r.get("goodput"))
        out.append("| %s | %s | %s | %s | %d | %d | %.0f s | %d | **%s** | %s | %s | %s |" % (
            "%s, %d steps" % (r["model"], r["steps"]), r["policy"], r["fault"] or "-", handling, len(r["faults"]),
            r["rc"], r["wall_s"], r["samples"], good, _f(r["accuracy"] * 100 if r["accuracy"] is not None else None, "%.2f%%"), per,
            _rejoins(adm, _full_again(r))))
    beat = ", `--heartbeat %g`" % u["heartbeat"] if u.get("heartbeat") is not None else ""
    ref = ("fault-free run's" if u.get("baselines", 1) == 1 else
           "median rate of the model and policy's %d fault-free runs (one before its faulted runs, the others after "
           "them; each fault-free row shows its own rate over that median)" % u["baselines"])
    out += ["", ("%s, %d ranks, batch %d per rank, `launch --netem %s`, `--timeout %g`%s; a fault every "
                 "%g s from the launch, on a rank drawn from 1..%d (seed %d); SIGSTOP for twice the timeout. "
                 "Goodput: samples in the final model per second of wall time (launch to exit), over the "
                 "%s, for runs that finished every requested step; a run that ended short shows the "
                 "share of the requested samples it delivered instead. %s") % (
                     u["data"], u["ranks"], u["batch"], u["netem"], u["timeout"], beat, u["every"], u["ranks"] - 1,
                     u["seed"], ref, _prov(d)), ""]
    return "\n".join(out)


def _rejoins(admits, full):
    if not admits:
        return "-"
    return "%d: %.2f s" % (len(admits), _median(admits)) + ("; %.1f s" % _median(full) if full else "")


def render_shrink_overhead(results, name="shrink_overhead.json"):
    d = _load(results, name)
    if not d:
        return _absent("the fault-free cost of shrink", "run `experiments/chaos.py --overhead N`")
    u = d["set_up"]
    out = ["| policy | `--on-peer-loss exit` (samples/s) | `--on-peer-loss shrink` (samples/s) | **shrink / exit** "
           "| pairs (min-max) |", "|---|---|---|---|---|"]
    for policy in dict.fromkeys(r["policy"] for r in d["runs"]):
        runs = [r for r in d["runs"] if r["policy"] == policy]
        ex = _median([r["samples_per_s"] for r in runs if r["mode"] == "exit"])
        sh = _median([r["samples_per_s"] for r in runs if r["mode"] == "shrink"])
        by = {}
        for r in runs:
            by.setdefault(r["repeat"], {})[r["mode"]] = r["samples_per_s"]
        pairs = [p["shrink"] / p["exit"] for p in by.values() if "shrink" in p and "exit" in p]
        out.append("| %s | %.0f | %.0f | **%.3f** | %.3f-%.3f |" % (policy, ex, sh, sh / ex, min(pairs), max(pairs)))
    out += ["", ("%s, %d steps, %d ranks, batch %d per rank, `launch --netem %s`, no fault; median of %d alternating "
                 "repeats (timed steps). %s") % (u["model"], u["steps"], u["ranks"], u["batch"], u["netem"],
                                                 u["repeats"], _prov(d)), ""]
    return "\n".join(out)
