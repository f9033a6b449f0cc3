"""docs/results/convergence.md: convergence beyond the paper, over seeds and on GPT."""
from .common import _absent, _f, _load, _prov, scrub


def _render_beyond_convergence(results, name, what):
    d = _load(results, name + ".json")
    if not d:
        return _absent(what, "see experiments/beyond_results.py")
    out = ["| policy | samples | samples/s | test loss | loss vs ddp | test accuracy | vs ddp (points) | MB sent/rank | "
           "vs its plain twin |", "|---|---|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        twin = ""
        if r.get("baseline"):
            twin = "%s: %s bytes, %+.2f points" % (r["baseline"], _f(r.get("bytes_vs_baseline"), "%.2fx"),
                                                   r["gap_to_baseline_points"])
        out.append("| %s | %d | %.0f | %.4f | %s | %.2f%% | %s | %.0f | %s |" % (
            r["policy"], r["samples"], r["samples_per_s"], r["test_loss"],
            "-" if r.get("loss_vs_ddp") is None else "%+.1f%%" % (100 * r["loss_vs_ddp"]), 100 * r["test_accuracy"],
            _f(r.get("gap_to_ddp_points"), "%+.2f"), r["comm_mb"], twin))
    log = d.get("run_log", [])
    out += ["", "%s. Network %s; runs: %s. One seed per policy. samples/s come from a loaded machine (other builds "
                "beside the runs): for speed, read the throughput pages. %s" % (
                    "; ".join(dict.fromkeys(x for x in log if x.startswith("setup:"))), d["network"],
                    scrub("; ".join(dict.fromkeys(x.replace("git: ", "") for x in log if x.startswith("git:")))),
                    _prov(d)), ""]
    return "\n".join(out)


def render_beyond_convergence(results):
    return _render_beyond_convergence(results, "beyond_convergence", "cnn convergence")


def render_beyond_gpt(results):
    return _render_beyond_convergence(results, "beyond_gpt", "gpt-mini loss")


def render_beyond_seeds(results, name="beyond_convergence_seeds.json"):
    d = _load(results, name)
    if not d:
        return _absent("multi-seed convergence", "see experiments/beyond_results.py seeds")
    seeds = d["seeds"]
    out = ["| policy | %s | mean | vs ddp, mean of seeds (points) | per seed, worst / best | MB sent/rank |" % " | ".join(
        "seed %d" % s for s in seeds), "|" + "---|" * (len(seeds) + 5)]
    for r in d["rows"]:
        if len(r["seeds"]) < len(seeds):
            continue  # a policy some seeds did not run: its single runs are in the tables above
        out.append("| %s | %s | %.2f%% | %s | %+.2f / %+.2f | %.0f |" % (
            r["policy"], " | ".join("%.2f%%" % (100 * r["accuracy"][str(s)]) for s in seeds),
            100 * r["mean_accuracy"], ("**%+.2f**" % r["mean_gap_points"]) if r["policy"] != "ddp" else "+0.00",
            r["min_gap_points"], r["max_gap_points"], r["comm_mb"]))
    n = d.get("samples", 128000)   # files written before the count was recorded: 1000 steps x 32 x 4 ranks
    out += ["", "Final test accuracy (first 5000 test images) after the same %s samples; each seed's gap is to the "
                % ("{:,}".format(n) if n else "(differing)") +
                "ddp run of the same seed (same initialisation and data order); policies run on every seed. "
                "%s" % _prov(d), ""]
    return "\n".join(out)
