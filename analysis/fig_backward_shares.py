"""GPT-2's per-layer backward time as shares of the whole backward pass: a `dreamddp profile --model gpt2` profile
beside the DreamDDP artifact's GPT-2 profile (Hugging Face module names), layer by layer and by kind of layer.

  /usr/bin/python3 analysis/fig_backward_shares.py --ours DIR --artifact DIR [--out-dir docs/figures]
                                                   [--json experiments/results/backward_shares_gpt2.json]

A layer's backward time in a profile is the time from the previous layer's gradient being ready to its own, so
work of modules that own no parameters (dropout, activation) and of the tied output head lands in the next layer
that owns parameters. The artifact times those modules separately; they are reported as their own kind, and
its untied lm_head as the head. Here the head is tied to the token embedding, and its backward (the first work of
the backward pass) is in the final layer norm's time: the kind "final norm + head" adds the two on both sides.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "experiments", "lib"))

HF_BLOCK = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_attn": "qkv", "attn.c_proj": "proj", "mlp.c_fc": "fc",
            "mlp.c_proj": "fc2"}
KINDS = ["embeddings", "layer norms", "attention qkv", "attention proj", "mlp fc", "mlp fc2",
         "final norm + head", "no parameters"]


def die(msg):
    sys.stderr.write("fig_backward_shares: error: %s\n" % msg)
    sys.exit(2)


def read_bp(d):
    p = os.path.join(d, "bp.json")
    try:
        bp = json.load(open(p))
    except (OSError, ValueError) as e:
        die("%s: %s" % (p, e))
    if not isinstance(bp, dict) or not bp or not all(isinstance(v, (int, float)) and v >= 0 for v in bp.values()):
        die("%s: expected a non-empty object of layer -> seconds (>= 0)" % p)
    return bp


def ours_name(hf):
    """Our layer for an artifact module name; None for a module that owns no parameters; 'head' for lm_head."""
    if hf in ("transformer.wte", "transformer.wpe"):
        return hf.split(".", 1)[1]
    if hf == "transformer.ln_f":
        return "ln"
    if hf == "lm_head":
        return "head"
    m = re.match(r"transformer\.h\.(\d+)\.(.+)$", hf)
    if m and m.group(2) in HF_BLOCK:
        return "blocks.%s.%s" % (m.group(1), HF_BLOCK[m.group(2)])
    return None


def kind(name):
    if name is None:
        return "no parameters"
    if name in ("wte", "wpe"):
        return "embeddings"
    if name in ("ln", "head"):
        return "final norm + head"
    leaf = name.rsplit(".", 1)[-1]  # a leaf GPT-2 does not have: None
    return {"ln1": "layer norms", "ln2": "layer norms", "qkv": "attention qkv", "proj": "attention proj",
            "fc": "mlp fc", "fc2": "mlp fc2"}.get(leaf)


def shares(ours_bp, art_bp):
    tot_o, tot_a = sum(ours_bp.values()), sum(art_bp.values())
    if tot_o <= 0 or tot_a <= 0:
        die("a profile with zero backward time")
    layer_a = {}
    by_kind = {k: [0.0, 0.0] for k in KINDS}
    for hf, t in art_bp.items():
        n = ours_name(hf)
        by_kind[kind(n)][1] += t / tot_a
        if n is not None:  # the head's time goes with the final norm's, as it does in our tied model
            n = "ln" if n == "head" else n
            layer_a[n] = layer_a.get(n, 0.0) + t / tot_a
    unknown = [n for n in ours_bp if kind(n) is None]
    if unknown:
        die("our profile has layers that are not GPT-2's: %s" % ", ".join(unknown[:5]))
    for n, t in ours_bp.items():
        by_kind[kind(n)][0] += t / tot_o
    missing = [n for n in ours_bp if n not in layer_a]
    if missing:
        die("the artifact profile has no module for our layers %s" % ", ".join(missing[:5]))
    layers = [{"layer": n, "ours": t / tot_o, "artifact": layer_a[n]} for n, t in ours_bp.items()]
    kinds = [{"kind": k, "ours": v[0], "artifact": v[1]} for k, v in by_kind.items()]
    return layers, kinds, tot_o, tot_a


def plot(layers, kinds, out_dir, label_a):
    import numpy as np
    from style import save
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 7), gridspec_kw={"height_ratios": [3, 2]})
    x = np.arange(len(layers))
    a1.plot(x, [100 * r["ours"] for r in layers], "o-", ms=3, label="ours (dreamddp profile --model gpt2)")
    a1.plot(x, [100 * r["artifact"] for r in layers], "s-", ms=3, label=label_a)
    step = max(1, len(layers) // 25)
    a1.set_xticks(x[::step])
    a1.set_xticklabels([r["layer"] for r in layers][::step], rotation=60, ha="right", fontsize=7)
    a1.set_ylabel("share of backward (%)")
    a1.set_title("GPT-2 small: each layer's share of the backward pass, forward order")
    a1.legend()
    k = np.arange(len(kinds))
    a2.bar(k - 0.2, [100 * r["ours"] for r in kinds], 0.4, label="ours")
    a2.bar(k + 0.2, [100 * r["artifact"] for r in kinds], 0.4, label=label_a)
    a2.set_xticks(k)
    a2.set_xticklabels([r["kind"] for r in kinds], rotation=20, ha="right", fontsize=8)
    a2.set_ylabel("share (%)")
    a2.legend()
    return save(fig, out_dir, "backward_shares_gpt2")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", required=True, help="a `dreamddp profile --model gpt2` output directory")
    ap.add_argument("--artifact", required=True, help="an artifact profile directory (data/dreamddp-profiles/...)")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "docs", "figures"))
    ap.add_argument("--json", help="also write the shares, with provenance, to this results file")
    ap.add_argument("--command", help="the command line to record (default: this one)")
    a = ap.parse_args()
    start = None
    if a.json:
        import provenance
        start = provenance.start(REPO)  # before the figure is written: the tree as the study found it
    ours, art = read_bp(a.ours), read_bp(a.artifact)
    layers, kinds, tot_o, tot_a = shares(ours, art)
    label_a = "artifact %s" % os.path.basename(os.path.normpath(a.artifact))
    png = plot(layers, kinds, a.out_dir, label_a)
    print("%-20s %8s %9s" % ("kind", "ours %", "artifact %"))
    for r in kinds:
        print("%-20s %8.1f %9.1f" % (r["kind"], 100 * r["ours"], 100 * r["artifact"]))
    print("backward: ours %.1f ms, artifact %.1f ms; figure %s" % (1e3 * tot_o, 1e3 * tot_a, png))
    if a.json:
        doc = {"study": "backward_shares", "ours_profile": provenance.rel_to_repo(a.ours, REPO),
               "artifact_profile": provenance.rel_to_repo(a.artifact, REPO), "ours_backward_s": tot_o,
               "artifact_backward_s": tot_a, "kinds": kinds, "layers": layers,
               "figure": provenance.rel_to_repo(png, REPO)}
        if os.path.exists(os.path.join(a.ours, "meta.json")):
            doc["ours_meta"] = json.load(open(os.path.join(a.ours, "meta.json")))
        cmd = a.command or provenance.shell_command(["analysis/fig_backward_shares.py"] + sys.argv[1:])
        provenance.stamp(doc, cmd, start)
        provenance.write_json_atomic(a.json, doc)
        print("wrote %s" % a.json)


if __name__ == "__main__":
    main()
