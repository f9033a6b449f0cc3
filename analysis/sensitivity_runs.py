"""The trainer's side of analysis/torch_sensitivity.py: the training arguments it must understand, and the runs of
our binary whose outputs it compares against."""
import argparse
import json
import os
import subprocess
import time

import numpy as np
from sensitivity_port import BadInput, LAYERS, Mismatch


RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE")


def parse_train_args(argv):
    p = argparse.ArgumentParser(prog="TRAIN_ARGS", add_help=False)
    p.add_argument("--model", default="mlp")
    p.add_argument("--data", default="fashion-mnist")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--policy", default="ddp")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--optimizer", default="sgd")
    p.add_argument("--lr-schedule", default="cosine")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sensitivity", nargs="?", const="on", default=None)
    for forbidden in ("--out", "--save-params", "--resume", "--config", "--switch", "--staleness-lr", "--inject-nan",
                      "--control-file"):
        p.add_argument(forbidden, default=None)
    try:
        a, _ = p.parse_known_args(argv)
    except SystemExit:
        raise BadInput("cannot parse the train arguments %s" % " ".join(argv))
    for opt in ("out", "save_params", "resume", "config", "switch", "staleness_lr", "inject_nan", "control_file"):
        if getattr(a, opt) is not None:
            raise BadInput("train argument --%s is not allowed here (the script sets --out/--save-params itself and "
                           "models only plain runs)" % opt.replace("_", "-"))
    if a.model != "cnn" or a.data != "fashion-mnist":
        raise BadInput("only --model cnn --data fashion-mnist is modelled (got --model %s --data %s)" % (a.model, a.data))
    if a.optimizer != "sgd":
        raise BadInput("only --optimizer sgd is modelled (got %s)" % a.optimizer)
    if a.sensitivity is None:
        raise BadInput("the train arguments need --sensitivity (the probe to check)")
    if a.lr is None:
        a.lr = 0.05
    if a.warmup is None:
        a.warmup_given = False
        a.warmup = a.steps // 50
    else:
        a.warmup_given = True
    a.sens = parse_sensitivity(a.sensitivity, a.steps)
    return a


def parse_sensitivity(spec, steps):
    """core/train/sensitivity.cpp parse_sensitivity, with the probe steps it implies."""
    s = {"delays": [1, 2, 4, 8], "every": 0, "first": 0, "minibatch": False, "batch": 1024}
    if spec not in ("", "on"):
        key = ""
        for it in spec.split(","):
            if "=" not in it:
                if key != "delays":
                    raise BadInput("--sensitivity: expected key=value, got '%s'" % it)
                s["delays"].append(int(it))
                continue
            key, v = it.split("=", 1)
            if key == "delays":
                s["delays"] = [int(d) for d in v.split("/")]
            elif key in ("every", "first", "batch"):
                s[key] = int(v)
            elif key == "probe":
                if v not in ("fixed", "minibatch"):
                    raise BadInput("--sensitivity: probe=%s" % v)
                s["minibatch"] = v == "minibatch"
            else:
                raise BadInput("--sensitivity: unknown key '%s'" % key)
    s["delays"] = sorted(set(s["delays"]))
    if not s["delays"] or s["delays"][0] < 1:
        raise BadInput("--sensitivity %s: delays must be >= 1" % spec)
    maxd = s["delays"][-1]
    if 0 < s["every"] <= maxd:
        raise BadInput("--sensitivity %s: every must exceed the largest delay" % spec)
    ev = s["every"] if s["every"] > 0 else max(maxd + 1, steps // 8)
    s["probe_steps"] = list(range(s["first"], steps - maxd, ev))
    if not s["probe_steps"]:
        raise BadInput("--sensitivity %s: no probe fits in %d steps" % (spec, steps))
    return s


def strip_options(argv, names):
    """argv without the options `names` (and their values: '--x v' or '--x=v')."""
    flags = {"--nesterov", "--overwrite", "--check-collectives", "--immediate-update", "--avg-optimizer-state"}
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name in names:
            if "=" not in a and name not in flags and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                i += 1
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def run_ours(opts, train_argv, extra, what):
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    if opts.ranks > 1:
        cmd = [opts.bin, "launch", "-n", str(opts.ranks), "--", "train"] + train_argv + extra
    else:
        cmd = [opts.bin, "train"] + train_argv + extra
    t = time.time()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == 2:  # the binary refused the arguments or the data: bad input here too
        raise BadInput("%s: %s refused the arguments: %s" % (what, opts.bin, r.stderr.strip()[-1000:]))
    if r.returncode != 0:
        raise Mismatch("%s failed (exit %d): %s\n%s" % (what, r.returncode, " ".join(cmd), r.stderr[-2000:]))
    if opts.verbose:
        print("  ran %s in %.1f s: %s" % (what, time.time() - t, " ".join(cmd)), flush=True)
    return r


def run_cached(opts, name, train_argv, extra, what, outputs):
    """run_ours, skipped when WORK/name.args.json says the same binary already ran the same command and its
    outputs are there (the exact check and its mutation share the runs)."""
    st = os.stat(opts.bin)
    key = json.dumps({"argv": train_argv, "extra": extra, "ranks": opts.ranks, "bin": os.path.abspath(opts.bin),
                      "bin_mtime_ns": st.st_mtime_ns, "bin_size": st.st_size})
    stamp = os.path.join(opts.work, name + ".args.json")
    if os.path.exists(stamp) and open(stamp).read() == key and all(os.path.exists(o) for o in outputs):
        return
    if os.path.exists(stamp):
        os.remove(stamp)
    run_ours(opts, train_argv, extra, what)
    with open(stamp, "w") as f:
        f.write(key)


def probed_run(opts, train_argv):
    """Runs (or reuses, see run_cached) WORK/probed; returns its arrays."""
    import h5py
    d = os.path.join(opts.work, "probed")
    run_cached(opts, "probed", train_argv, ["--out", d, "--overwrite"], "probed run", [os.path.join(d, "metrics.h5")])
    with h5py.File(os.path.join(d, "metrics.h5"), "r") as f:
        sfx = "_minibatch" if "sensitivity/cosine_minibatch" in f else ""
        if "sensitivity/cosine" + sfx not in f:
            raise Mismatch("the probed run's metrics.h5 has no /sensitivity/cosine")
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["layers"]["name"]]
        res = {"cos": f["sensitivity/cosine" + sfx][:].astype(np.float64),
               "probe_steps": [int(x) for x in f["sensitivity/probe_steps" + sfx][:]],
               "delays": [int(x) for x in f["sensitivity/delays" + sfx][:]],
               "loss": f["steps"]["loss"][:], "minibatch": bool(sfx), "layers": names}
    if names != [l[0] for l in LAYERS]:
        raise Mismatch("the run's layers %s are not the cnn's %s" % (names, [l[0] for l in LAYERS]))
    return res


def read_params(path):
    raw = np.fromfile(path, dtype="<f4")
    out, o = {}, 0
    sizes = {"conv1": [288], "bn1": [32] * 4, "conv2": [18432], "bn2": [64] * 4, "conv3": [73728], "bn3": [128] * 4,
             "fc1": [6272 * 256, 256], "fc2": [2560, 10]}
    for name, _, _, _ in LAYERS:
        out[name] = []
        for n in sizes[name]:
            out[name].append(raw[o:o + n].copy())
            o += n
    if o != raw.size:
        raise Mismatch("%s holds %d floats, the cnn needs %d" % (path, raw.size, o))
    return out


def split_argv(argv):
    """(this script's arguments, the `dreamddp train` arguments after `--`)."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []
