#!/usr/bin/python3
"""Bad-input corpus for dreamddp: generates hand-made bad CLI options, INI files, IDX datasets, profile JSON,
checkpoints and policy specs at test time, runs the binary on each and checks the rejection contract.

Every bad input must: exit 2 (no signal, no hang: within --bound seconds), print exactly one
'dreamddp CMD: error: ...' line naming the problem and nothing else on stderr but the start-up banner, print no
summary, and leave the --out / --resume directory as it was (no new directory where the error is one of usage).
A few valid "control" inputs per reader must succeed, so a reader that rejects everything cannot pass.

usage: bad_inputs.py --bin PATH/dreamddp [--reader cli|ini|idx|profile|checkpoint|policy|all] [--jobs N]
"""
import argparse
import concurrent.futures as cf
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

# Options that keep an accidentally accepted case short: synthetic data, one thread, two tiny steps.
QUICK = ["--data", "synthetic", "--threads", "1", "--steps", "2", "--batch", "4", "--eval-samples", "8"]
DIAG = re.compile(r"^dreamddp( [\w-]+)?: error: \S")
BANNER = re.compile(r"^(train|launch): ")
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a terminal would act on these (\r rewrites the line)
# Output that means the process did not reject the input on purpose.
CRASH_MARKS = ["terminate called", "Sanitizer", "runtime error:", "Segmentation fault", "core dumped",
               "HDF5-DIAG", "Assertion", "stack smashing", "double free", "free(): ", "malloc(): ", "Aborted"]
# Environment variables that would make a run multi-rank (connect.cpp): a corpus case is one process.
RANK_VARS = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
             "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
             "SLURM_NTASKS_PER_NODE", "DREAMDDP_RENDEZVOUS"]


# Bad inputs the binary does not yet reject cleanly, by (reader, regex matched at the start of the case name),
# with where the fix goes. They are reported as XFAIL and do not fail the test; one that starts passing (XPASS)
# fails it, so that the entry is removed together with the fix. Everything else must pass.
# Cases that are known not to be rejected cleanly yet: (reader, regex on the case name) -> why and where to fix.
# Empty: every bad input in the corpus is refused with exit 2, one error line, nothing written.
KNOWN = {}



def have_gpu():
    """True when nvidia-smi lists a device (then `--device cuda` is valid input, not a bad one)."""
    import shutil
    if not shutil.which("nvidia-smi"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout

def known_bug(c):
    for (reader, pattern), why in KNOWN.items():
        if c.reader == reader and re.match(pattern, c.name):
            return why
    return None


class Case:
    """One input. args: argv after the binary. must: text the error line must contain (case-insensitive).
    fresh_out: a path that must not exist afterwards (usage errors are found before the run dir is made).
    keep: directories whose files must be byte-identical afterwards. expect: exit status (0 for controls)."""

    def __init__(self, reader, name, args, must="", fresh_out=None, keep=(), expect=2, empty_out=None):
        self.reader, self.name, self.args, self.must = reader, name, args, must
        self.fresh_out, self.keep, self.expect, self.empty_out = fresh_out, list(keep), expect, empty_out


def snapshot(d):
    """{relative path: sha1} of every file under d (None when d does not exist)."""
    if not os.path.lexists(d):
        return None
    if not os.path.isdir(d):
        with open(d, "rb") as fh:
            return {".": hashlib.sha1(fh.read()).hexdigest()}
    out = {}
    for root, dirs, files in os.walk(d):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, d)
            if os.path.isfile(p):
                with open(p, "rb") as fh:
                    out[rel] = hashlib.sha1(fh.read()).hexdigest()
            else:
                out[rel] = "link"
        for x in dirs:
            out.setdefault(os.path.relpath(os.path.join(root, x), d) + "/", "dir")
    return out


def run_case(binary, c, bound):
    """Runs one case; returns (ok, crashed, problems, seconds, rc, stderr)."""
    before = {d: snapshot(d) for d in c.keep}
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env["OMP_NUM_THREADS"] = "1"
    t0 = time.time()
    try:
        p = subprocess.run([binary] + c.args, stdin=subprocess.DEVNULL, capture_output=True, timeout=bound,
                           env=env)
        rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", (e.stdout or b"").decode("utf-8", "replace"), (e.stderr or b"").decode(
            "utf-8", "replace")
    secs = time.time() - t0
    problems = []
    crashed = rc == "timeout" or (isinstance(rc, int) and rc < 0) or any(m in out + err for m in CRASH_MARKS)
    if rc == "timeout":
        problems.append("no answer within %d s" % bound)
    elif rc != c.expect:
        problems.append("exit %s, expected %d" % (rc if rc >= 0 else "signal %d" % -rc, c.expect))
    for m in CRASH_MARKS:
        if m in out + err:
            problems.append("output holds %r" % m)
    if c.expect == 0 and c.must and c.must not in err:
        problems.append("stderr does not hold %r" % c.must)
    if c.expect == 2:
        lines = [l for l in err.split("\n") if l.strip()]
        diag = [l for l in lines if DIAG.match(l)]
        other = [l for l in lines if not DIAG.match(l) and not BANNER.match(l)]
        if len(diag) != 1:
            problems.append("%d 'dreamddp ...: error:' lines, expected 1" % len(diag))
        if other:
            problems.append("other stderr lines: %r" % other[:3])
        if diag and CONTROL.search(diag[0]):
            problems.append("error line holds control characters: %r" % CONTROL.search(diag[0]).group())
        if diag and re.search("more than once|multiple occurrences", diag[0]) and "twice" not in c.name:
            problems.append("the case repeats an option, so it does not test what it names")
        if diag and c.must and c.must.lower() not in diag[0].lower():
            problems.append("error line does not name %r" % c.must)
        if "{" in out:
            problems.append("printed a summary on error")
        if c.fresh_out and os.path.exists(c.fresh_out):
            problems.append("created --out %s" % c.fresh_out)
        if c.empty_out and os.path.isdir(c.empty_out) and os.listdir(c.empty_out):
            problems.append("wrote into --out: %s" % sorted(os.listdir(c.empty_out)))
    for d, b in before.items():
        a = snapshot(d)
        if a != b:
            changed = sorted(k for k in set(a or {}) | set(b or {}) if (a or {}).get(k) != (b or {}).get(k))
            problems.append("modified %s: %s" % (d, changed[:5]))
    return not problems, crashed, problems, secs, rc, err


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
# IDX + gzip dataset files (core/data/idx_file.cpp, fashion_mnist.cpp) through --data-dir.

IMG, LBL = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
TIMG, TLBL = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"


def idx_bytes(dims, data, type_code=0x08, ndims=None):
    head = bytes([0, 0, type_code, len(dims) if ndims is None else ndims])
    return head + b"".join(struct.pack(">I", d) for d in dims) + data


def gz(b):
    return gzip.compress(b, mtime=0)


def small_fashion(rnd, n):
    """A tiny valid Fashion-MNIST split: n images of 28x28 and n labels in 0..9."""
    img = idx_bytes([n, 28, 28], bytes(rnd.randrange(256) for _ in range(n * 784)))
    lbl = idx_bytes([n], bytes(rnd.randrange(10) for _ in range(n)))
    return img, lbl


def idx_cases(tmp):
    rnd = random.Random(11)
    img, lbl = small_fashion(rnd, 64)
    timg, tlbl = small_fashion(rnd, 16)
    good = {IMG: gz(img), LBL: gz(lbl), TIMG: gz(timg), TLBL: gz(tlbl)}
    cases = []

    def dataset(name, replace=None, drop=(), plain=None):
        """A data dir holding the good files, with `replace` {stem: bytes} stored as stem.gz (or as `plain`
        stems without .gz), `drop` stems left out."""
        d = os.path.join(tmp, "idx_%d" % len(cases))
        os.makedirs(d)
        files = dict(good)
        files.update(replace or {})
        for stem, b in files.items():
            if stem in drop:
                continue
            fn = stem if plain and stem in plain else stem + ".gz"
            with open(os.path.join(d, fn), "wb") as f:
                f.write(b)
        return d

    def add(name, must, expect=2, **kw):
        d = dataset(name, **kw)
        out = os.path.join(tmp, "idx_out_%d" % len(cases))
        args = ["train", "--data", "fashion-mnist", "--data-dir", d, "--threads", "1", "--steps", "2", "--batch",
                "4", "--eval-samples", "8", "--out", out]
        cases.append(Case("idx", name, args, must, expect=expect, keep=[d], fresh_out=out if expect == 2 else None))

    # Wrong magic: type code, number of dimensions, leading bytes, labels where images belong.
    add("magic: float type code", IMG, replace={IMG: gz(idx_bytes([64, 28, 28], img[16:], type_code=0x0D))})
    add("magic: int type code", IMG, replace={IMG: gz(idx_bytes([64, 28, 28], img[16:], type_code=0x0C))})
    add("magic: 2 dims", IMG, replace={IMG: gz(idx_bytes([64, 784], img[16:]))})
    add("magic: 4 dims", IMG, replace={IMG: gz(idx_bytes([64, 1, 28, 28], img[16:]))})
    add("magic: leading byte", IMG, replace={IMG: gz(b"\x01" + img[1:])})
    add("magic: labels in place of images", IMG, replace={IMG: gz(lbl)})
    add("magic: images in place of labels", LBL, replace={LBL: gz(img)})
    add("magic: ascii text", IMG, replace={IMG: gz(b"this is not an IDX file\n" * 10)})
    add("magic: double gzip", IMG, replace={IMG: gz(gz(img))})
    add("magic: test labels 0 dims", TLBL, replace={TLBL: gz(bytes([0, 0, 8, 0]) + tlbl[8:])})
    # Truncated header.
    for n in [0, 1, 3, 4, 5, 8, 12, 15]:
        add("header cut at %d bytes" % n, IMG, replace={IMG: gz(img[:n])})
    add("label header cut at 6 bytes", LBL, replace={LBL: gz(lbl[:6])})
    # Dimensions: overflow, zero, not 28x28, count mismatch.
    big = 2 ** 31
    add("dims 2^31 x 2^31 x 28", IMG, replace={IMG: gz(idx_bytes([big, big, 28], b""))})
    add("dims 2^32-1 each", IMG, replace={IMG: gz(idx_bytes([2 ** 32 - 1] * 3, img[16:]))})
    add("dims 2^31 x 28 x 28 (no data)", IMG, replace={IMG: gz(idx_bytes([big, 28, 28], img[16:]))})
    add("dims 2^20 x 28 x 28, 64 images", IMG, replace={IMG: gz(idx_bytes([2 ** 20, 28, 28], img[16:]))})
    add("labels 2^32-1", LBL, replace={LBL: gz(idx_bytes([2 ** 32 - 1], lbl[8:]))})
    add("dims zero images", IMG, replace={IMG: gz(idx_bytes([0, 28, 28], b""))})
    add("dims zero width", IMG, replace={IMG: gz(idx_bytes([64, 28, 0], b""))})
    add("images 32x32", IMG, replace={IMG: gz(idx_bytes([64, 32, 32], bytes(64 * 1024)))})
    add("images 784x1", IMG, replace={IMG: gz(idx_bytes([64, 784, 1], img[16:]))})
    add("images 1x784", IMG, replace={IMG: gz(idx_bytes([64, 1, 784], img[16:]))})
    add("one byte short", IMG, replace={IMG: gz(img[:-1])})
    add("one byte long", IMG, replace={IMG: gz(img + b"\x00")})
    add("half the data", IMG, replace={IMG: gz(img[:16 + 32 * 784])})
    add("labels one short", LBL, replace={LBL: gz(lbl[:-1])})
    add("labels one long", LBL, replace={LBL: gz(lbl + b"\x01")})
    add("63 labels for 64 images", LBL, replace={LBL: gz(idx_bytes([63], lbl[8:-1]))})
    add("65 labels for 64 images", LBL, replace={LBL: gz(idx_bytes([65], lbl[8:] + b"\x01"))})
    add("test: 15 labels for 16 images", TLBL, replace={TLBL: gz(idx_bytes([15], tlbl[8:-1]))})
    # Labels outside 0..9.
    for bad, at in [(10, 0), (255, 63), (128, 17)]:
        b = bytearray(lbl)
        b[8 + at] = bad
        add("label %d at %d" % (bad, at), "label %d" % bad, replace={LBL: gz(bytes(b))})
    b = bytearray(tlbl)
    b[8 + 5] = 10
    add("test label 10", TLBL, replace={TLBL: gz(bytes(b))})
    # Broken gzip: cut at several points, corrupted deflate data and trailer, random bytes.
    zimg = good[IMG]
    for cut in [1, 2, 10, 18, len(zimg) // 3, len(zimg) // 2, len(zimg) - 8, len(zimg) - 4, len(zimg) - 1]:
        add("gzip cut at %d of %d" % (cut, len(zimg)), IMG, replace={IMG: zimg[:cut]})
    for off in [len(zimg) // 2, len(zimg) - 6, len(zimg) - 2]:
        b = bytearray(zimg)
        b[off] ^= 0x55
        add("gzip byte %d flipped" % off, IMG, replace={IMG: bytes(b)})
    add("gzip header then garbage", IMG, replace={IMG: zimg[:10] + bytes(rnd.randrange(256) for _ in range(500))})
    add("random bytes", IMG, replace={IMG: bytes(rnd.randrange(256) for _ in range(2000))})
    add("random bytes (labels)", LBL, replace={LBL: bytes(rnd.randrange(256) for _ in range(300))})
    add("zero-length images", IMG, replace={IMG: b""})
    add("zero-length test labels", TLBL, replace={TLBL: b""})
    add("gzip of nothing", IMG, replace={IMG: gz(b"")})
    # Plain (uncompressed) files: bad ones are caught just the same.
    add("plain file one byte short", IMG, replace={IMG: img[:-1]}, plain={IMG})
    add("plain file wrong magic", IMG, replace={IMG: b"\x00\x00\x09\x03" + img[4:]}, plain={IMG})
    # Missing or odd files.
    add("missing train images", IMG, drop={IMG})
    add("missing test labels", TLBL, drop={TLBL})
    d = dataset("images are a directory", drop={IMG})
    os.makedirs(os.path.join(d, IMG + ".gz"))
    out = os.path.join(tmp, "idx_out_%d" % len(cases))
    cases.append(Case("idx", "images are a directory", ["train", "--data", "fashion-mnist", "--data-dir", d] +
                      QUICK[2:] + ["--out", out], IMG, keep=[d], fresh_out=out))
    d = dataset("images are /dev/zero", drop={IMG})
    os.symlink("/dev/zero", os.path.join(d, IMG + ".gz"))
    out = os.path.join(tmp, "idx_out_%d" % len(cases))
    cases.append(Case("idx", "images link to /dev/zero", ["train", "--data", "fashion-mnist", "--data-dir", d] +
                      QUICK[2:] + ["--out", out], IMG, keep=[d], fresh_out=out))
    d = dataset("dangling link", drop={LBL})
    os.symlink(os.path.join(d, "nowhere"), os.path.join(d, LBL + ".gz"))
    out = os.path.join(tmp, "idx_out_%d" % len(cases))
    cases.append(Case("idx", "labels are a dangling link", ["train", "--data", "fashion-mnist", "--data-dir", d] +
                      QUICK[2:] + ["--out", out], LBL, keep=[d], fresh_out=out))
    for name, ddir, must in [("data dir missing", tmp + "/no_such_data", "no_such_data"),
                             ("data dir is a file", __file__, IMG), ("data dir empty", tmp + "/idx_empty", IMG)]:
        os.makedirs(tmp + "/idx_empty", exist_ok=True)
        out = os.path.join(tmp, "idx_out_%d" % len(cases))
        cases.append(Case("idx", name, ["train", "--data", "fashion-mnist", "--data-dir", ddir] + QUICK[2:] +
                          ["--out", out], must, fresh_out=out))
    # Controls: the tiny set trains, gzip or plain, and a plain file named .gz is read transparently.
    add("control: tiny gzip set", "", expect=0)
    add("control: plain files", "", expect=0, replace={IMG: img, LBL: lbl}, plain={IMG, LBL})
    add("control: plain bytes under .gz name", "", expect=0, replace={IMG: img})
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Profile JSON (core/sync/profile/profile_io.cpp) through `schedule --profile DIR` and `--policy dreamddp:profile=DIR`.

def profile_cases(tmp):
    cases = []
    good_bp = '{"fc1": 0.002, "fc2": 0.001, "fc3": 0.001, "fc4": 0.0005}'
    good_comm = '{"fc1": 0.004, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}'

    def pdir(bp, comm):
        d = os.path.join(tmp, "prof_%d" % len(cases))
        os.makedirs(d)
        for fn, body in [("bp.json", bp), ("comm.json", comm)]:
            if body is None:
                continue
            with open(os.path.join(d, fn), "wb") as f:
                f.write(body if isinstance(body, bytes) else body.encode())
        return d

    def add(name, bp, comm, must, via="schedule", expect=2):
        d = pdir(bp, comm)
        if via == "schedule":
            out = os.path.join(tmp, "prof_out_%d.json" % len(cases))
            args = ["schedule", "--profile", d, "--h", "10", "--out", out]
        else:
            out = os.path.join(tmp, "prof_out_%d" % len(cases))
            args = ["train", "--policy", "dreamddp:h=8,profile=" + d] + QUICK + ["--out", out]
        cases.append(Case("profile", name + " [%s]" % via, args, must, fresh_out=out, keep=[d], expect=expect))

    deep = 100000
    bad_bodies = [
        ("not JSON", "hello", "not valid JSON"),
        ("empty file", "", "not valid JSON"),
        ("truncated object", '{"fc1": 0.1,', "not valid JSON"),
        ("trailing comma", '{"fc1": 0.1,}', "not valid JSON"),
        ("single quotes", "{'fc1': 0.1}", "not valid JSON"),
        ("bare Infinity", '{"fc1": Infinity}', "not valid JSON"),
        ("bare inf", '{"fc1": inf}', "not valid JSON"),
        ("trailing garbage", '{"fc1": 0.1} x', "not valid JSON"),
        ("binary garbage", bytes(random.Random(3).randrange(256) for _ in range(1000)), "not valid JSON"),
        ("invalid utf-8 key", b'{"fc\xff": 0.1}', "not valid JSON"),
        ("array", "[0.1, 0.2]", "JSON object"),
        ("string", '"fc1"', "JSON object"),
        ("number", "0.5", "JSON object"),
        ("null", "null", "JSON object"),
        ("deeply nested arrays", "[" * deep + "]" * deep, "bp.json"),
        ("deeply nested value", '{"fc1": ' + "[" * deep + "]" * deep + "}", "fc1"),
        ("string value", '{"fc1": "0.1"}', "non-numeric"),
        ("bool value", '{"fc1": true}', "non-numeric"),
        ("nested object value", '{"fc1": {"t": 0.1}}', "non-numeric"),
        ("array value", '{"fc1": [0.1]}', "non-numeric"),
        ("negative time", '{"fc1": -0.1}', "fc1"),
        ("negative zero point", '{"fc1": 0.1, "fc2": -1e-300}', "fc2"),
        ("huge time", '{"fc1": 1e400}', "1e400"),
        ("huge negative", '{"fc1": -1e400}', "1e400"),
        ("newline in layer name", '{"fc\\n1": -1}', "fc"),
        ("control chars in name", '{"\\u0001\\u001b[31m": "x"}', "non-numeric"),
        ("long layer name", '{"' + "L" * 100000 + '": -1}', "invalid time"),
    ]
    for name, body, must in bad_bodies:
        add("bp " + name, body, good_comm, must)
    for name, body, must in bad_bodies[:6] + bad_bodies[10:14] + bad_bodies[16:22]:
        add("comm " + name, good_bp, body, must)
    add("missing bp.json", None, good_comm, "bp.json")
    add("missing comm.json", good_bp, None, "comm.json")
    add("both empty objects", "{}", "{}", "no layers")
    d = os.path.join(tmp, "prof_dir_bp")
    os.makedirs(os.path.join(d, "bp.json"))
    with open(os.path.join(d, "comm.json"), "w") as f:
        f.write(good_comm)
    cases.append(Case("profile", "bp.json is a directory [schedule]", ["schedule", "--profile", d, "--h", "10"],
                      "bp.json", keep=[d]))
    cases.append(Case("profile", "profile dir missing [schedule]", ["schedule", "--profile", tmp + "/nope", "--h",
                      "10"], "nope"))
    cases.append(Case("profile", "profile dir is a file [schedule]", ["schedule", "--profile", __file__, "--h",
                      "10"], "profile"))
    # Through the policy spec of train: the profile is read when the policy is made, before any work.
    for name, bp, comm, must in [("not JSON", "hello", good_comm, "not valid JSON"),
                                 ("array", "[1]", good_comm, "JSON object"),
                                 ("negative", good_bp, '{"fc1": -3}', "fc1"),
                                 ("string value", good_bp, '{"fc1": "x"}', "non-numeric"),
                                 ("missing comm.json", good_bp, None, "comm.json")]:
        add(name, bp, comm, must, via="train")
    cases.append(Case("profile", "profile dir missing [train]", ["train", "--policy", "dreamddp:h=8,profile=" + tmp +
                      "/nope"] + QUICK, "nope"))
    # A layer without a time: null, NaN (Python's "no measurement"), or named by one file only. Each would cost 0 in
    # every model built on the profile, so each is refused naming the layer.
    three = '{"fc1": 0.004, "fc2": 0.004, "fc3": 0.004}'
    for via in ("schedule", "train"):
        add("bp NaN time with NaN comm", '{"fc1": NaN, "fc2": 0.1, "fc3": 0.1, "fc4": 0.1}',
            '{"fc1": NaN, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}', '"fc1" has no time', via=via)
        add("bp NaN time, comm Infinity", '{"fc1": NaN, "fc2": 0.1, "fc3": 0.1, "fc4": 0.1}',
            '{"fc1": Infinity, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}', "not valid JSON", via=via)
        add("bp NaN time, comm negative", '{"fc1": NaN, "fc2": 0.1, "fc3": 0.1, "fc4": 0.1}',
            '{"fc1": -0.004, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}', '"fc1"', via=via)
        # The artifact's Llama-2 profiles give NaN as the backward time of modules without parameters: read as 0 s,
        # and said in one line naming the layers.
        add("control: bp NaN time reads as 0 s", '{"fc1": 0.1, "fc2": NaN, "fc3": 0.1, "fc4": -NaN}', good_comm,
            '"fc2", "fc4" (modules without parameters): read as 0 s', via=via, expect=0)
        add("comm -NaN time", good_bp, '{"fc1": 0.2, "fc2": -NaN, "fc3": 0.1, "fc4": 0.1}', '"fc2" has no time', via=via)
        add("bp null time", '{"fc1": 0.1, "fc2": 0.1, "fc3": null, "fc4": 0.1}', good_comm, '"fc3" has no time', via=via)
        add("comm names 3 of 4 layers", good_bp, three, '"fc4"', via=via)
        add("bp names 3 of 4 layers", three, good_comm, '"fc4"', via=via)
        add("comm names another layer", good_bp, good_comm[:-1] + ', "fc5": 0.1}', '"fc5"', via=via)
        add("comm Infinity via NaN-like token", good_bp, '{"fc1": -Infinity}', "not valid JSON", via=via)
    # Controls: a good profile, and the same layers in another order in comm.json.
    add("control: good profile", good_bp, good_comm, "", expect=0)
    add("control: good profile", good_bp, good_comm, "", via="train", expect=0)
    add("control: comm.json in another order", good_bp,
        '{"fc4": 0.0001, "fc3": 0.004, "fc2": 0.004, "fc1": 0.004}', "", expect=0)
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints (core/train/checkpoint.cpp): "DDCKPT1\n" + body + CRC32(body), body = fingerprint string, step,
# params, buffers, optimizer state, layer steps, engine blob, sensitivity probe blob (core/common/bytes.h: u64
# length prefixes), data position (int64; absent in files of earlier versions). The source run probes at steps 0 and 4, so its last checkpoint (after step 5) holds an open probe.

CK_ARGS = ["--model", "mlp:width=64", "--data", "synthetic", "--batch", "8", "--threads", "1",
           "--sensitivity", "delays=1/3,every=4,batch=8"]
MAGIC = b"DDCKPT1\n"


def make_checkpoint(binary, tmp):
    d = os.path.join(tmp, "ck_source")
    p = subprocess.run([binary, "train"] + CK_ARGS + ["--steps", "8", "--checkpoint-every", "3", "--out", d],
                       capture_output=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        sys.exit("could not make the source checkpoint: %s" % p.stderr.decode()[-2000:])
    with open(os.path.join(d, "checkpoint.rank0.bin"), "rb") as f:
        return d, f.read()


def parse_body(body):
    """Splits a checkpoint body into its fields (offsets as written by write_checkpoint)."""
    fields, pos = [], 0

    def u64():
        nonlocal pos
        v = struct.unpack_from("<Q", body, pos)[0]
        pos += 8
        return v
    n = u64()
    fields.append(("fingerprint", body[8:8 + n]))
    pos += n
    fields.append(("step", body[pos:pos + 8]))
    pos += 8
    for name, width in [("params", 4), ("buffers", 4), ("opt_state", 4), ("layer_steps", 8)]:
        n = u64()
        fields.append((name, body[pos:pos + n * width]))
        pos += n * width
    for name in ("engine", "probe"):
        n = u64()
        fields.append((name, body[pos:pos + n]))
        pos += n
    fields.append(("data_position", body[pos:pos + 8]))  # the global sample position the next step starts at
    pos += 8
    assert pos == len(body), "checkpoint layout changed (core/train/checkpoint.cpp)"
    return fields


def parse_probe(blob):
    """The probe blob (core/train/sensitivity.cpp save_state): identity, t0, g(t0), then (delay, cosines) pairs."""
    n = struct.unpack_from("<Q", blob, 0)[0]
    ident, pos = blob[8:8 + n], 8 + n
    t0 = struct.unpack_from("<q", blob, pos)[0]
    pos += 8
    ng = struct.unpack_from("<Q", blob, pos)[0]
    ref = blob[pos + 8:pos + 8 + 4 * ng]
    pos += 8 + 4 * ng
    count = struct.unpack_from("<Q", blob, pos)[0]
    pos += 8
    measured = []
    for _ in range(count):
        d = struct.unpack_from("<i", blob, pos)[0]
        nc = struct.unpack_from("<Q", blob, pos + 4)[0]
        measured.append((d, blob[pos + 12:pos + 12 + 4 * nc]))
        pos += 12 + 4 * nc
    assert pos == len(blob), "probe state layout changed (core/train/sensitivity.cpp)"
    return ident, t0, ref, measured


def build_probe(ident, t0, ref, measured, tail=b""):
    out = struct.pack("<Q", len(ident)) + ident + struct.pack("<q", t0) + struct.pack("<Q", len(ref) // 4) + ref
    out += struct.pack("<Q", len(measured))
    for d, cos in measured:
        out += struct.pack("<i", d) + struct.pack("<Q", len(cos) // 4) + cos
    return out + tail


def build_body(fields):
    out = b""
    for name, data in fields:
        if name in ("step", "data_position"):
            out += data
        else:
            width = {"params": 4, "buffers": 4, "opt_state": 4, "layer_steps": 8}.get(name, 1)
            out += struct.pack("<Q", len(data) // width) + data
    return out


def seal(body):
    return MAGIC + body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def checkpoint_cases(binary, tmp):
    src_dir, good = make_checkpoint(binary, tmp)
    body = good[len(MAGIC):-4]
    fields = parse_body(body)
    cases = []
    rnd = random.Random(5)

    def add(name, blob, must, args=(), expect=2, is_dir=False, as_out=False):
        d = os.path.join(tmp, "ck_%d" % len(cases))
        os.makedirs(d)
        shutil.copy(os.path.join(src_dir, "metrics.h5"), d)  # the run's own file, which must stay as it was
        path = os.path.join(d, "checkpoint.rank0.bin")
        if is_dir:
            os.makedirs(path)
        elif blob is not None:
            with open(path, "wb") as f:
                f.write(blob)
        given = {x for x in args if x.startswith("--")}
        base = [x for i in range(0, len(CK_ARGS), 2) if CK_ARGS[i] not in given for x in CK_ARGS[i:i + 2]]
        argv = ["train"] + base + ["--steps", "8", "--resume", d] + list(args)
        fresh = None
        if as_out:
            fresh = os.path.join(tmp, "ck_out_%d" % len(cases))
            argv += ["--out", fresh]
        c = Case("checkpoint", name, argv, must, keep=[d], expect=expect, fresh_out=fresh)
        cases.append(c)

    # Bit flips across the file: magic, fingerprint, step, parameters, optimizer state, layer steps, CRC.
    offsets = [0, 3, 7, 8, 12, 16, 30, 60, len(MAGIC) + 8 + len(fields[0][1]) + 2]
    offsets += [int(len(good) * f) for f in (0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99)]
    offsets += [len(good) - 40, len(good) - 12, len(good) - 5, len(good) - 4, len(good) - 1]
    for off in offsets:
        b = bytearray(good)
        b[off] ^= 1 << rnd.randrange(8)
        add("bit flip at %d" % off, bytes(b), "checkpoint")
    # Truncations.
    for n in [0, 1, 7, 8, 11, 12, 20, 100, len(good) // 2, len(good) - 5, len(good) - 4, len(good) - 1]:
        add("truncated to %d bytes" % n, good[:n], "checkpoint" if n else "checkpoint")
    add("one byte appended", good + b"\x00", "checkpoint")
    add("random bytes, same size", bytes(rnd.randrange(256) for _ in range(len(good) // 64)) * 64, "checkpoint")
    add("random 1 KiB", bytes(rnd.randrange(256) for _ in range(1024)), "checkpoint")
    add("magic then random", MAGIC + bytes(rnd.randrange(256) for _ in range(4096)), "checkpoint")
    # Bodies with a valid CRC, so the field parsing itself is what must refuse them.
    add("sealed random body", seal(bytes(rnd.randrange(256) for _ in range(4096))), "checkpoint")
    add("sealed empty body", seal(b""), "checkpoint")
    add("sealed huge fingerprint length", seal(struct.pack("<Q", 2 ** 64 - 1) + body[8:]), "checkpoint")
    add("sealed huge param count", seal(build_body(fields[:2]) + struct.pack("<Q", 2 ** 62) + b"\x00" * 64),
        "checkpoint")
    add("sealed body cut after step", seal(build_body(fields[:2])), "checkpoint")
    add("sealed body cut in params", seal(build_body(fields)[:len(body) // 3]), "checkpoint")
    add("sealed trailing bytes", seal(body + b"\x00" * 8), "trailing")
    short = [(n, d[:-4] if n == "params" else d) for n, d in fields]
    add("sealed 1 param short", seal(build_body(short)), "checkpoint")
    fewer = [(n, d[:-8] if n == "layer_steps" else d) for n, d in fields]
    add("sealed layer steps of another model", seal(build_body(fewer)), "another model")
    for step in [-1, -100, 2 ** 63 - 1, 8, 1000]:
        f2 = [(n, struct.pack("<q", step) if n == "step" else d) for n, d in fields]
        add("sealed step %d" % step, seal(build_body(f2)), "step")
    # Refused once the run has started (the step is read with the rest of the file): the --out it made is removed.
    f2 = [(n, struct.pack("<q", 8) if n == "step" else d) for n, d in fields]
    add("sealed step 8, new --out", seal(build_body(f2)), "step", as_out=True)
    f2 = [(n, struct.pack("<q", -8) if n == "data_position" else d) for n, d in fields]
    add("sealed negative data position", seal(build_body(f2)), "data position")
    f2 = [(n, d.replace(b"model=mlp", b"model=cnn") if n == "fingerprint" else d) for n, d in fields]
    add("sealed fingerprint of cnn", seal(build_body(f2)), "model")
    # The sensitivity probe's open probe (t0 = 4, delay 1 measured at step 5).
    ident, t0, ref, measured = parse_probe(dict(fields)["probe"])
    assert t0 == 4 and [d for d, _ in measured] == [1], (t0, measured)

    def with_probe(blob):
        return seal(build_body([(n, blob if n == "probe" else d) for n, d in fields]))
    add("sealed probe at a step that is no probe step", with_probe(build_probe(ident, 3, ref, measured)), "probe step")
    add("sealed probe with an unconfigured delay", with_probe(build_probe(ident, t0, ref, [(2, measured[0][1])])),
        "malformed")
    add("sealed probe with cosines of another model", with_probe(build_probe(ident, t0, ref, [(1, measured[0][1][:-4])])),
        "malformed")
    add("sealed probe with more delays than configured", with_probe(build_probe(ident, t0, ref, measured * 3)),
        "more delays")
    add("sealed probe with g(t0) one float short", with_probe(build_probe(ident, t0, ref[:-4], measured)), "checkpoint")
    add("sealed probe with trailing bytes", with_probe(build_probe(ident, t0, ref, measured, b"\x00" * 4)), "trailing")
    add("sealed probe cut short", with_probe(dict(fields)["probe"][:-6]), "checkpoint")
    # Controls: a checkpoint without the probe section (written before it existed) and a run probing differently
    # both resume, starting their probes afresh.
    def control(name, blob, args=()):
        d = os.path.join(tmp, "ck_control_%d" % len(cases))
        os.makedirs(d)
        with open(os.path.join(d, "checkpoint.rank0.bin"), "wb") as f:
            f.write(blob)
        shutil.copy(os.path.join(src_dir, "metrics.h5"), d)
        given = {x for x in args if x.startswith("--")}
        base = [x for i in range(0, len(CK_ARGS), 2) if CK_ARGS[i] not in given for x in CK_ARGS[i:i + 2]]
        cases.append(Case("checkpoint", "control: " + name, ["train"] + base + ["--steps", "8", "--resume", d] +
                          list(args), expect=0))
    control("checkpoint without a probe section", seal(build_body([f for f in fields if f[0] not in ("probe", "data_position")])))
    control("checkpoint without a data position", seal(build_body([f for f in fields if f[0] != "data_position"])))
    control("another probe configuration", good, ["--sensitivity", "delays=1/3,every=5,batch=8"])
    # Whole files of other runs: another model, seed, batch, policy, optimizer (the fingerprint names each).
    for what, args, must in [("model cnn", ["--model", "cnn"], "model"), ("model resnet20", ["--model", "resnet20"], "model"),
                             ("seed 5", ["--seed", "5"], "seed"), ("batch 16", ["--batch", "16"], "batch"),
                             ("policy localsgd", ["--policy", "localsgd:k=4"], "policy"),
                             ("optimizer adamw", ["--optimizer", "adamw"], "optimizer"),
                             ("data fashion-mnist", ["--data", "fashion-mnist"], "data"),
                             ("a switch", ["--switch", "2:localsgd:k=2"], "switch")]:
        add("checkpoint of another run: " + what, good, must, args=args)
    add("another model, new --out", good, "model", args=["--model", "cnn"], as_out=True)
    add("zero-length, new --out", b"", "checkpoint", as_out=True)
    add("checkpoint file missing", None, "checkpoint")
    add("checkpoint is a directory", None, "checkpoint", is_dir=True)
    # Control: the untouched copy resumes (it is the one file every mutation above starts from).
    d = os.path.join(tmp, "ck_control")
    os.makedirs(d)
    shutil.copy(os.path.join(src_dir, "checkpoint.rank0.bin"), d)
    shutil.copy(os.path.join(src_dir, "metrics.h5"), d)
    cases.append(Case("checkpoint", "control: resume the good checkpoint",
                      ["train"] + CK_ARGS + ["--steps", "8", "--resume", d], expect=0))
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


READERS = ["cli", "ini", "idx", "profile", "checkpoint", "policy"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--reader", default="all", choices=READERS + ["all"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--bound", type=int, default=20, help="seconds a rejection may take")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    readers = READERS if a.reader == "all" else [a.reader]
    tmp = tempfile.mkdtemp(prefix="dreamddp-corpus-")
    try:
        cases = []
        for r in readers:
            sub = os.path.join(tmp, r)
            os.makedirs(sub)
            cases += checkpoint_cases(binary, sub) if r == "checkpoint" else globals()[r + "_cases"](sub)
        t0 = time.time()
        with cf.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            results = list(pool.map(lambda c: run_case(binary, c, a.bound), cases))
        bad = [(c, r) for c, r in zip(cases, results) if c.expect == 2]
        ctl = [(c, r) for c, r in zip(cases, results) if c.expect != 2]
        failures, xfail = [], []
        for c, (ok, crashed, problems, secs, rc, err) in zip(cases, results):
            why = known_bug(c)
            tag = "ok  " if ok and not why else "XPASS" if ok else "XFAIL" if why else "FAIL"
            if tag in ("FAIL", "XPASS"):
                failures.append(c)
            if tag == "XFAIL":
                xfail.append(c)
            if tag != "ok  " or a.verbose:
                print("%-5s %-10s %-48s %5.2fs rc=%s  %s" % (tag, c.reader, c.name[:48], secs, rc,
                                                            "; ".join(problems) or ("known bug fixed: remove it "
                                                            "from KNOWN" if why else "")))
                if why and not ok:
                    print("        known bug: %s" % why)
                if tag == "FAIL":
                    last = [l for l in err.split("\n") if l.strip()][-3:]
                    for l in last:
                        print("        stderr: %s" % l[:300])
        per = {}
        for c, r in bad:
            n, k = per.get(c.reader, (0, 0))
            per[c.reader] = (n + 1, k + (1 if r[0] else 0))
        print("per reader (clean rejections / bad inputs): " +
              ", ".join("%s %d/%d" % (k, v[1], v[0]) for k, v in per.items()))
        rejected = sum(1 for c, r in bad if r[4] == 2)
        clean = sum(1 for c, r in bad if r[0])
        crashes = sum(1 for c, r in zip(cases, results) if r[1])
        slowest = max(r[3] for r in results)
        print("%d inputs tried, %d rejected with exit 2 (%d cleanly: one error line, nothing written), %d crashes, "
              "%d known bugs (XFAIL), %d failures; %d/%d controls accepted; slowest %.1fs; %.1fs in all" %
              (len(bad), rejected, clean, crashes, len(xfail), len(failures), sum(1 for c, r in ctl if r[0]),
               len(ctl), slowest, time.time() - t0))
        return 1 if failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
