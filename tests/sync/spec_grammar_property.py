#!/usr/bin/env python3
"""Property test over the policy-spec grammar (docs/policies.md "Spec grammar").

Random valid specs (a policy, its keys, merge keys, composites with a staleness cap in either order, numbers in
every plain-decimal form) must train two steps on 2 ranks with the ranks' final parameters bitwise equal and with
summary.json recording the spec that ran; random invalid ones (each a valid spec with one mistake) must exit 2 with
one line on stderr. The seed is printed, and fixed unless DD_GRAMMAR_SEED says otherwise, so a failure reruns.
Usage: spec_grammar_property.py DREAMDDP_BIN [VALID INVALID]"""
import json, os, random, subprocess, sys, tempfile

BIN = sys.argv[1]
N_VALID = int(sys.argv[2]) if len(sys.argv) > 2 else 8
N_INVALID = int(sys.argv[3]) if len(sys.argv) > 3 else 24
SEED = int(os.environ.get("DD_GRAMMAR_SEED", "20240607"))
rng = random.Random(SEED)
print("seed", SEED)
T = ["train", "--model", "mlp:width=64", "--data", "synthetic", "--batch", "16", "--threads", "1", "--steps", "2"]


def num(x):  # the same value in one of the plain decimal forms
    forms = [repr(float(x)), f"{x:g}"]
    if 0 < x < 1: forms.append(f"{x:g}".lstrip("0"))
    forms.append(f"{x * 10:g}e-1")
    return rng.choice(forms)


def merge_keys(period, composite):
    keys = []
    if not composite and period > 1 and rng.random() < 0.4:
        keys.append(f"delay={rng.randrange(0, period)}")
    if rng.random() < 0.4:
        o = "outer=nesterov"
        if rng.random() < 0.5:
            o += f":lr={num(rng.choice([0.5, 0.7, 1.0]))},momentum={num(rng.choice([0.0, 0.5, 0.9]))}"
        keys.append(o)
    if rng.random() < 0.5:
        c = rng.choice(["bf16", "int8", "auto", "topk"])
        if c == "topk":
            c += f":p={num(rng.choice([0.5, 1.0, 5.0]))}" + (",values=int8" if rng.random() < 0.5 else "")
        keys.append("compress=" + c)
    rng.shuffle(keys)
    return keys


def valid_spec():
    composite = rng.random() < 0.5
    kind = rng.choice(["ddp", "localsgd", "plsgd", "dreamddp", "staleness"] if not composite
                      else ["ddp", "localsgd", "plsgd", "dreamddp"])
    if kind == "ddp":
        base = "ddp"
    elif kind == "staleness":
        base = f"staleness:t={rng.randint(1, 6)}"
    else:
        key = "k" if kind == "localsgd" else "h"
        period = rng.randint(1, 6)
        keys = [f"{key}={period}"] + merge_keys(period, composite)
        base = kind + ":" + ",".join(keys)
    if not composite:
        return base
    cap = f"staleness:t={rng.randint(1, 6)}"
    return base + "+" + cap if rng.random() < 0.5 else cap + "+" + base


def invalid_spec():
    s = valid_spec()
    mistakes = [
        lambda: "plsgd:h=" + rng.choice([" 4", "0x4", "+4", "4.", "4e0", "", "four"]),
        lambda: "plsgd:h=4,compress=topk:p=" + rng.choice([" 1", "0x10", "+1", "inf", "nan", "0", "51", "1 "]),
        lambda: "plsgd:h=4,outer=nesterov:lr=" + rng.choice(["1e", ".", "-", "0x1", " 0.7"]),
        lambda: s + ",zz=1" if ":" in s.split("+")[0] else s + ":zz=1",
        lambda: s + "+",
        lambda: "+" + s,
        lambda: s + "+staleness:t=2" if "+" in s else "ddp+" + rng.choice(["plsgd:h=2", "localsgd:k=2"]),
        lambda: f"plsgd:h=4,delay={rng.randint(1, 3)}+staleness:t={rng.randint(1, 8)}",
        lambda: f"staleness:t=4,compress={rng.choice(['int8', 'bf16'])}+plsgd:h=4",
        lambda: "plsgd:h=4,,compress=int8",
        lambda: "nosuch:h=4",
        lambda: "plsgd:h=4,h=5",
    ]
    return rng.choice(mistakes)()


failures = []
with tempfile.TemporaryDirectory(prefix="dd_grammar.") as w:
    for i in range(N_VALID):
        spec = valid_spec()
        out = os.path.join(w, f"v{i}")
        r = subprocess.run([BIN, "launch", "-n", "2", "--"] + T + ["--policy", spec, "--out", out, "--save-params",
                           os.path.join(out, "p%r.bin")], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            failures.append(f"valid {spec!r}: exit {r.returncode}\n{r.stderr}")
            continue
        p0 = open(os.path.join(out, "p0.bin"), "rb").read()
        p1 = open(os.path.join(out, "p1.bin"), "rb").read()
        if p0 != p1:
            failures.append(f"valid {spec!r}: the ranks' parameters differ")
        got = json.load(open(os.path.join(out, "summary.json")))["policy"]
        if got != spec:
            failures.append(f"valid {spec!r}: summary.json records {got!r}")
        print("ok  valid  ", spec)
    for i in range(N_INVALID):
        spec = invalid_spec()
        out = os.path.join(w, f"i{i}")
        r = subprocess.run([BIN] + T + ["--policy", spec, "--out", out], capture_output=True, text=True, timeout=60)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        if r.returncode != 2 or len(lines) != 1:
            failures.append(f"invalid {spec!r}: exit {r.returncode}, {len(lines)} line(s) on stderr:\n{r.stderr}")
        elif os.path.exists(out):
            failures.append(f"invalid {spec!r}: left {out}")
        else:
            print("ok  invalid", repr(spec), "->", lines[0])
if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"OK: {N_VALID} valid and {N_INVALID} invalid specs")
