"""docs/results/sensitivity.md: layer sensitivity on the paper's models."""
from .common import _absent, _f, _load, _prov


# --- layer sensitivity on the paper's models ------------------------------------------------------------------------

CLAIMS = {"a": "a conv block early in the network stays above cosine 0.85 at delay 8",
          "b": "the last fully connected layer drops below cosine 0.6 at delay 2",
          "c": "the embedding stays smooth for several steps while the output head turns at delay 1"}


def render_sensitivity_paper(results):
    """experiments/sensitivity.sh --save: per model the layer groups' cosine at each delay, then the claims' verdicts
    as the script computed them from the same runs."""
    d = _load(results, "sensitivity_paper.json")
    if not d:
        return _absent("the sensitivity study on the paper's models", 'run `experiments/sensitivity.sh --models '
                       '"resnet18 resnet50" --no-minibatch --threads 1 --out runs/sensitivity_paper --save '
                       'experiments/results/sensitivity_paper.json`')
    out = []
    for r in d["runs"]:
        if r["probe"] != "fixed":
            continue
        delays = r["delays"]
        size = " %s steps x batch %s," % (r["steps"], r["batch"]) if r.get("steps") else ""
        lrs = r.get("lr_at_probes")
        lr = " (learning rate %s)" % ", ".join("%.3g" % x for x in lrs) if lrs else ""
        out += ["`%s`,%s fixed probe batch, %d probes at steps %s%s; final training loss %s:" % (
                    r["model"], size, len(r["probe_steps"]), ", ".join(str(p) for p in r["probe_steps"]), lr,
                    _f(r.get("final_loss"), "%.3f")), "",
                "| layer group | layers | " + " | ".join("d=%d" % x for x in delays) + " |",
                "|---|---|" + "---|" * len(delays)]
        for g in r["groups"]:
            lo, hi = g.get("min_cosine"), g.get("max_cosine")
            cells = [_f(v, "%.3f") + ("" if lo is None or hi is None or lo[j] is None or hi[j] is None or v is None
                                      else " [%.2f, %.2f]" % (lo[j], hi[j])) for j, v in enumerate(g["mean_cosine"])]
            out.append("| %s | %d | %s |" % (g["group"], g["layers"], " | ".join(cells)))
        out.append("")
    out += ["| claim | model | verdict | the numbers it rests on (cosine) |", "|---|---|---|---|"]
    for c in d["claims"]:
        pp = c.get("per_probe") or {}
        nums = "; ".join("%s %s%s" % (k, _f(v, "%.3f"), " (per probe: %s)" % ", ".join(_f(x, "%.2f") for x in pp[k])
                                      if pp.get(k) else "") for k, v in c["rests_on"].items())
        if c.get("why"):
            nums = c["why"] + ("; " + nums if nums else "")
        out.append("| (%s) %s | %s | **%s** | %s |" % (c["claim"], c.get("statement") or CLAIMS.get(c["claim"], ""),
                                                      "`%s`" % c["model"] if c.get("model") else "-", c["verdict"],
                                                      nums))
    out += ["", "Cosine: mean over probes of cos(g_l(t0), g_l(t0+d)) on the fixed probe batch, [lowest, highest] "
                "over the probes in brackets; a group's cosine is the unweighted mean of its layers'. The verdicts "
                "are computed by the script from these runs (on the mean over probes). %s"
            % _prov(d), ""]
    return "\n".join(out)


def render_sensitivity_e2e(results, name="sensitivity_e2e.json"):
    """experiments/sensitivity_e2e.sh --save: the probe end to end against PyTorch (analysis/probe_e2e.py), per delay."""
    d = _load(results, name)
    if not d:
        return _absent("the end-to-end check of the probe", "run `experiments/sensitivity_e2e.sh --save "
                       "experiments/results/%s`" % name)
    out = ["`%s`, %d steps x batch %d, probes at steps %s, probe batch %d; PyTorch from our theta(0) on the same "
           "batches with the same SGD and probe rule (float32; the bounds from its float64 twin, K = %g):" % (
               d["model"], d["steps"], d["batch"], ", ".join(str(p) for p in d["probes"]), d["probe_batch"], d["K"]),
           "", "| delay | ours | PyTorch | PyTorch float64 | ours against PyTorch: mean abs difference | PyTorch float32 against float64: mean "
               "abs difference | max abs difference | largest bound | decided (bound below 0.1) | worst layer (its mean "
               "abs difference) | outside the bound |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    entries = len(d["probes"]) * len(d["layers"])

    def precisions(j):   # mean |cos32 - cos64| over probes and layers at delay index j
        pairs = [(x[j], y[j]) for a, b in zip(d.get("torch32") or [], d.get("torch64") or []) for x, y in zip(a, b)
                 if x[j] is not None and y[j] is not None and x[j] == x[j] and y[j] == y[j]]
        return sum(abs(x - y) for x, y in pairs) / len(pairs) if pairs else None
    for j, r in enumerate(d["per_delay"]):
        decided = r.get("decided")
        if decided is None:   # a file from before the count: none decided when even the smallest bound is too wide
            decided = 0 if r.get("min_bound", 0) >= 0.1 else None
        out.append("| %d | %.4f | %.4f | %s | %.2g | %s | %.2g | %.2g | %s | %s (%.2g) | %d |" % (
            r["delay"], r["ours"], r["torch"], _f(r.get("torch64"), "%.4f"), r["mean_abs_diff"],
            _f(precisions(j), "%.2g"), r["max_abs_diff"],
            r["max_bound"], "-" if decided is None else "%d of %d" % (decided, r.get("entries", entries)),
            r["worst_layer"], r["worst_layer_mean_abs_diff"], r["outside"]))
    verdict = "every cosine, loss and running statistic within its bound" if d["ok"] else (
        "**%d cosine(s), %d loss(es), %d running-statistics layer(s) outside their bound**" % (
            d["cos_outside"] + d["nan_mismatch"], d["loss_outside"], d["buffers_outside"]))
    out += ["", "ours and PyTorch: mean over probes and the %d layers of cos(g_l(t0), g_l(t0+d)); differences per "
                "probe and layer. Training loss: max abs difference %.2g over the %d steps; final BatchNorm running "
                "statistics: max relative difference %.2g; %s. %s" % (
                    len(d["layers"]), d["loss_max_abs_diff"], d["steps"], d["buffers_max_rel_diff"], verdict, _prov(d)),
            ""]
    return "\n".join(out)


def render_sensitivity_seeds(results, name="sensitivity_seeds.json"):
    """experiments/sensitivity_seeds.sh --save: the probe's mean cosine per delay over seeds, and its spread."""
    d = _load(results, name)
    if not d:
        return _absent("the probe's spread over seeds", "run `experiments/sensitivity_seeds.sh --save "
                       "experiments/results/%s`" % name)
    seeds = d["seeds"]
    rep = {int(k): v for k, v in (d.get("reported") or {}).items()}
    out = ["`%s`, %d steps x batch %d, constant learning rate %g, %d probes at steps %d to %d, %d layers; one run "
           "per seed (its own initialization, data order and probe batch):" % (
               d["model"], d["steps"], d["batch"], d["lr"], len(d["probes"]), d["probes"][0], d["probes"][-1],
               d["layers"]), "",
           "| delay | " + " | ".join("seed %s" % s for s in seeds) + " | mean | sd | max - min | widest pair: layers "
           "higher in the higher run |" + (" reported pair (two runs) |" if rep else ""),
           "|---|" + "---|" * (len(seeds) + 4 + (1 if rep else 0))]
    for r in d["per_delay"]:
        a, b = r["widest_pair"]
        row = "| %d | %s | %.3f | %.3f | %.3f | seeds %s, %s: %d of %d |" % (
            r["delay"], " | ".join("%.3f" % r["per_seed"][s] for s in seeds), r["mean"], r["sd"], r["range"], a, b,
            int(round(r["share_of_layers_higher_in_first"] * d["layers"])), d["layers"])
        if rep:
            x = rep.get(r["delay"])
            row += " %s |" % ("%.3f vs %.3f: %.3f apart" % (x[0], x[1], abs(x[1] - x[0])) if x else "-")
        out.append(row)
    out += ["", "Per seed: the mean over probes and layers of cos(g_l(t0), g_l(t0+d)); sd over the seeds' means.%s %s"
            % (" Reported pair: " + d["reported_what"] + "." if rep and d.get("reported_what") else "", _prov(d)), ""]
    return "\n".join(out)


TRAINED_CLAIMS = {"depth": "deeper layers turn faster (rank correlation of depth and cosine at d=8 at most -0.5)",
                  "a": "an early conv block stays above 0.85 at d=8",
                  "b": "the last layer drops below 0.6 at d=2",
                  "c": "the embedding above 0.85 at d=4 while the head is below 0.6 at d=1"}


def render_sensitivity_trained(results, name="sensitivity_trained.json"):
    """analysis/sensitivity_trained.py --save: the claims on models trained to their plateau, at the start, 10%, 50%
    and the end of training."""
    d = _load(results, name)
    if not d:
        return _absent("the sensitivity claims on trained models", "train as `experiments/sensitivity.sh --models "
                       "resnet20 --steps 6010 --every 600 --no-minibatch --threads 1 --out runs/sens-trained-r20` "
                       "(and gpt-mini, 3010 steps every 300), then run `analysis/sensitivity_trained.py "
                       "runs/sens-trained-r20 runs/sens-trained-gm --save experiments/results/%s`" % name)
    out = []
    for r in d["runs"]:
        acc = r.get("test_accuracy")
        out += ["`%s`, %d steps x batch %s; final training loss %s, test loss %s, test accuracy %s (%s test "
                "samples):" % (r["model"], r["steps"], r["batch"], _f(r.get("final_loss"), "%.3f"),
                               _f(r.get("test_loss"), "%.3f"), "-" if acc is None else "%.1f%%" % (100 * acc),
                               r.get("eval_samples", "-")), "",
                "| probe | step | lr | mean cosine d=" + ", ".join(str(x) for x in r["delays"]) + " | " +
                " | ".join(k for k in TRAINED_CLAIMS if any(k in p["claims"] for p in r["probes"])) + " |"]
        keys = [k for k in TRAINED_CLAIMS if any(k in p["claims"] for p in r["probes"])]
        out.append("|---|---|---|---|" + "---|" * len(keys))
        for p in r["probes"]:
            cells = []
            for k in keys:
                c = p["claims"].get(k)
                if not c:
                    cells.append("-")
                    continue
                nums = ", ".join("%s %s" % (n, _f(v, "%.2f")) for n, v in c["rests_on"].items())
                cells.append("**%s** (%s)" % (c["verdict"], nums))
            out.append("| %s | %d | %s | %s | %s |" % (p["label"], p["step"], _f(p.get("lr"), "%.2g"),
                                                      ", ".join(_f(v, "%.3f") for v in p["mean_cosine"]),
                                                      " | ".join(cells)))
        out.append("")
    out += ["Claims: " + "; ".join("**%s** %s" % (k, v) for k, v in TRAINED_CLAIMS.items()) + ". Each is judged "
            "on that probe's own cosines (mean of a group's layers), not on a mean over probes. %s" % _prov(d), ""]
    return "\n".join(out)
