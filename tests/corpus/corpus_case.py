"""The corpus's case and how one is run: the rejection contract every bad input is held to (exit 2, one error line,
nothing written), the bugs known not to hold it yet, and the quick options that keep an accepted case short."""
import hashlib
import os
import re
import subprocess
import time


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
