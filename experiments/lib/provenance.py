#!/usr/bin/python3
"""Where a results file came from: the one place every study script takes its provenance fields from.

Every JSON document a study writes (experiments/results/*.json and the files the scripts write beside their runs)
carries, at top level:
  "command"  the exact command line that produced it (environment settings the script reads in front);
  "machine"  {"date": "YYYY-MM-DD HH:MM UTC", "host", "cpu" (model name), "cpu_flags" (avx2, fma, avx512f, ...),
              "cores", "load_1m" (at the start), "load_1m_end" (at the end), "commit" (short sha),
              "tree_clean" (the git tree had no changes at the start)};
  "peer"     the PyTorch peer that ran beside ours: {"script", "blas", "gemm_gflops", "threads", "torch"}, or
             null when no peer ran.

Python writers:
    import provenance
    start = provenance.start(repo)                          # at the start of the measurement
    ...
    provenance.stamp(doc, command, start, peer=line, peer_script=path)   # just before writing doc

Python run from a bash script that called prov_command and prov_start (they export PROV_COMMAND, PROV_START):
    provenance.stamp_from_env(doc, peer=line, peer_script=path)

Bash writers (experiments/lib/common.sh wraps these as prov_start / prov_stamp):
    provenance.py start REPO > START.json
    provenance.py stamp FILE --start START --command CMD [--peer-json LINE_OR_FILE --peer-script PATH]
(START: the text `start` printed, or a file holding it)
`stamp` adds the fields to the JSON object in FILE (a document the script has just written) and rewrites it
atomically; FILE must hold a JSON object.
"""
import datetime
import json
import os
import platform
import socket
import subprocess
import sys

FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile")
MACHINE_KEYS = ("date", "host", "cpu", "cpu_flags", "cores", "load_1m", "load_1m_end", "commit", "tree_clean")
PEER_KEYS = ("script", "blas", "gemm_gflops", "threads", "torch")


def _cpuinfo_field(name):
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model():
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


def cpu_flags():
    have = set((_cpuinfo_field("flags") or "").split())
    return [f for f in FLAGS if f in have]


def load_1m():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _git(repo, *args):
    try:
        p = subprocess.run(["git", "-C", repo] + list(args), capture_output=True, text=True, timeout=20)
        return p.stdout if p.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def commit(repo):
    """HEAD's short hash; PROV_COMMIT instead where set: tests/gpu/device_check.sh --prebuilt sets it to the
    commit its executables were built from, which is what the results measure (a copy of the repository on
    the GPU machine may carry some other git state)."""
    if os.environ.get("PROV_COMMIT"):
        return os.environ["PROV_COMMIT"]
    out = _git(repo, "rev-parse", "--short", "HEAD") if repo else None
    return out.strip() if out and out.strip() else "unknown"


def tree_clean(repo):
    """True when `git status` lists no change (untracked files included), None outside a git tree; with
    PROV_COMMIT set, PROV_TREE_CLEAN (1 or 0) instead, as recorded with the executables."""
    if os.environ.get("PROV_COMMIT"):
        env = os.environ.get("PROV_TREE_CLEAN")
        return None if env not in ("0", "1") else env == "1"
    out = _git(repo, "status", "--porcelain") if repo else None
    return None if out is None else out.strip() == ""


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def start(repo):
    """The machine block as it is at the start of a measurement (load_1m_end is filled in by stamp)."""
    return {"date": utc_now(), "host": socket.gethostname(), "cpu": cpu_model(), "cpu_flags": cpu_flags(),
            "cores": os.cpu_count(), "load_1m": load_1m(), "load_1m_end": None, "commit": commit(repo),
            "tree_clean": tree_clean(repo)}


def peer_block(line, script):
    """The peer's JSON line (a dict) -> the "peer" block; None when no peer ran (line None or a refusal)."""
    if not line or "gemm_gflops" not in line:
        return None
    torch = str(line.get("peer", ""))
    return {"script": script, "blas": line.get("blas"), "gemm_gflops": line.get("gemm_gflops"),
            "threads": line.get("threads"), "torch": torch[len("torch-"):] if torch.startswith("torch-") else torch}


def stamp(doc, command, start_machine, peer=None, peer_script=None, peer_block_=None):
    """Adds command, machine (with load_1m_end now) and peer to doc (in place) and returns it.

    peer: the peer's JSON line (dict) that judged the run, or None; peer_block_: an already made block."""
    machine = dict(start_machine)
    machine["load_1m_end"] = load_1m()
    doc["command"] = command
    doc["machine"] = machine
    doc["peer"] = peer_block_ if peer_block_ is not None else peer_block(peer, peer_script)
    return doc


def stamp_from_env(doc, peer=None, peer_script=None, peer_block_=None):
    """stamp() with the command and start block a bash script exported (common.sh prov_command / prov_start)."""
    start_machine = json.loads(os.environ["PROV_START"]) if os.environ.get("PROV_START") else start(None)
    return stamp(doc, os.environ.get("PROV_COMMAND", "?"), start_machine, peer, peer_script, peer_block_)


def rel_to_repo(path, repo):
    """path relative to repo when it lies inside it (a results file names no machine's folders), else as given."""
    if not path:
        return path
    ap, ar = os.path.realpath(path), os.path.realpath(repo)
    return os.path.relpath(ap, ar) if ap.startswith(ar + os.sep) else path


def repo_relative(doc, repo):
    """doc with the repository's own folder taken out of every string (a policy's profile=DIR, a run's folder, a
    command's arguments): a results file names no machine's folders. Strings outside the repository stay."""
    if isinstance(doc, str):
        for root in {os.path.realpath(repo) + os.sep, os.path.abspath(repo) + os.sep}:
            doc = doc.replace(root, "")
        return doc
    if isinstance(doc, list):
        return [repo_relative(v, repo) for v in doc]
    if isinstance(doc, dict):
        return {k: repo_relative(v, repo) for k, v in doc.items()}
    return doc


def missing(doc):
    """The provenance fields doc lacks (for tests and checks): [] when complete."""
    out = [k for k in ("command", "machine", "peer") if k not in doc]
    m = doc.get("machine")
    if isinstance(m, dict):
        out += ["machine." + k for k in MACHINE_KEYS if k not in m]
    p = doc.get("peer")
    if isinstance(p, dict):
        out += ["peer." + k for k in PEER_KEYS if k not in p]
    return out


def shell_command(argv, env_names=()):
    """The command line as typed: VAR=value for each set variable of env_names, then argv shell-quoted."""
    import shlex
    env = ["%s=%s" % (k, shlex.quote(os.environ[k])) for k in env_names if os.environ.get(k)]
    return " ".join(env + [shlex.quote(a) for a in argv])


def write_json_atomic(path, doc):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def _main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="provenance.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("start", help="print the machine block at the start (JSON)")
    s.add_argument("repo")
    t = sub.add_parser("stamp", help="add command, machine and peer to the JSON object in FILE")
    t.add_argument("file")
    t.add_argument("--start", required=True, help="the output of `start` (its text, or a file holding it)")
    t.add_argument("--command", required=True)
    t.add_argument("--peer-json", default="", help="the peer's JSON line, or a file holding it (last {...} line)")
    t.add_argument("--peer-script", default="")
    a = ap.parse_args(argv)
    if a.what == "start":
        print(json.dumps(start(a.repo)))
        return 0
    try:
        if a.start.lstrip().startswith("{"):
            start_machine = json.loads(a.start)
        else:
            with open(a.start) as f:
                start_machine = json.load(f)
        with open(a.file) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("provenance.py: %s" % e, file=sys.stderr)
        return 2
    if not isinstance(doc, dict):
        print("provenance.py: %s holds no JSON object" % a.file, file=sys.stderr)
        return 2
    peer = None
    if a.peer_json:
        text = a.peer_json
        if not text.lstrip().startswith("{") and os.path.isfile(text):
            lines = [l for l in open(text).read().splitlines() if l.startswith("{")]
            text = lines[-1] if lines else ""
        try:
            peer = json.loads(text) if text else None
        except ValueError:
            peer = None
    stamp(doc, a.command, start_machine, peer=peer, peer_script=a.peer_script or None)
    write_json_atomic(a.file, doc)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
