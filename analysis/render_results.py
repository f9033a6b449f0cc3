#!/usr/bin/python3
"""Result tables and figures of speech rendered from experiments/results/*.json, so text cannot drift from data.

  render_results.py [--readme README.md] [--docs docs/results] [--results experiments/results]   rewrite sections
  render_results.py --check                                                   exit 1 if any section is stale

A section is the text between `<!-- results:NAME -->` and `<!-- /results:NAME -->` in README.md or in a page of
docs/results/; NAME picks the renderer in RENDERERS below and the results file(s) it reads. The renderers
live in results_pages/, one module per results page, with the provenance and formatting helpers they share in
results_pages/common.py. `history_NAME` renders NAME from records that lack part of their provenance
(docs/results/history.md only).

A results file is rendered only when it records its provenance in full: a top-level "command" (string), a
"machine" object with "date" (UTC), "cpu", "cpu_flags", "cores", "load_1m", "load_1m_end", "commit" and
"tree_clean", and a top-level "peer" (object, or null without a peer). Every rendered table ends with that
provenance. A file without it is listed on the history page as an incomplete record, with what it lacks.

--check also refuses measurement-like numbers (decimals, percentages, ratios such as 1.5x, times and rates with
units) in the prose of those pages outside the rendered sections and outside code: a number a reader may quote
must come from a results file.
"""
import argparse
import os
import re
import sys
from results_pages.common import HISTORY, _lenient, _rel, _target
from results_pages.compare_builds import render_compare_builds
from results_pages.compression import render_topk_compression
from results_pages.convergence import render_beyond_convergence, render_beyond_gpt, render_beyond_seeds
from results_pages.elastic import render_chaos, render_shrink_overhead
from results_pages.findings import render_findings
from results_pages.gpu import render_gpu_step
from results_pages.history import render_history_index, render_ops
from results_pages.regime_map import render_contention, render_fillin_rule, render_goal, render_regime
from results_pages.schedule import render_schedule
from results_pages.sensitivity import (render_sensitivity_e2e, render_sensitivity_paper, render_sensitivity_seeds,
                                       render_sensitivity_trained)
from results_pages.sim_validation import render_sim_charge, render_sim_validation, render_sim_validation_paper
from results_pages.simulator import (render_sim_artifact, render_sim_copies_cost, render_sim_dominance,
    render_sim_hier, render_sim_own_gpt2, render_sim_paper_scale, render_sim_scaling, render_sim_stragglers)
from results_pages.step_time import (render_backward_shares, render_bench_step, render_bench_step_ab,
    render_bench_step_stem, render_peak_rss)
from results_pages.throughput import render_beyond_throughput, render_demo
from results_pages.torchft import render_torchft, render_torchft_faults


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


RENDERERS = {"simulate_validation": render_sim_validation, "sim_charge": render_sim_charge,
             "simulate_validation_paper": render_sim_validation_paper, "bench_step": render_bench_step,
             "bench_step_torch113": lambda r: render_bench_step(r, ("bench_step_t1.2026-12-02.json",
                                                                    "bench_step_t2.2026-12-01.json")),
             "bench_step_intel": lambda r: render_bench_step(r, ("bench_step_t1_intel.json",
                                                                 "bench_step_t2_intel.json")),
             "bench_step_avx2": lambda r: render_bench_step(r, ("bench_step_t1_avx2.json", "bench_step_t1_avx2_gptmini.json",
                                                                 "bench_step_t2_avx2.json")),
             "bench_step_stem": render_bench_step_stem, "bench_step_gpt2_init": render_bench_step_ab,
             "bench_step_ab_avx2_gptmini": lambda r: render_bench_step_ab(r, "bench_step_ab_avx2_gptmini.json"),
             "bench_step_ab_avx2_padb": lambda r: render_bench_step_ab(r, "bench_step_ab_avx2_padb.json"),
             "regime_map": render_regime, "demo": render_demo,
             "regime_map_20261201": lambda r: render_regime(r, "regime_map.2026-12-01.json"),
             "regime_map_e2e": lambda r: render_regime(r, "regime_map_e2e.json"),
             "throughput_paper_e2e": lambda r: render_regime(r, "throughput_paper_e2e.json"),
             "throughput_paper_e2e_resnet50": lambda r: render_regime(r, "throughput_paper_e2e_resnet50.json"),
             "regime_below_goal": lambda r: render_regime(r, "regime_below_goal.json"),
             "throughput_gpt2": lambda r: render_regime(r, "throughput_gpt2.json"),
             "throughput_resnet50": lambda r: render_regime(r, "throughput_resnet50.json"),
             "paper_goal": render_goal,
             "backward_shares": render_backward_shares, "gpu_step": render_gpu_step, "peak_rss": render_peak_rss,
             "sim_own_gpt2": render_sim_own_gpt2,
             "ops_vs_torch": render_ops, "beyond_convergence": render_beyond_convergence,
             "beyond_gpt": render_beyond_gpt, "beyond_throughput": render_beyond_throughput,
             "compare_builds": render_compare_builds, "fillin_rule": render_fillin_rule,
             "contention": render_contention, "beyond_convergence_seeds": render_beyond_seeds,
             "convergence_seeds_mlp": lambda r: render_beyond_seeds(r, "convergence_seeds_mlp.json"),
             "contention_3gbit": lambda r: render_contention(r, "regime_contention_3gbit.json"),
             "beyond_delay_spread": lambda r: render_beyond_throughput(r, "beyond_delay_spread.json"),
             "beyond_delay_h4": lambda r: render_beyond_throughput(r, "beyond_delay_h4.json"),
             "sim_artifact": render_sim_artifact, "sim_scaling": render_sim_scaling,
             "sim_scaling_gptmini": lambda r: render_sim_scaling(r, "simulate_scaling_gptmini.json"),
             "sim_stragglers": render_sim_stragglers, "sim_hier": render_sim_hier,
             "sim_dominance": render_sim_dominance, "sim_copies_cost": render_sim_copies_cost,
             "sim_paper_scale": render_sim_paper_scale,
             "schedule_solver": render_schedule, "sensitivity_paper": render_sensitivity_paper,
             "sensitivity_e2e": render_sensitivity_e2e, "sensitivity_seeds": render_sensitivity_seeds,
             "sensitivity_e2e_lr05": lambda r: render_sensitivity_e2e(r, "sensitivity_e2e_lr05.json"),
             "sensitivity_e2e_cnn": lambda r: render_sensitivity_e2e(r, "sensitivity_e2e_cnn.json"),
             "sensitivity_seeds32": lambda r: render_sensitivity_seeds(r, "sensitivity_seeds32.json"),
             "sensitivity_trained": render_sensitivity_trained,
             "chaos": render_chaos, "shrink_overhead": render_shrink_overhead,
             "chaos_shrink": lambda r: render_chaos(r, "chaos_shrink.json"),
             "chaos_cells": lambda r: render_chaos(r, "chaos_cells.json"),
             "chaos_in_place": lambda r: render_chaos(r, "chaos_in_place.json"),
             "chaos_heartbeat": lambda r: render_chaos(r, "chaos_heartbeat.json"),
             "chaos_cells_intel": lambda r: render_chaos(r, "chaos_cells.2026-12-06-intel.json"),
             "shrink_overhead_profile": lambda r: render_shrink_overhead(r, "shrink_overhead_profile.json"),
             "findings": render_findings, "history_index": render_history_index,
             "topk_compression": render_topk_compression, "torchft": render_torchft,
             "torchft_faults": render_torchft_faults,
             "torchft_merge_keys": lambda r: render_torchft(r, "torchft_merge_keys.json"),
             "torchft_last_period": lambda r: render_torchft(r, "torchft_last_period.json"),
             "torchft_closing_merge": lambda r: render_torchft(r, "torchft_closing_merge.json"),
             "torchft_before_end_averages": lambda r: render_torchft(r, "torchft.2026-12-05.json"),
             "torchft_faults_heal": lambda r: render_torchft_faults(r, "torchft_faults_heal.json"),
             "torchft_faults_cells": lambda r: render_torchft_faults(r, "torchft_faults_cells.json"),
             "torchft_faults_gpt2": lambda r: render_torchft_faults(r, "torchft_faults_gpt2.json"),
             "torchft_faults_cells_intel":
                 lambda r: render_torchft_faults(r, "torchft_faults_cells.2026-12-06-intel.json")}


def render_section(name, results):
    if name.startswith("history_") and name != "history_index":
        base = name[len("history_"):]
        if base not in RENDERERS:
            raise KeyError(name)
        _lenient[0] = True
        try:
            return RENDERERS[base](results)
        finally:
            _lenient[0] = False
    if name == "ops_vs_torch" and not _lenient[0]:
        return ("_The per-op comparison broke the comparison rules; it is kept on the [history page](%s)._\n" %
                _rel(HISTORY))
    if name not in RENDERERS:
        raise KeyError(name)
    return RENDERERS[name](results)


_SECTION = re.compile(r"<!-- results:([a-z0-9_]+) -->\n.*?<!-- /results:\1 -->", re.S)


def render(text, results, target="README.md"):
    _target[0] = target

    def sub(m):
        body = render_section(m.group(1), results)
        return "<!-- results:%s -->\n%s<!-- /results:%s -->" % (m.group(1), body if body.endswith("\n") else
                                                               body + "\n", m.group(1))
    return _SECTION.sub(sub, text)


# Numbers a reader could quote as a measurement: decimals, percentages, ratios, times, rates and sizes with units.
_NUMBER = re.compile(r"(?<![\w.\-/])(?:x\d+(?:\.\d+)?|\d+(?:\.\d+)?(?:x\b|\s?%|\s?(?:ms|µs|us|s|GB/s|MB/s|"
                     r"GFLOP/s|samples/s|MB|GB|KB)\b)|\d+\.\d+)")


def prose_numbers(text):
    """(line number, token) of every measurement-like number outside rendered sections, code and link targets."""
    hits = []
    text = _SECTION.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for i, line in enumerate(text.split("\n"), 1):
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        hits += [(i, m.group(0)) for m in _NUMBER.finditer(line)]
    return hits


def pages(readme, docs):
    out = [(readme, "README.md")]
    if docs and os.path.isdir(docs):
        out += [(os.path.join(docs, f), "docs/results/" + f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", default=os.path.join(REPO, "README.md"))
    ap.add_argument("--docs", default=os.path.join(REPO, "docs", "results"),
                    help="folder of result pages rendered besides the README")
    ap.add_argument("--results", default=os.path.join(REPO, "experiments", "results"))
    ap.add_argument("--check", action="store_true", help="exit 1 if a rendered section differs or prose has numbers")
    a = ap.parse_args()
    if not os.path.isfile(a.readme):
        ap.exit(2, "render_results: error: --readme %s: no such file\n" % a.readme)
    if not os.path.isdir(a.docs):
        ap.exit(2, "render_results: error: --docs %s: not a directory\n" % a.docs)
    if not os.path.isdir(a.results):
        ap.exit(2, "render_results: error: --results %s: not a directory\n" % a.results)
    stale, numbers = [], []
    for path, target in pages(a.readme, a.docs):
        text = open(path).read()
        try:
            new = render(text, a.results, target)
        except KeyError as e:
            ap.exit(2, "render_results: error: %s: unknown section %s\n" % (path, e.args[0]))
        numbers += ["%s:%d: %s" % (target, n, tok) for n, tok in prose_numbers(new)]
        if new != text:
            stale.append(path)
            if not a.check:
                open(path, "w").write(new)
                print("render_results: rewrote the marked sections of %s" % target)
    for n in numbers:
        sys.stderr.write("render_results: a number outside the rendered sections: %s\n" % n)
    if a.check:
        for p in stale:
            sys.stderr.write("render_results: %s is out of date with %s: run analysis/render_results.py\n" % (
                p, a.results))
        if stale or numbers:
            return 1
        print("render_results: every rendered section matches the results files, no number outside them")
        return 0
    return 1 if numbers else 0


if __name__ == "__main__":
    sys.exit(main())
