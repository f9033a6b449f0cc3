#!/usr/bin/python3
"""End-to-end PyTorch check of the sensitivity probe (/sensitivity/cosine, docs/design.md "What the probe measures").

`analysis/torch_sensitivity.py exact` recomputes the cosines from parameters our trainer saved. This check takes
nothing from our run but its starting point: PyTorch starts from our theta(0), trains on the same batches with
the same optimizer, probes at the same steps with the probe rule as docs/design.md states it, and every cosine is
compared with ours. So it covers which parameters the probe sees, which samples, which BatchNorm mode, whether it
leaves the running statistics alone, and the step bookkeeping of every delay.

  probe_e2e.py --bin build/dreamddp --work DIR [--mutate RULE] [--json FILE] -- TRAIN_ARGS

TRAIN_ARGS: a one-rank `dreamddp train` of an image model (mlp, cnn, resnet20, resnet18, resnet50) on
fashion-mnist with SGD and --sensitivity (probe=fixed). The script runs
  ours    dreamddp train TRAIN_ARGS --out DIR/probed --save-params DIR/final.bin
  theta0  the same model and seed for one step at lr 1e-30 with --save-params: theta(0) (1e-30 x a gradient
          moves no float32 parameter away from its value, except zeros, by ~1e-31; the BatchNorm running
          statistics of that file are not used: PyTorch starts from its own, mean 0 and variance 1)
  torch   two replicas from theta(0), float32 and float64, each step: the probe (when the step is t0 or t0 + d),
          then the training step (train-mode forward on the step's batch, mean cross-entropy, SGD, the step's lr).

The bound. Our run and the float32 replica are two float32 evaluations of the same exact computation, which the
float64 replica stands for. For unit vectors |cos(a', b') - cos(a, b)| <= 2|a' - a|/|a| + 2|b' - b|/|b|, so
with e(s) = |g32(s) - g64(s)| / |g64(s)| (per layer, the float32 replica's relative gradient error at step s,
trajectory included, and taken as the largest up to step s: the replicas drift apart, and a step where they happen
to come close again bounds nothing) and our error at most K = 10 times that (another summation order and other kernels, the same
dynamics), |cos_ours - cos_torch32| <= 2 (1 + K) (e(t0) + e(t0 + d)) for every probe, layer and delay. The same
rule bounds the final BatchNorm running statistics (relative, per layer) and the per-step training loss. Where the
replicas have diverged (a chaotic run: float32 rounding grown to the size of the numbers) the bounds grow past
anything a cosine can differ by; the report counts per delay the cosines the check decides (bound below 0.1).
Exit 1 when any entry is outside its bound, 0 when all agree, 2 on bad usage or input.

--mutate breaks one rule on the PyTorch side, so a test can see the check fail: `late` (the delayed gradient on
theta(t0 + d + 1)), `early` (on theta(t0 + d - 1)), `other-samples` (the probe batch from another seed),
`eval-bn` (probe forward with BatchNorm in eval mode), `one-chunk` (one BatchNorm batch over the whole probe
batch instead of chunks of 256), `keep-stats` (the probe leaves its running statistics in the model).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "peers"))
import sensitivity_port  # noqa: E402  (the ported seed streams, sharder and data reader)
import sensitivity_runs  # noqa: E402  (the runs of our binary)
import torch_sensitivity as ts  # noqa: E402  (the lr schedule)
from probe_replica import Images, Replica, cosines, input_shape, read_buffers, rel_err  # noqa: E402

K = 10.0                 # our float32 error may be up to K times the float32 replica's (see the docstring)
DECIDED = 0.1            # a cosine whose bound is below this is decided by the check; above, the replicas diverged
IMAGE_MODELS = ("mlp", "cnn", "resnet20", "resnet18", "resnet50")
MUTATIONS = ("none", "late", "early", "other-samples", "eval-bn", "one-chunk", "keep-stats")


# ---- the train arguments ----

def parse_train_args(argv):
    p = argparse.ArgumentParser(prog="TRAIN_ARGS", add_help=False)
    for opt, kw in (("--model", {"default": "mlp"}), ("--data", {"default": "fashion-mnist"}),
                    ("--data-dir", {"default": "/usr/share/datasets/fashion-mnist"}), ("--policy", {"default": "ddp"}),
                    ("--batch", {"type": int, "default": 64}), ("--steps", {"type": int, "default": 1000}),
                    ("--lr", {"type": float, "default": 0.05}), ("--momentum", {"type": float, "default": 0.9}),
                    ("--weight-decay", {"type": float, "default": 0.0}), ("--optimizer", {"default": "sgd"}),
                    ("--lr-schedule", {"default": "cosine"}), ("--warmup", {"type": int, "default": None}),
                    ("--seed", {"type": int, "default": 0}), ("--sensitivity", {"default": None})):
        p.add_argument(opt, **kw)
    p.add_argument("--nesterov", action="store_true")
    for forbidden in ("--out", "--save-params", "--resume", "--config", "--switch", "--staleness-lr", "--inject-nan",
                      "--control-file", "--precision", "--device"):
        p.add_argument(forbidden, default=None)
    try:
        a, _ = p.parse_known_args(argv)
    except SystemExit:
        raise sensitivity_port.BadInput("cannot parse the train arguments %s" % " ".join(argv))
    for opt in ("out", "save_params", "resume", "config", "switch", "staleness_lr", "inject_nan", "control_file",
                "precision", "device"):
        if getattr(a, opt) is not None:
            raise sensitivity_port.BadInput("train argument --%s is not allowed here (the script sets --out and --save-params "
                              "itself and models plain one-rank CPU runs)" % opt.replace("_", "-"))
    import torch_ddp
    try:
        a.model_name, a.model_cfg = torch_ddp.parse_spec(a.model)
    except ValueError as e:
        raise sensitivity_port.BadInput(str(e))
    if a.model_name not in IMAGE_MODELS or a.data != "fashion-mnist":
        raise sensitivity_port.BadInput("only image models (%s) on fashion-mnist are modelled (got --model %s --data %s)"
                          % (", ".join(IMAGE_MODELS), a.model, a.data))
    if a.optimizer != "sgd" or a.policy != "ddp":
        raise sensitivity_port.BadInput("only --optimizer sgd --policy ddp is modelled (got %s, %s)" % (a.optimizer, a.policy))
    if a.sensitivity is None:
        raise sensitivity_port.BadInput("the train arguments need --sensitivity (the probe to check)")
    if a.warmup is None:
        a.warmup = a.steps // 50
    a.sens = sensitivity_runs.parse_sensitivity(a.sensitivity, a.steps)
    if a.sens["minibatch"]:
        raise sensitivity_port.BadInput("probe=minibatch is not modelled here (the fixed probe batch is)")
    return a


# ---- the check ----

def run_replica(ta, imgs, theta0, names, counts, dtype, mutate, verbose):
    """One PyTorch replica through the run: per probe (cosines [probe, layer, delay], the gradients by (t0, d),
    d = 0 the reference), the loss of every step and the final running statistics."""
    sharder = sensitivity_port.Sharder(imgs.size, ta.seed, 1, ta.batch)
    salt = 0x5E15 ^ (0x777 if mutate == "other-samples" else 0)
    pidx = sensitivity_port.fixed_subset(imgs.size, min(ta.sens["batch"], imgs.size), ta.seed ^ salt)
    px, py = imgs.x(pidx), imgs.y[pidx]
    probes, delays = ta.sens["probe_steps"], ta.sens["delays"]
    shift = {"late": 1, "early": -1}.get(mutate, 0)
    at = {}   # step -> the (t0, d) measured there
    for t0 in probes:
        at.setdefault(t0, []).append((t0, 0))
        for d in delays:
            at.setdefault(t0 + d + shift, []).append((t0, d))
    rep = Replica(ta.model, dtype, theta0, names, counts, ta)
    grads, losses = {}, np.zeros(ta.steps)
    start = time.time()
    for step in range(ta.steps + 1):
        if step in at:
            g = rep.probe_gradient(px, py, mutate)
            for key in at[step]:
                grads[key] = g
        if step == ta.steps:
            break
        idx = sharder.indices(step, 0)
        losses[step] = rep.train_step(imgs.x(idx), imgs.y[idx], ts.lr_at(ta, step))
        if verbose and (step + 1) % max(1, ta.steps // 5) == 0:
            print("  torch %s step %d/%d loss %.4f (%.0f s)" % (str(dtype).replace("torch.", ""), step + 1, ta.steps,
                                                              losses[step], time.time() - start), flush=True)
    cos = np.full((len(probes), len(names), len(delays)), np.nan)
    for p, t0 in enumerate(probes):
        for j, d in enumerate(delays):
            cos[p, :, j] = cosines(grads[(t0, 0)], grads[(t0, d)])
    return cos, grads, losses, rep.buffers()


def reference(opts, ta, imgs, theta0, names, counts, key):
    """The unmutated float32 and float64 replicas: the float32 cosines, losses and running statistics, and the bound
    of every compared number (module docstring). Kept in WORK/reference.npz for the same key (a mutated check
    reuses them)."""
    import torch
    path = os.path.join(opts.work, "reference.npz")
    if os.path.exists(path):
        z = np.load(path, allow_pickle=False)
        if str(z["key"]) == key:
            return {k: z[k] for k in z.files}
    c32, g32, l32, b32 = run_replica(ta, imgs, theta0, names, counts, torch.float32, "none", opts.verbose)
    c64, g64, l64, b64 = run_replica(ta, imgs, theta0, names, counts, torch.float64, "none", opts.verbose)
    probes, delays = ta.sens["probe_steps"], ta.sens["delays"]
    # The replicas drift apart as they go: a relative error is taken as the largest seen up to its step (a step where
    # the two happen to come close again bounds nothing).
    err = {}                                        # probe step -> per-layer relative error of the float32 replica
    for (t0, d) in sorted(g32, key=lambda k: k[0] + k[1]):
        err[t0 + d] = rel_err(g32[(t0, d)], g64[(t0, d)])
    env, run = {}, None
    for step in sorted(err):
        run = err[step] if run is None else np.maximum(run, err[step])
        env[step] = run
    bound = np.full(c32.shape, np.nan)
    for p, t0 in enumerate(probes):
        for j, d in enumerate(delays):
            bound[p, :, j] = 2 * (1 + K) * (env[t0] + env[t0 + d])
    eps = float(np.finfo(np.float32).eps)
    rel = np.maximum.accumulate(np.abs(l32 - l64) / np.abs(l64))
    loss_bound = 2 * (1 + K) * np.maximum(rel, eps) * np.abs(l64)
    has = np.array([b.size > 0 for b in b64])
    buf_bound = np.array([2 * (1 + K) * max(float(np.linalg.norm(u - v) / np.linalg.norm(v)), eps) if v.size else 0.0
                          for u, v in zip(b32, b64)])
    ref = {"key": np.array(key), "cos32": c32, "cos64": c64, "bound": bound, "loss32": l32, "loss_bound": loss_bound,
           "has_buffers": has, "buf_bound": buf_bound, "buf64_norm": np.array([np.linalg.norm(v) for v in b64]),
           "buf32": np.concatenate([b for b in b32]) if has.any() else np.zeros(0)}
    np.savez(path, **ref)
    return ref


def split_like(flat, parts):
    out, o = [], 0
    for n in parts:
        out.append(flat[o:o + n])
        o += n
    return out


def ours_side(opts, ta, train_argv):
    """Runs our binary (the probed run, and theta(0) from a one-step run at a negligible rate) and reads the probed
    run's layers, cosines and losses: (names, counts, cosines, losses, final params path, theta(0) path)."""
    import h5py
    run_opts = argparse.Namespace(bin=opts.bin, ranks=1, work=opts.work, verbose=opts.verbose)
    probed, final = os.path.join(opts.work, "probed"), os.path.join(opts.work, "final.bin")
    theta0 = os.path.join(opts.work, "theta0.bin")
    sensitivity_runs.run_cached(run_opts, "probed", train_argv, ["--out", probed, "--overwrite", "--save-params",
                                                                  final],
                                "probed run", [os.path.join(probed, "metrics.h5"), final])
    base = sensitivity_runs.strip_options(train_argv, {"--sensitivity", "--steps", "--lr", "--warmup",
                                                       "--lr-schedule", "--eval-every", "--eval-samples"})
    sensitivity_runs.run_cached(run_opts, "theta0", base, ["--steps", "1", "--lr", "1e-30", "--warmup", "0",
                                                           "--lr-schedule", "const", "--eval-samples", "16",
                                                           "--save-params", theta0],
                                "theta(0) run", [theta0])
    with h5py.File(os.path.join(probed, "metrics.h5"), "r") as f:
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["layers"]["name"]]
        counts = [int(n) for n in f["layers"]["params"]]
        ours = f["sensitivity/cosine"][:].astype(np.float64)
        o_probes = [int(x) for x in f["sensitivity/probe_steps"][:]]
        o_delays = [int(x) for x in f["sensitivity/delays"][:]]
        o_loss = f["steps"]["loss"][:].astype(np.float64)
    if o_probes != ta.sens["probe_steps"] or o_delays != ta.sens["delays"]:
        raise sensitivity_port.Mismatch("our run probed at %s with delays %s; the probe rule gives %s and %s"
                                        % (o_probes, o_delays, ta.sens["probe_steps"], ta.sens["delays"]))
    return names, counts, ours, o_loss, final, theta0


def delay_rows(ours, t32, t64, bound, names, delays):
    """Per delay: the mean cosines of both sides, their differences against the bound, the worst layer."""
    diff = np.abs(ours - t32)
    per_delay = []
    for j, d in enumerate(delays):
        worst = int(np.nanargmax(np.nanmean(diff[:, :, j], axis=0)))
        per_delay.append({"delay": d, "ours": float(np.nanmean(ours[:, :, j])), "torch": float(np.nanmean(t32[:, :, j])),
                          "torch64": float(np.nanmean(t64[:, :, j])),
                          "mean_abs_diff": float(np.nanmean(diff[:, :, j])), "max_abs_diff": float(np.nanmax(diff[:, :, j])),
                          "max_bound": float(np.nanmax(bound[:, :, j])), "min_bound": float(np.nanmin(bound[:, :, j])),
                          "worst_layer": names[worst], "worst_layer_mean_abs_diff": float(np.nanmean(diff[:, worst, j])),
                          "outside": int(np.sum(diff[:, :, j] > bound[:, :, j])),
                          "decided": int(np.sum(bound[:, :, j] < DECIDED)), "entries": int(bound[:, :, j].size)})
    return per_delay


def print_report(opts, ta, imgs, names, ours, t32, bound, per_delay, loss_d, loss_bad, buf_rows, buf_bad):
    probes, delays = ta.sens["probe_steps"], ta.sens["delays"]
    print("probe_e2e: %s, %d steps x batch %d, probes at %s, delays %s, probe batch %d%s"
          % (ta.model, ta.steps, ta.batch, probes, delays, min(ta.sens["batch"], imgs.size),
             "" if opts.mutate == "none" else "; torch side mutated: %s" % opts.mutate))
    print("  %-6s %9s %9s %9s %11s %11s %11s %9s  %s" % ("delay", "ours", "torch32", "torch64", "mean|diff|",
                                                          "max|diff|", "max bound", "decided", "worst layer (mean|diff|)"))
    for r in per_delay:
        print("  d=%-4d %9.5f %9.5f %9.5f %11.3g %11.3g %11.3g %4d/%-4d  %s (%.3g)%s"
              % (r["delay"], r["ours"], r["torch"], r["torch64"], r["mean_abs_diff"], r["max_abs_diff"], r["max_bound"],
                 r["decided"], r["entries"], r["worst_layer"], r["worst_layer_mean_abs_diff"],
                 "" if not r["outside"] else "  <- %d outside the bound" % r["outside"]))
    if opts.verbose:
        for p, t0 in enumerate(probes):
            print("  probe t0=%d: ours / torch32 (bound) per delay" % t0)
            for l, name in enumerate(names):
                print("    %-22s " % name[:22] + " ".join("%8.5f/%8.5f (%.1g)" % (ours[p, l, j], t32[p, l, j], bound[p, l, j])
                                                       for j in range(len(delays))))
    print("  training loss: max |ours - torch32| = %.3g over %d steps, %d outside the bound"
          % (float(np.max(loss_d)), ta.steps, loss_bad))
    if buf_rows:
        print("  final BatchNorm running statistics: max relative |ours - torch32| = %.3g over %d layers, %d outside"
              " the bound" % (max(d for _, d, _ in buf_rows), len(buf_rows), buf_bad))


def check(opts, ta, train_argv):
    import torch
    import torch_ddp
    torch.set_num_threads(opts.torch_threads)
    imgs = Images(ta.data_dir, input_shape(ta.model_name, ta.model_cfg))
    names, counts, ours, o_loss, final, theta0 = ours_side(opts, ta, train_argv)
    key = json.dumps({"argv": train_argv, "theta0_mtime_ns": os.stat(theta0).st_mtime_ns, "K": K, "rule": 2})
    ref = reference(opts, ta, imgs, theta0, names, counts, key)
    bound = ref["bound"]
    ours_bufs = read_buffers(final, torch_ddp.build(ta.model, 1)[0])
    if opts.mutate == "none":   # the reference's float32 replica is the one checked
        t32, loss32 = ref["cos32"], ref["loss32"]
        buf32 = split_like(ref["buf32"], [b.size for b in ours_bufs])
    else:
        t32, _, loss32, buf32 = run_replica(ta, imgs, theta0, names, counts, torch.float32, opts.mutate, opts.verbose)
    t64 = ref["cos64"]
    diff = np.abs(ours - t32)
    nan_mismatch = int(np.sum(np.isnan(ours) != np.isnan(t32)))
    cos_bad = int(np.sum(diff > bound))
    loss_d = np.abs(o_loss - loss32)
    loss_bad = int(np.sum(loss_d > ref["loss_bound"]))
    buf_rows = []
    for l, name in enumerate(names):
        if ours_bufs[l].size:
            d = float(np.linalg.norm(ours_bufs[l] - buf32[l]) / ref["buf64_norm"][l])
            buf_rows.append((name, d, float(ref["buf_bound"][l])))
    buf_bad = sum(1 for _, d, b in buf_rows if d > b)
    probes, delays = ta.sens["probe_steps"], ta.sens["delays"]
    per_delay = delay_rows(ours, t32, t64, bound, names, delays)
    print_report(opts, ta, imgs, names, ours, t32, bound, per_delay, loss_d, loss_bad, buf_rows, buf_bad)
    ok = cos_bad == 0 and nan_mismatch == 0 and loss_bad == 0 and buf_bad == 0
    return {"model": ta.model, "steps": ta.steps, "batch": ta.batch, "probe_batch": min(ta.sens["batch"], imgs.size),
            "probes": probes, "delays": delays, "layers": names, "mutate": opts.mutate, "K": K,
            "per_delay": per_delay, "cos_outside": cos_bad, "nan_mismatch": nan_mismatch,
            "loss_max_abs_diff": float(np.max(loss_d)), "loss_outside": loss_bad,
            "buffers_max_rel_diff": max([d for _, d, _ in buf_rows], default=0.0), "buffers_outside": buf_bad,
            "ours": ours.tolist(), "torch32": t32.tolist(), "torch64": t64.tolist(), "bound": bound.tolist(), "ok": ok}


def main(argv):
    mine, train_argv = sensitivity_runs.split_argv(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Everything after -- is passed to `dreamddp train`.")
    p.add_argument("--bin", required=True, help="the dreamddp binary")
    p.add_argument("--work", required=True, help="working directory (our runs and parameter files go there)")
    p.add_argument("--mutate", choices=MUTATIONS, default="none", help="self-test: break one rule on the torch side")
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--json", help="also write the result object to this file")
    p.add_argument("-v", "--verbose", action="store_true")
    try:
        opts = p.parse_args(mine)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        if not train_argv:
            raise sensitivity_port.BadInput("give the train arguments after --")
        if not (os.path.isfile(opts.bin) and os.access(opts.bin, os.X_OK)):
            raise sensitivity_port.BadInput("--bin %s: not an executable file" % opts.bin)
        ta = parse_train_args(train_argv)
        os.makedirs(opts.work, exist_ok=True)
        res = check(opts, ta, train_argv)
    except sensitivity_port.BadInput as e:
        print("probe_e2e: %s" % e, file=sys.stderr)
        return 2
    except sensitivity_port.Mismatch as e:
        print("probe_e2e: FAILED: %s" % e, file=sys.stderr)
        return 1
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(res, f, indent=1)
    if not res["ok"]:
        print("probe_e2e: FAILED: %d cosine(s), %d loss(es), %d running-statistics layer(s) outside their bound"
              % (res["cos_outside"] + res["nan_mismatch"], res["loss_outside"], res["buffers_outside"]), file=sys.stderr)
        return 1
    print("probe_e2e: every cosine within its bound")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
