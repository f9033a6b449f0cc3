"""Bad inputs of the command line and the INI files given with --config (same option names), and bad policy specs
(core/sync/policy/policy_spec.cpp), --switch and --sensitivity."""
import os
import random
import re

from corpus_case import Case, QUICK, have_gpu


# ---------------------------------------------------------------------------------------------------------------
# CLI options of `dreamddp train` (app/cli/train_options.cpp, checked in core/train/trainer.cpp).

INT_OPTS = ["batch", "steps", "warmup", "eval-every", "eval-samples", "checkpoint-every", "threads", "log-every",
            "anomaly-window", "inject-nan", "bucket-cap-mb"]
FLOAT_OPTS = ["lr", "momentum", "weight-decay", "timeout", "staleness-lr", "anomaly-spike", "first-bucket-mb"]
MALFORMED_NUM = ["abc", "", " ", "1e", "12abc", "0x10", "--", "1,5", "٣"]
MALFORMED_INT = MALFORMED_NUM + ["1.5", "nan", "inf", "99999999999999999999999"]
# Values in range syntax but outside what each option allows (trainer.cpp resolve_and_validate).
OUT_OF_RANGE = {
    "batch": ["0", "-1", "1048577", "9223372036854775807"],
    "steps": ["0", "-1", "-9223372036854775808"],
    "warmup": ["-2", "-1000"],
    "eval-every": ["-1"],
    "eval-samples": ["-1"],
    "checkpoint-every": ["-1"],
    "threads": ["-1", "1025", "2147483647"],
    "log-every": ["-1"],
    "anomaly-window": ["0", "-1"],
    "bucket-cap-mb": ["0", "-1", "9223372036854775807"],
    "lr": ["0", "-0.1", "nan", "inf", "-inf", "1e39"],
    "momentum": ["-0.1", "1", "1.5", "nan", "inf"],
    "weight-decay": ["-1", "nan", "inf"],
    "timeout": ["0", "-1", "86401", "nan", "inf"],
    "staleness-lr": ["-1", "0", "1.5", "nan", "inf"],
    "anomaly-spike": ["-1", "nan"],
    "first-bucket-mb": ["0", "-1", "nan", "inf", "1e300"],
}
STRING_OPTS = {"model": "mlp", "data": "synthetic", "device": "cpu", "backend": "gloo", "optimizer": "sgd",
               "lr-schedule": "cosine", "anomaly": "fallback"}


def quick_without(extra):
    """QUICK less the options a case sets itself (given twice, Boost would refuse the repetition instead)."""
    given = {x.split("=")[0] for x in extra if x.startswith("--")}
    out = []
    for i in range(0, len(QUICK), 2):
        if QUICK[i] not in given:
            out += QUICK[i:i + 2]
    return out


def cli_cases(tmp):
    cases = []
    n = [0]

    def fresh():
        n[0] += 1
        return os.path.join(tmp, "cli_out_%d" % n[0])

    def add(name, extra, must, quick=True):
        out = fresh()
        cases.append(Case("cli", name, ["train"] + extra + (quick_without(extra) if quick else []) +
                          ["--out", out], must, fresh_out=out))

    for o in INT_OPTS:
        for v in MALFORMED_INT:
            add("--%s=%r" % (o, v), ["--%s=%s" % (o, v)], o)
        for v in OUT_OF_RANGE.get(o, []):
            add("--%s=%s" % (o, v), ["--%s=%s" % (o, v)], o)
    for o in FLOAT_OPTS:
        for v in MALFORMED_NUM:
            add("--%s=%r" % (o, v), ["--%s=%s" % (o, v)], o)
        for v in OUT_OF_RANGE.get(o, []):
            add("--%s=%s" % (o, v), ["--%s=%s" % (o, v)], o)
    for v in ["-1", "abc", "1.5", "18446744073709551616", ""]:
        add("--seed %r" % v, ["--seed", v], "seed")
    for o, good in STRING_OPTS.items():
        for v in ["bogus", "", " " + good, good.upper(), good + "\x7f", "x" * 5000]:
            add("--%s %r" % (o, v[:20]), ["--" + o, v], o.split("-")[0])
    if not have_gpu():  # on a GPU machine --device cuda trains; here it must be refused with exit 2
        add("--device cuda", ["--device", "cuda"], "cuda")
    add("--inject-nan with gpt-mini", ["--model", "gpt-mini", "--inject-nan", "1"], "inject-nan")
    add("--checkpoint-every without --out", ["--checkpoint-every", "1"], "checkpoint-every")
    cases[-1].args = cases[-1].args[:-2]
    add("--control-file in a missing directory", ["--control-file", "/nonexistent_dir/ctl.txt"], "nonexistent_dir")
    add("--control-file is a directory", ["--control-file", tmp], "control-file")
    add("unknown option", ["--no-such-option", "1"], "no-such-option")
    add("unknown short option", ["-q"], "-q")
    add("positional argument", ["stray"], "stray")
    add("ambiguous prefix", ["--lr-s", "const", "--l", "1"], "--l")
    add("option twice", ["--lr", "0.1", "--lr", "0.2"], "lr")
    add("missing value at the end", ["--model"], "model", quick=False)
    cases[-1].args = ["train"] + QUICK + ["--out", cases[-1].fresh_out, "--model"]
    add("flag with a value", ["--nesterov=yes"], "nesterov")
    add("--help with a value", ["--help=3"], "help")
    add("empty option name", ["--", "x"], "x")
    add("--sensitivity every=0", ["--sensitivity", "every=0"], "sensitivity")
    # A single process opens no store, yet a misspelt --rendezvous is refused, not silently ignored.
    for v in ["foo://x", "tcp://127.0.0.1:1", "file://relative/dir", "file://", "redis://", "redis://:6379", "x"]:
        add("--rendezvous %r (one process)" % v, ["--rendezvous", v], "rendezvous")
    return _cli_places_and_commands(tmp, cases, fresh, add)


def _cli_places_and_commands(tmp, cases, fresh, add):
    """cli_cases, continued: --out and --resume places, the sub-commands' options, models and data that do not fit."""
    # --out problems: a file, a directory that is not empty (must stay untouched), an unwritable place.
    a_file = os.path.join(tmp, "cli_a_file")
    with open(a_file, "w") as f:
        f.write("keep me\n")
    cases.append(Case("cli", "--out is a file", ["train"] + QUICK + ["--out", a_file], "--out", keep=[a_file]))
    busy = os.path.join(tmp, "cli_busy")
    os.makedirs(busy)
    with open(os.path.join(busy, "metrics.h5"), "w") as f:
        f.write("an earlier run\n")
    cases.append(Case("cli", "--out not empty", ["train"] + QUICK + ["--out", busy], "not empty", keep=[busy]))
    cases.append(Case("cli", "--out under a file", ["train"] + QUICK + ["--out", a_file + "/sub"], "--out"))
    cases.append(Case("cli", "--out in /proc", ["train"] + QUICK + ["--out", "/proc/dreamddp_corpus"], "--out"))
    cases.append(Case("cli", "--resume missing dir", ["train"] + QUICK + ["--resume", tmp + "/no_such_run"],
                      "resume", fresh_out=tmp + "/no_such_run"))
    # Unknown sub-command and sub-command options of `schedule`.
    cases.append(Case("cli", "schedule --h 0", ["schedule", "--profile", tmp, "--h", "0"], "--h"))
    cases.append(Case("cli", "schedule --h abc", ["schedule", "--profile", tmp, "--h", "abc"], "h"))
    cases.append(Case("cli", "schedule --h 1e10", ["schedule", "--profile", tmp, "--h", "99999999999"], "h"))
    cases.append(Case("cli", "schedule --h 2000000000", ["schedule", "--profile", tmp, "--h", "2000000000"], "--h"))
    cases.append(Case("cli", "schedule --h 4097", ["schedule", "--profile", tmp, "--h", "4097"], "--h"))
    cases.append(Case("cli", "schedule without --h", ["schedule", "--profile", tmp], "--h"))
    cases.append(Case("cli", "schedule unknown option", ["schedule", "--bogus"], "bogus"))
    # `simulate`: platform specs, straggler factors and layer sizes (all refused before SimGrid starts).
    gpt2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "dreamddp-profiles",
                        "gpt2_16_1gbit")
    sim = ["simulate", "--profile", gpt2, "--comm-bw", "1Gbps", "--steps", "2"]
    for name, extra, must in (("simulate --cluster 0x8", ["--cluster", "0x8"], "N"),
                              ("simulate --cluster 4by2", ["--cluster", "4by2"], "NxG"),
                              ("simulate --cluster 4096x32", ["--cluster", "4096x32"], "more than 65536"),
                              # N x G overflows a 32-bit int to 0: refused, not 4 billion ranks built
                              ("simulate --cluster 65536x65536", ["--cluster", "65536x65536"], "more than 65536"),
                              ("simulate --cluster inter without unit", ["--cluster", "4x2,inter=10"], "unit"),
                              ("simulate --cluster lat=fast", ["--cluster", "4x2,lat=fast"], "duration"),
                              ("simulate --cluster unknown key", ["--cluster", "4x2,speed=1Gbps"], "unknown key"),
                              ("simulate --slow without factor", ["--cluster", "4x2", "--slow", "3"], "RANK=FACTOR"),
                              ("simulate --slow factor 0", ["--cluster", "4x2", "--slow", "3=0"], "FACTOR"),
                              ("simulate --cluster and --platform", ["--cluster", "4x2", "--platform", gpt2], "one of"),
                              ("simulate --cfg without value", ["--cluster", "4x2", "--cfg", "network/model"],
                               "KEY:VALUE")):
        out = fresh()
        cases.append(Case("cli", name, sim + extra + ["--out", out], must, fresh_out=out))
    # A world whose SimGrid actors need more memory mappings than this kernel allows (two per actor, three actors
    # per rank): refused at once, naming the sysctl (it used to abort inside SimGrid after minutes of set-up).
    try:
        limit = int(open("/proc/sys/vm/max_map_count").read())
    except (OSError, ValueError):
        limit = 0
    over = (limit - 1024) // 6 + 1
    if 0 < over <= 65536:
        out = fresh()
        cases.append(Case("cli", "simulate more ranks than vm.max_map_count allows",
                          sim + ["--cluster", "%dx1" % over, "--out", out], "vm.max_map_count", fresh_out=out))
    cases.append(Case("cli", "simulate profile without sizes", ["simulate", "--profile", gpt2, "--cluster", "4x2"],
                      "sizes"))
    # A model and data that do not fit (core/data/open_dataset.cpp check_fits): refused before --out exists.
    for model, data in [("gpt-mini", "fashion-mnist"), ("mlp", "text"), ("cnn", "text"), ("resnet20", "text")]:
        add("--model %s --data %s" % (model, data), ["--model", model, "--data", data], "--model " + model)
    add("--model gpt-mini --data fashion-mnist (profile)", [], "--model gpt-mini", quick=False)
    cases[-1].args = ["profile", "--model", "gpt-mini", "--data", "fashion-mnist", "--threads", "1",
                      "--out", cases[-1].fresh_out]
    text_file = os.path.join(tmp, "cli_text")
    with open(text_file, "w") as f:
        f.write("The quick brown fox jumps over the lazy dog.\n" * 40)
    add("text corpus missing", ["--model", "gpt-mini", "--data", "text", "--data-dir", tmp + "/no_such_corpus"],
        "no_such_corpus")
    add("text corpus too short for the context", ["--model", "gpt-mini", "--data", "text", "--data-dir", a_file],
        "window")
    # Controls: the quick settings themselves are accepted, and a token model reads text and synthetic tokens.
    out = fresh()
    cases.append(Case("cli", "control: quick run", ["train"] + QUICK + ["--out", out], expect=0))
    for data in [["--data", "text", "--data-dir", text_file], ["--data", "synthetic"]]:
        out = fresh()
        cases.append(Case("cli", "control: gpt-mini on %s" % data[1], ["train", "--model", "gpt-mini"] + data +
                          ["--threads", "1", "--steps", "1", "--batch", "2", "--eval-samples", "2", "--out", out],
                          expect=0))
    return cases


# ---------------------------------------------------------------------------------------------------------------
# INI files given with --config (Boost parse_config_file, same option names).

def ini_cases(tmp):
    cases = []
    rnd = random.Random(7)
    bodies = [
        ("unknown key", "model = mlp\nno_such_key = 3\n", "no_such_key"),
        ("malformed line", "model mlp\n", "model mlp"),
        ("key without name", "= mlp\n", "config"),
        ("section prefix", "[train]\nmodel = mlp\n", "train.model"),
        ("bad int value", "batch = abc\n", "batch"),
        ("empty int value", "steps =\n", "steps"),
        ("float for int", "batch = 2.5\n", "batch"),
        ("bad float value", "lr = fast\n", "lr"),
        ("out of range", "batch = 0\n", "batch"),
        ("nan lr", "lr = nan\n", "lr"),
        ("inf momentum", "momentum = inf\n", "momentum"),
        ("negative timeout", "timeout = -5\n", "timeout"),
        ("huge steps", "steps = 99999999999999999999999999\n", "steps"),
        ("duplicate key given twice", "batch = 8\nbatch = 16\n", "batch"),
        ("unknown model", "model = resnet1000\n", "resnet1000"),
        ("empty model", "model =\n", "model"),
        ("bad policy", "policy = ddp:k=3\n", "policy"),
        ("bad switch", "switch = soon:ddp\n", "switch"),
        ("flag with a word", "nesterov = maybe\n", "nesterov"),
        ("utf-8 key", "mödel = mlp\n", "mödel"),
        ("long key", "k" * 100000 + " = 1\n", "kkkk"),
        ("binary garbage", bytes(rnd.randrange(256) for _ in range(4096)), "config"),
        ("nul bytes", b"model = mlp\n\x00\x00\x00\n", "config"),
        ("utf-8 BOM before a bad key", b"\xef\xbb\xbfbogus = 1\n", "bogus"),
    ]
    for name, body, must in bodies:
        p = os.path.join(tmp, "ini_%d.ini" % len(cases))
        raw = body if isinstance(body, bytes) else body.encode()
        # The quick settings as INI lines, first, unless the case is about that key (the file is the subject,
        # so nothing on the command line may override it).
        quick = "".join("%s = %s\n" % (QUICK[i][2:], QUICK[i + 1]) for i in range(0, len(QUICK), 2)
                        if not re.search(rb"(^|\n)\s*" + QUICK[i][2:].encode() + rb"\s*=", raw))
        if raw.startswith(b"\xef\xbb\xbf"):
            quick = ""
        with open(p, "wb") as f:
            f.write(quick.encode() + raw)
        out = os.path.join(tmp, "ini_out_%d" % len(cases))
        args = ["train", "--config", p, "--out", out]
        cases.append(Case("ini", name, args, must, fresh_out=out))
    for name, path, must in [("missing file", tmp + "/no_such.ini", "no_such.ini"),
                             ("directory instead of file", tmp, "config"),
                             ("empty path", "", "config")]:
        out = os.path.join(tmp, "ini_out_%d" % len(cases))
        cases.append(Case("ini", name, ["train", "--config", path] + QUICK + ["--out", out], must, fresh_out=out))
    # Controls: an empty file and a good file are accepted; the command line overrides the file.
    for name, body in [("control: empty file", ""), ("control: good file", "model = mlp\nbatch = 4\nlr = 0.1\n"),
                       ("control: cli overrides file", "batch = 0\n")]:
        p = os.path.join(tmp, "ini_ok_%d.ini" % len(cases))
        with open(p, "w") as f:
            f.write(body)
        cases.append(Case("ini", name, ["train", "--config", p] + QUICK, expect=0))
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Policy specs (core/sync/policy/policy_spec.cpp and the policies), --switch, --sensitivity.

def policy_cases(tmp):
    cases = []
    rnd = random.Random(13)

    def add(name, opt, value, must):
        out = os.path.join(tmp, "pol_out_%d" % len(cases))
        cases.append(Case("policy", name, ["train", opt, value] + QUICK + ["--out", out], must, fresh_out=out))

    specs = ["", ":", "ddp:", ":ddp", "ddp:k", "ddp:=1", "ddp:k=", "ddp:,", "ddp:k=1", "bogus", "DDP", " ddp",
             "ddp ", "localsgd:k=0", "localsgd:k=-1", "localsgd:k=abc", "localsgd:k=1.5", "localsgd:k=1e3",
             "localsgd:k=99999999999999999999", "localsgd:k=1048577", "localsgd:k=4,k=4", "localsgd:h=4",
             "plsgd:h=0", "plsgd:h=4097", "dreamddp:h=0", "dreamddp:fillin=2", "dreamddp:profile_steps=1",
             "dreamddp:h=8,profile=" + tmp + "/no_profile", "staleness:t=0", "staleness:t=-3", "staleness:t=",
             "threshold:thr=2", "threshold:thr=nan", "threshold:ema=1", "threshold:min=0", "threshold:z=inf",
             "hybrid:bogus=1", "hier:nodes=0x0", "hier:fast=1.5", "hier:intra=0", "fixed:in=0", "fixed:=3",
             "fixed:nosuch*=2,default=1", "fixed:fc9=2", "plsgd:h=4,delay=4", "plsgd:h=4,delay=-1",
             "plsgd:h=4,delay=x", "dreamddp:h=4,delay=1,fillin=1", "localsgd:k=4,delay=4", "ddp:delay=1",
             "plsgd:h=4,compress=zip", "plsgd:h=4,outer=adam", "plsgd:h=4,outer=avg:lr=1",
             "plsgd:h=4,outer=nesterov:lr=0", "plsgd:h=4,outer=nesterov:lr=0.7,lr=1", "plsgd:h=4,outer=nesterov:beta=1",
             "plsgd:h=4,outer=nesterov:momentum=1", "plsgd:h=4,lr=0.7", "hier:outer=nesterov", "ddp:compress=int8",
             "plsgd:h=4,outer=nesterov:", "plsgd:h=4,outer=:lr=1",
             "plsgd:h=4,compress=topk", "plsgd:h=4,compress=topk:1", "plsgd:h=4,compress=topk:p=0",
             "plsgd:h=4,compress=topk:p=50.01", "plsgd:h=4,compress=topk:p=-1", "plsgd:h=4,compress=topk:p=nan",
             "plsgd:h=4,compress=topk:p=1e-400x", "plsgd:h=4,compress=topk:p=1,values=bf16",
             "plsgd:h=4,compress=topk:p=1,p=2", "plsgd:h=4,compress=int8:p=1", "plsgd:h=4,compress=bf16,values=int8",
             "ddp:compress=topk:p=1",
             "ddp+staleness:t=0", "ddp+", "+staleness:t=8", "ddp+ddp", "localsgd:k=4+bogus:t=1",
             "ddp\x01", "dd\u2603p", "\u202eddp", "dreamddp:h=\u0668", "ddp:k=1\tx",
             "a" * 100000, "localsgd:" + ",".join("k%d=1" % i for i in range(10000)),
             "localsgd:k=" + "9" * 100000]
    for s in specs:
        add("--policy %r" % s[:40], "--policy", s, "policy")
    for i in range(15):
        alphabet = "abcdefghijklmnopqrstuvwxyz:=,+._-0123456789 \u00e9\u4e2d"
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 40)))
        if s in ("ddp",):
            continue
        add("--policy random %r" % s, "--policy", s, "policy")
    for s in ["", "abc", "5", ":ddp", "-1:ddp", "x:ddp", "5:bogus", "5:", "99999999999999999999:ddp", "1.5:ddp",
              "5:localsgd:k=0", "5 :ddp"]:
        add("--switch %r" % s, "--switch", s, "switch")
    for s in ["delays=0", "delays=", "delays=a", "every=0", "every=abc", "bogus=1", "delays=1/2,every=2",
              "delays=99999999999", "delays=-1", "probe=bad", "first=-1", ",", "=", "delays=1/2/4,every=", "x"]:
        add("--sensitivity %r" % s, "--sensitivity", s, "sensitivity")
    # Controls: well-formed specs are accepted.
    for s in ["ddp", "localsgd:k=2", "hybrid", "localsgd:k=2,delay=1,outer=nesterov:lr=0.7,momentum=0.9,compress=int8",
              "localsgd:k=2,delay=1,outer=nesterov:lr=0.7,momentum=0.9,compress=topk:p=1,values=int8"]:
        cases.append(Case("policy", "control: --policy " + s, ["train", "--policy", s] + QUICK, expect=0))
    return cases
