#!/usr/bin/python3
"""Prints the dreamddp command that reruns a run, from its metrics.h5 alone (the root attributes hold the full,
resolved train configuration: docs/design.md "HDF5 schema").

  rerun_command.py RUN/metrics.h5 [--out DIR] [--bin PATH] [--save-params PATTERN]

Several ranks become `dreamddp launch -n WORLD -- train ...` (local ranks; on a cluster take the train part).
Left out on purpose: --resume, --config (its values are among the attributes), --rendezvous and --iface (where the
ranks met, not what they computed), --control-file (its switches are in /events, kind "switch": add them as
--switch STEP:SPEC). A one-process run records its backend as "none" (it had none): the command leaves
--backend out, as that run did. --on-peer-loss is kept (files written before it was recorded: the default, exit), and
so is --subnormals (files written before it was recorded computed with subnormals kept: --subnormals keep), and
--precision bf16 when the run computed in bf16 (files without the attribute computed in fp32).
A self-profiling dreamddp (no profile= or replay=) measured its own times, which a rerun would measure again and
may schedule differently: the command replays the recorded decisions instead (`replay=RUN_DIR`, the directory of
the metrics file; docs/engine_decisions.md). Only the first dreamddp policy of a run can be replayed (replay= takes
the earliest record): a later self-profiling one is left as it was, with a note on stderr. Numbers are written as the shortest text that reads back as the same value: the
float32 options (--lr, --momentum, --weight-decay; the file holds them widened to double) as float32, the others
as double. Exit 2 with one line on stderr for a file that is not a dreamddp metrics file.
"""
import argparse
import json
import os
import re
import shlex
import sys

# Attribute -> option, in the order `dreamddp train --help` lists them. kind: s string, i int, f float (double),
# f32 float32 (core/train/config.h keeps it as float), b flag.
OPTIONS = [
    ("model", "s"), ("data", "s"), ("data_dir", "s"), ("policy", "s"), ("backend", "s"), ("device", "s"),
    ("batch", "i"), ("steps", "i"), ("lr", "f32"), ("momentum", "f32"), ("nesterov", "b"), ("weight_decay", "f32"),
    ("optimizer", "s"), ("lr_schedule", "s"), ("warmup", "i"), ("seed", "s"), ("eval_every", "i"),
    ("eval_samples", "i"), ("checkpoint_every", "i"), ("sensitivity", "s"), ("timeout", "f"), ("threads", "i"),
    ("log_every", "i"), ("check_collectives", "b"), ("staleness_lr", "f"), ("avg_optimizer_state", "b"),
    ("immediate_update", "b"), ("anomaly", "s"), ("anomaly_spike", "f"), ("anomaly_window", "i"),
    ("inject_nan", "i"), ("bucket_cap_mb", "i"), ("first_bucket_mb", "f"),
]


def fail(msg):
    print("rerun_command.py: " + msg, file=sys.stderr)
    sys.exit(2)


def text(v, kind="s"):
    if isinstance(v, bytes):
        return v.decode()
    if hasattr(v, "item"):
        v = v.item()
    if kind == "f32":
        import numpy
        f = numpy.float32(v)
        if float(f) != float(v):
            fail("attribute value %r is not a float32" % v)
        return numpy.format_float_positional(f, unique=True, trim="-") if 1e-4 <= abs(f) < 1e16 or f == 0 \
            else numpy.format_float_scientific(f, unique=True, trim="-")
    if isinstance(v, float):
        return repr(v)  # shortest text that reads back as the same double
    return str(v)


def is_dreamddp(spec):
    return any(part.split(":", 1)[0] == "dreamddp" for part in spec.split("+"))


def self_profiling(spec):
    """A dreamddp spec that measures its own profile: neither profile= nor replay= in its dreamddp part."""
    return any(part.split(":", 1)[0] == "dreamddp" and not re.search(r"[:,](profile|replay)=", part)
               for part in spec.split("+"))


def with_replay(spec, run_dir):
    parts = spec.split("+")
    for i, part in enumerate(parts):
        if part.split(":", 1)[0] == "dreamddp":
            parts[i] = part + ("," if ":" in part else ":") + "replay=" + run_dir
    return "+".join(parts)


def replayable(decisions):
    """Whether the earliest dreamddp record (the one replay= takes) holds a schedule and, with a trial, its verdict."""
    recs = []
    for v in decisions.values():
        try:
            j = json.loads(text(v))
        except ValueError:
            continue
        if isinstance(j, dict) and str(j.get("policy", "")).startswith("dreamddp"):
            recs.append(j)
    if not recs:
        return False
    first = min(recs, key=lambda j: j.get("first_step", 0))
    trial = first.get("trial")
    return first.get("schedule") is not None and (not trial or "verdict" in trial)


def replay_decisions(policy, switches, decisions, run_dir):
    """The policy and switches with the run's first dreamddp policy replaying its recorded decisions, when it
    profiled itself and its record can be replayed."""
    timeline = [(0, "policy", policy)] + sorted((int(s.split(":", 1)[0]), "switch", s) for s in switches)
    firsts = [t for t in timeline if is_dreamddp(t[2] if t[1] == "policy" else t[2].split(":", 1)[1])]
    for i, (step, kind, s) in enumerate(firsts):
        spec = s if kind == "policy" else s.split(":", 1)[1]
        if not self_profiling(spec):
            continue
        if i > 0 or not replayable(decisions) or re.search(r"[,+:=]", run_dir):
            print("rerun_command.py: note: %s profiles itself and cannot be replayed from %s; the rerun measures "
                  "again and may schedule differently" % (spec, run_dir), file=sys.stderr)
            continue
        if kind == "policy":
            policy = with_replay(spec, run_dir)
        else:
            switches = [str(step) + ":" + with_replay(spec, run_dir) if x == s else x for x in switches]
    return policy, switches


def command(attrs, binary, out, save_params, decisions=None, run_dir=""):
    missing = [k for k, _ in OPTIONS + [("world", "i")] if k not in attrs]
    if missing:
        fail("the file lacks the configuration attributes %s (written by an older dreamddp?)" % ", ".join(missing))
    policy, switches = replay_decisions(text(attrs["policy"]), [text(s) for s in attrs.get("switches", [])],
                                        decisions or {}, run_dir)
    args = []
    for key, kind in OPTIONS:
        v = attrs[key]
        opt = "--" + key.replace("_", "-")
        if key == "policy":
            args += [opt, policy]
        elif kind == "b":
            if int(v):
                args.append(opt)
        elif key == "backend":
            if text(v) != "none":  # a one-process run had no backend; train takes the default, unused
                args += [opt, text(v)]
        elif key == "staleness_lr":
            if float(v) > 0:
                args += [opt, text(v)]
        elif key == "inject_nan":
            if int(v) >= 0:
                args += [opt, text(v)]
        elif key == "sensitivity":
            if text(v):
                args.append(opt + "=" + text(v))  # one word: the option's value is optional
        elif key == "data_dir":
            if text(v):
                args += [opt, text(v)]
        else:
            args += [opt, text(v, kind)]
    for sw in switches:
        args += ["--switch", sw]
    if "on_peer_loss" in attrs and text(attrs["on_peer_loss"]) != "exit":
        args += ["--on-peer-loss", text(attrs["on_peer_loss"])]
    # Subnormals are flushed unless the run kept them; a file written before the mode was recorded kept them.
    if text(attrs.get("subnormals", "keep")) != "flush":
        args += ["--subnormals", "keep"]
    if text(attrs.get("precision", "fp32")) != "fp32":
        args += ["--precision", text(attrs["precision"])]
    args += ["--out", out]
    if save_params:
        args += ["--save-params", save_params]
    world = int(attrs["world"])
    head = [binary, "launch", "-n", str(world), "--", "train"] if world > 1 else [binary, "train"]
    return " ".join(shlex.quote(a) for a in head + args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("--out", default="runs/rerun", help="--out of the new run (default runs/rerun)")
    ap.add_argument("--bin", default="build/dreamddp")
    ap.add_argument("--save-params", default="", help="also pass --save-params PATTERN")
    a = ap.parse_args()
    try:
        import h5py
    except ImportError:
        fail("needs h5py (Debian's /usr/bin/python3 with python3-h5py)")
    try:
        with h5py.File(a.metrics, "r") as f:
            attrs = dict(f.attrs)
            decisions = dict(f["decisions"].attrs) if "decisions" in f else {}
    except (OSError, ValueError) as e:
        fail("%s: not a readable HDF5 file (%s)" % (a.metrics, e))
    if "telemetry_schema_version" not in attrs:
        fail("%s: not a dreamddp metrics file (no telemetry_schema_version attribute)" % a.metrics)
    run_dir = os.path.dirname(os.path.abspath(a.metrics))
    print(command(attrs, a.bin, a.out, a.save_params, decisions, run_dir))


if __name__ == "__main__":
    main()
