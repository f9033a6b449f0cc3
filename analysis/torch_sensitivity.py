#!/usr/bin/python3
"""Independent PyTorch check of /sensitivity/cosine (docs/design.md "HDF5 schema") for cnn on Fashion-MNIST.

Both modes first run `dreamddp train TRAIN_ARGS --out WORK/probed` (the probed run), then:

  exact  For the first --probes probes, re-run the deterministic trainer without the probe up to t0 and t0+d
         (--steps s --save-params), check the re-runs follow the probed run's trajectory (/steps loss), load each
         theta(s) into a PyTorch cnn, recompute every layer's gradient on the same probe batch (same samples, same
         loss, BatchNorm in training mode over the same 256-sample chunks) and compare the cosines with the HDF5
         values. Exit 1 when the max |difference| exceeds --tol (default 1e-3) or a re-run left the trajectory.
  stat   Train the same definition independently in PyTorch (same initialization rule and seed, same data order
         and sharding, same SGD/momentum/schedule, ddp over --ranks simulated ranks), probe at the same steps with
         the same probe batch, and compare the cosine-vs-delay tables per layer and delay (mean and max |diff|,
         monotonicity in the delay, layer ranking). Reports; exit 1 only when the torch run could not be compared.
  both   exact, then stat on the same probed run.

  torch_sensitivity.py exact --bin build/dreamddp --work /tmp/xc [--ranks N] [--probes K] [--tol T] -- \\
      --model cnn --steps 12 --batch 16 --lr-schedule const --warmup 0 --sensitivity delays=1/2,every=4,batch=64

The probe rule reproduced here (core/train/sensitivity.cpp, core/data/shuffle.cpp, core/data/sharder.h): the probe
batch is the first B entries of permutation(60000, seed ^ 0x5E15, stream 2^64-1) (splitmix64 Fisher-Yates); the
gradient of the mean cross-entropy over the batch is accumulated over chunks of 256 samples, each chunk's forward
in training mode (BatchNorm batch statistics of that chunk), weighted by chunk/B; the probe at step t sees
theta(t), the parameters before step t's update. Exit 2 on bad usage or input, with one line naming the problem.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from sensitivity_port import BadInput, LAYERS, Mismatch, Sharder, fixed_subset, init_params, load_train
from sensitivity_runs import parse_train_args, probed_run, read_params, run_cached, split_argv, strip_options

CHUNK = 256                                   # core/train/sensitivity.cpp: image models' probe chunk
MUTATIONS = ("none", "probe-shift", "one-chunk", "eval-bn")
MUTATE = "none"   # --mutate: a deliberately wrong probe rule on the torch side, so a test can see the check fail


# ---- the PyTorch side ----

def torch_cnn():
    """peers/torch_ddp.py cnn(), written out (Sequential indices are what LAYERS maps to)."""
    import torch.nn as nn

    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(1, 32), *block(32, 64), nn.MaxPool2d(2), *block(64, 128), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(128 * 7 * 7, 256), nn.ReLU(), nn.Linear(256, 10))


def load_into(model, params):
    import torch
    sd = model.state_dict()
    for name, idx, pnames, bnames in LAYERS:
        for tname, arr in zip(pnames + bnames, params[name]):
            t = sd[idx + "." + tname]
            t.copy_(torch.from_numpy(arr).view_as(t))


def layer_grads(model):
    mods = dict(model.named_modules())
    return [np.concatenate([getattr(mods[idx], t).grad.detach().numpy().ravel().astype(np.float64) for t in pnames])
            for _, idx, pnames, _ in LAYERS]


def probe_gradient(model, x, y):
    """Per-layer gradient of the mean loss over (x, y) in chunks of 256, training-mode BN, buffers restored."""
    import torch
    import torch.nn.functional as F
    saved = {k: v.clone() for k, v in model.state_dict().items() if "running" in k or "num_batches" in k}
    model.train(MUTATE != "eval-bn")
    model.zero_grad(set_to_none=False)
    n = x.shape[0]
    chunk = n if MUTATE == "one-chunk" else CHUNK
    for first in range(0, n, chunk):
        xc, yc = x[first:first + chunk], y[first:first + chunk]
        (F.cross_entropy(model(xc), yc) * (xc.shape[0] / n)).backward()
    g = layer_grads(model)
    model.zero_grad(set_to_none=False)
    with torch.no_grad():
        sd = model.state_dict()
        for k, v in saved.items():
            sd[k].copy_(v)
    return g


def cosines(g0, g1):
    out = []
    for a, b in zip(g0, g1):
        gg, rr = float(b @ b), float(a @ a)
        out.append(float(a @ b) / np.sqrt(gg * rr) if gg > 0 and rr > 0 else np.nan)
    return np.asarray(out)


def probe_batch(ta, xs, ys, step, rank, sharder):
    import torch
    if ta.sens["minibatch"]:
        idx = sharder.indices(step, rank)
    else:
        salt = 0x5E15 ^ (1 if MUTATE == "probe-shift" else 0)
        idx = fixed_subset(xs.shape[0], min(ta.sens["batch"], xs.shape[0]), ta.seed ^ salt)
    return torch.from_numpy(xs[idx]), torch.from_numpy(ys[idx])


# ---- exact mode ----

def check_exact_args(opts, ta):
    if opts.ranks > 1 and ta.policy != "ddp":
        raise BadInput("exact mode with --ranks > 1 needs --policy ddp (local policies average every layer at the "
                       "end of training, so --save-params after --steps s is not any rank's theta(s))")
    if ta.lr_schedule == "cosine" or not ta.warmup_given:
        raise BadInput("exact mode re-runs the trainer with fewer --steps: give --lr-schedule const (or step) and an "
                       "explicit --warmup, so that the learning rate of a step does not depend on --steps")


def exact(opts, ta, train_argv, ours, xs, ys):
    import h5py
    probes = ours["probe_steps"][:opts.probes] if opts.probes > 0 else ours["probe_steps"]
    delays = ours["delays"]
    states = sorted({t0 + d for t0 in probes for d in [0] + delays})
    base = strip_options(train_argv, {"--sensitivity", "--steps", "--eval-every", "--eval-samples"})
    params, traj = {}, []
    for s in states:
        pfile = os.path.join(opts.work, "theta%d%s.bin" % (s, "_%r" if opts.ranks > 1 else ""))
        rdir = os.path.join(opts.work, "rerun%d" % s)
        pfiles = [pfile.replace("%r", str(r)) for r in range(opts.ranks)]
        if s == 0:  # --steps must be >= 1: one step with a learning rate too small to move a float32 parameter
            argv0 = strip_options(base, {"--lr", "--warmup", "--lr-schedule"})
            run_cached(opts, "theta0", argv0, ["--steps", "1", "--lr", "1e-30", "--warmup", "0", "--lr-schedule",
                                               "const", "--eval-samples", "16", "--save-params", pfile],
                       "theta(0) run", pfiles)
        else:
            run_cached(opts, "rerun%d" % s, base, ["--steps", str(s), "--eval-samples", "16", "--save-params", pfile,
                                                   "--out", rdir, "--overwrite"], "re-run to step %d" % s,
                       pfiles + [os.path.join(rdir, "metrics.h5")])
            with h5py.File(os.path.join(rdir, "metrics.h5"), "r") as f:
                loss = f["steps"]["loss"][:]
            traj.append(float(np.max(np.abs(loss - ours["loss"][:s]))) if len(loss) == s else np.inf)
        params[s] = [read_params(f) for f in pfiles]
    # The stat mode's initialization (a port of ours) against the binary's theta(0), parameters only (one step's
    # forward moved the BatchNorm running statistics; lr 1e-30 moves a zero bias by ~1e-32).
    init_diff = max(float(np.max(np.abs(a - b))) for name in params[0][0] for a, b in
                    zip(params[0][0][name][:2], init_params(ta.seed)[name][:2])) if 0 in params else None
    model = torch_cnn()
    sharder = Sharder(xs.shape[0], ta.seed, opts.ranks, ta.batch)
    grads = {}
    for s in states:
        for r in range(opts.ranks):
            load_into(model, params[s][r])
            x, y = probe_batch(ta, xs, ys, s, r, sharder)
            grads[(s, r)] = probe_gradient(model, x, y)
    L, D = len(LAYERS), len(delays)
    mine = np.full((len(probes), L, D), np.nan)
    for p, t0 in enumerate(probes):
        for j, d in enumerate(delays):
            mine[p, :, j] = np.mean([cosines(grads[(t0, r)], grads[(t0 + d, r)]) for r in range(opts.ranks)], axis=0)
    theirs = ours["cos"][:len(probes)]
    nan_mismatch = int(np.sum(np.isnan(mine) != np.isnan(theirs)))
    diff = np.abs(mine - theirs)
    maxdiff = float(np.nanmax(diff))
    print("exact: %d probe(s) at t0 = %s, delays %s, %d rank(s), %d re-runs of the trainer"
          % (len(probes), probes, delays, opts.ranks, len(states)))
    for p, t0 in enumerate(probes):
        print("  probe t0=%d: dreamddp / torch per delay" % t0)
        print("    %-6s " % "layer" + " ".join("%20s" % ("d=%d" % d) for d in delays))
        for l, (name, _, _, _) in enumerate(LAYERS):
            print("    %-6s " % name + " ".join("%9.5f /%9.5f" % (theirs[p, l, j], mine[p, l, j]) for j in range(D)))
    traj_max = max(traj) if traj else 0.0
    print("  max |cos diff| = %.3g, mean = %.3g (tolerance %.3g); re-run trajectories: max |loss diff| vs the probed "
          "run = %.3g%s" % (maxdiff, float(np.nanmean(diff)), opts.tol, traj_max,
                           "" if init_diff is None else "; our init rule ported to numpy vs binary theta(0): max "
                                                        "|diff| = %.3g" % init_diff))
    res = {"mode": "exact", "probes": probes, "delays": delays, "ranks": opts.ranks, "max_abs_diff": maxdiff,
           "mean_abs_diff": float(np.nanmean(diff)), "nan_mismatch": nan_mismatch, "trajectory_max_loss_diff": traj_max,
           "init_port_max_diff": init_diff, "tol": opts.tol}
    res["ok"] = bool(maxdiff <= opts.tol and nan_mismatch == 0 and traj_max <= opts.traj_tol)
    return res


# ---- stat mode ----

def lr_at(ta, step):
    """core/optim/lr_schedule.cpp (min_lr 0, step: gamma 0.1 every 1000)."""
    if ta.warmup > 0 and step < ta.warmup:
        return ta.lr * (step + 1) / ta.warmup
    if ta.lr_schedule == "const":
        return ta.lr
    if ta.lr_schedule == "step":
        return ta.lr * 0.1 ** (step // 1000)
    span = max(1, ta.steps - ta.warmup)
    prog = min(1.0, (step - ta.warmup) / span)
    return 0.5 * ta.lr * (1.0 + np.cos(np.pi * prog))


def check_stat_args(opts, ta):
    if ta.policy != "ddp":
        raise BadInput("stat mode simulates ddp only (got --policy %s)" % ta.policy)


def stat(opts, ta, ours, xs, ys):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch_cnn()
    load_into(model, init_params(ta.seed))
    opt = torch.optim.SGD(model.parameters(), lr=ta.lr, momentum=ta.momentum, nesterov=ta.nesterov,
                          weight_decay=ta.weight_decay)
    sharder = Sharder(xs.shape[0], ta.seed, opts.ranks, ta.batch)
    probes, delays = ta.sens["probe_steps"], ta.sens["delays"]
    L, D = len(LAYERS), len(delays)
    mine = np.full((len(probes), L, D), np.nan)
    losses = np.zeros(ta.steps)
    ref = None
    t_start = time.time()
    for step in range(ta.steps):
        # The probe, before the step's forward (core/train/trainer.cpp), on theta(step).
        hit = [(p, j) for p, t0 in enumerate(probes) for j, d in enumerate(delays) if step == t0 + d]
        if step in probes or hit:
            g = [probe_gradient(model, *probe_batch(ta, xs, ys, step, r, sharder)) for r in range(opts.ranks)]
            for p, j in hit:
                mine[p, :, j] = np.mean([cosines(ref[r], g[r]) for r in range(opts.ranks)], axis=0)
            if step in probes:
                ref = g
        model.train()
        opt.zero_grad(set_to_none=False)
        for r in range(opts.ranks):  # ddp: each rank's own forward (its BN batch statistics), gradients averaged
            idx = sharder.indices(step, r)
            loss = F.cross_entropy(model(torch.from_numpy(xs[idx])), torch.from_numpy(ys[idx]))
            (loss / opts.ranks).backward()
            if r == 0:
                losses[step] = float(loss)
        for group in opt.param_groups:
            group["lr"] = lr_at(ta, step)
        opt.step()
        if opts.verbose and (step + 1) % max(1, ta.steps // 10) == 0:
            print("  torch step %d/%d loss %.4f (%.0f s)" % (step + 1, ta.steps, losses[step], time.time() - t_start),
                  flush=True)
    theirs = ours["cos"]
    if theirs.shape != mine.shape:
        raise Mismatch("our cosine array has shape %s, the torch run %s" % (theirs.shape, mine.shape))
    m_o, m_t = np.nanmean(theirs, axis=0), np.nanmean(mine, axis=0)      # [layer, delay], mean over probes
    d_all = np.abs(theirs - mine)
    d_mean = np.abs(m_o - m_t)
    ol = ours["loss"]
    track = next((i for i in range(len(ol)) if abs(ol[i] - losses[i]) > 1e-3 * max(1.0, abs(ol[i]))), None)
    tail = max(1, ta.steps // 10)

    def spearman(a, b):
        ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
        return float(np.corrcoef(ra, rb)[0, 1])

    def falls(m):  # share of layers whose probe-mean cosine does not rise from the smallest to the largest delay
        return float(np.mean(m[:, -1] <= m[:, 0]))

    print("stat: %d step(s), batch %d x %d rank(s), %d probe(s) at t0 = %s, delays %s; mean over probes, "
          "dreamddp / torch" % (ta.steps, ta.batch, opts.ranks, len(probes), probes, delays))
    print("    %-6s " % "layer" + " ".join("%20s" % ("d=%d" % d) for d in delays))
    for l, (name, _, _, _) in enumerate(LAYERS):
        print("    %-6s " % name + " ".join("%9.4f /%9.4f" % (m_o[l, j], m_t[l, j]) for j in range(D)))
    rho = [spearman(m_o[:, j], m_t[:, j]) for j in range(D)]
    print("  per-probe |diff|: mean %.4f, max %.4f; probe-mean |diff|: mean %.4f, max %.4f" %
          (float(np.nanmean(d_all)), float(np.nanmax(d_all)), float(np.nanmean(d_mean)), float(np.nanmax(d_mean))))
    print("  layer-ranking Spearman per delay: %s; layers whose cosine falls from d=%d to d=%d: dreamddp %.0f%%, "
          "torch %.0f%%" % (", ".join("%.2f" % r for r in rho), delays[0], delays[-1], 100 * falls(m_o),
                            100 * falls(m_t)))
    print("  losses: first step where they differ by > 1e-3 relative: %s; mean of the last %d steps: dreamddp %.4f, "
          "torch %.4f" % (track, tail, float(np.mean(ol[-tail:])), float(np.mean(losses[-tail:]))))
    return {"mode": "stat", "ranks": opts.ranks, "steps": ta.steps, "probes": probes, "delays": delays,
            "mean_abs_diff": float(np.nanmean(d_all)), "max_abs_diff": float(np.nanmax(d_all)),
            "probe_mean_mean_abs_diff": float(np.nanmean(d_mean)), "probe_mean_max_abs_diff": float(np.nanmax(d_mean)),
            "spearman_per_delay": rho, "falls_ours": falls(m_o), "falls_torch": falls(m_t),
            "loss_track_until": track, "final_loss_ours": float(np.mean(ol[-tail:])),
            "final_loss_torch": float(np.mean(losses[-tail:])),
            "ours_mean": m_o.tolist(), "torch_mean": m_t.tolist(), "layers": [l[0] for l in LAYERS], "ok": True}


def main(argv):
    mine, train_argv = split_argv(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Everything after -- is passed to `dreamddp train`.")
    p.add_argument("mode", choices=["exact", "stat", "both"])
    p.add_argument("--bin", required=True, help="the dreamddp binary")
    p.add_argument("--work", required=True, help="working directory (created; runs and parameter files go there)")
    p.add_argument("--ranks", type=int, default=1, help="ranks of our run (dreamddp launch -n); stat: simulated ranks")
    p.add_argument("--probes", type=int, default=2, help="exact: check the first K probes (0: all)")
    p.add_argument("--tol", type=float, default=1e-3, help="exact: max |cosine difference| allowed")
    p.add_argument("--traj-tol", type=float, default=1e-6, help="exact: max |loss difference| of a re-run")
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--mutate", choices=MUTATIONS, default="none",
                   help="self-test: break the torch side's probe rule (other samples, one BN chunk, BN in eval mode); "
                        "the exact check must then fail")
    p.add_argument("--json", help="also write the results (a list of objects) to this file")
    p.add_argument("-v", "--verbose", action="store_true")
    try:
        opts = p.parse_args(mine)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    global MUTATE
    MUTATE = opts.mutate
    try:
        if not train_argv:
            raise BadInput("give the train arguments after --")
        if not (os.path.isfile(opts.bin) and os.access(opts.bin, os.X_OK)):
            raise BadInput("--bin %s: not an executable file" % opts.bin)
        if opts.ranks < 1 or opts.probes < 0 or not opts.tol >= 0:
            raise BadInput("--ranks must be >= 1, --probes >= 0, --tol >= 0")
        ta = parse_train_args(train_argv)
        if opts.mode in ("exact", "both"):
            check_exact_args(opts, ta)
        if opts.mode in ("stat", "both"):
            check_stat_args(opts, ta)
        os.makedirs(opts.work, exist_ok=True)
        import torch
        torch.set_num_threads(opts.torch_threads)
        xs, ys = load_train(ta.data_dir)
        ours = probed_run(opts, train_argv)
        if ours["probe_steps"] != ta.sens["probe_steps"] or ours["delays"] != ta.sens["delays"]:
            raise Mismatch("the run probed at %s with delays %s; the probe rule here gives %s and %s" %
                           (ours["probe_steps"], ours["delays"], ta.sens["probe_steps"], ta.sens["delays"]))
        results = []
        if opts.mode in ("exact", "both"):
            results.append(exact(opts, ta, train_argv, ours, xs, ys))
        if opts.mode in ("stat", "both"):
            results.append(stat(opts, ta, ours, xs, ys))
    except BadInput as e:
        print("torch_sensitivity: %s" % e, file=sys.stderr)
        return 2
    except Mismatch as e:
        print("torch_sensitivity: FAILED: %s" % e, file=sys.stderr)
        return 1
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)
    ok = all(r["ok"] for r in results)
    print(json.dumps({r["mode"]: {k: v for k, v in r.items() if k not in ("ours_mean", "torch_mean")} for r in results}))
    if not ok:
        print("torch_sensitivity: FAILED: the exact check is outside its tolerance (see above)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
