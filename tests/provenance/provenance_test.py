"""experiments/lib/provenance.py and the writers that use it: every results document carries "command", a
"machine" block (date, host, cpu, cpu_flags, cores, load_1m, load_1m_end, commit, tree_clean) and "peer".

  provenance_test.py REPO DREAMDDP_BIN
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO, BIN = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(REPO, "experiments", "lib"))
import provenance  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def complete(doc, where, peer_expected):
    miss = provenance.missing(doc)
    check(not miss, "%s lacks %s" % (where, miss))
    m = doc.get("machine", {})
    check(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", str(m.get("date"))), "%s: date %r" % (where, m.get("date")))
    check(isinstance(m.get("cores"), int) and m["cores"] >= 1, "%s: cores %r" % (where, m.get("cores")))
    check(isinstance(m.get("load_1m"), float) and isinstance(m.get("load_1m_end"), float),
          "%s: loads %r %r" % (where, m.get("load_1m"), m.get("load_1m_end")))
    check(isinstance(m.get("cpu_flags"), list), "%s: cpu_flags %r" % (where, m.get("cpu_flags")))
    check(m.get("tree_clean") in (True, False), "%s: tree_clean %r" % (where, m.get("tree_clean")))
    check(re.fullmatch(r"[0-9a-f]{4,40}", str(m.get("commit"))), "%s: commit %r" % (where, m.get("commit")))
    if peer_expected:
        p = doc.get("peer") or {}
        check(p.get("script") == "peers/torch_ddp.py", "%s: peer script %r" % (where, p.get("script")))
        check(isinstance(p.get("gemm_gflops"), (int, float)) and p["gemm_gflops"] > 0, "%s: peer %r" % (where, p))
        check(bool(p.get("torch")) and bool(p.get("blas")), "%s: peer %r" % (where, p))
    else:
        check(doc.get("peer", "absent") is None, "%s: peer should be null, is %r" % (where, doc.get("peer")))


with tempfile.TemporaryDirectory(prefix="dd_prov_") as tmp:
    # 1. The python module: a fresh git tree (clean, then dirty), the start block, stamp, a peer line.
    tree = os.path.join(tmp, "tree")
    os.makedirs(tree)
    git = lambda *a: subprocess.run(["git", "-C", tree] + list(a), capture_output=True, text=True, check=True)
    git("init", "-q")
    open(os.path.join(tree, "f"), "w").write("x\n")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    s = provenance.start(tree)
    check(s["tree_clean"] is True, "clean tree reads %r" % s["tree_clean"])
    check(s["commit"] == git("rev-parse", "--short", "HEAD").stdout.strip(), "commit %r" % s["commit"])
    open(os.path.join(tree, "g"), "w").write("untracked\n")
    check(provenance.start(tree)["tree_clean"] is False, "an untracked file leaves the tree unclean")
    line = {"peer": "torch-2.0", "blas": "libopenblas.so.0", "gemm_gflops": 100.5, "threads": 1, "step_ms": 3}
    doc = provenance.stamp({"rows": []}, "x.sh --a 'b c'", s, peer=line, peer_script="peers/torch_ddp.py")
    check(doc["peer"] == {"script": "peers/torch_ddp.py", "blas": "libopenblas.so.0", "gemm_gflops": 100.5,
                          "threads": 1, "torch": "2.0"}, "peer block %r" % doc["peer"])
    check(doc["machine"]["load_1m"] == s["load_1m"] and doc["machine"]["load_1m_end"] is not None, "loads")
    check(provenance.stamp({}, "c", s, peer={"refused": "netlib"})["peer"] is None, "a refusal is no peer")
    check(provenance.missing(doc) == [], "missing %r" % provenance.missing(doc))
    check(provenance.missing({"command": "c", "machine": {"date": 1}, "peer": None})[:1] == ["machine.host"],
          "missing() names what is missing")

    # 2. The bash side: prov_command quotes as typed and names the set environment; prov_stamp adds the fields.
    script_dir = os.path.join(REPO, "experiments")
    probe = os.path.join(tmp, "probe.sh")
    open(probe, "w").write('''set -euo pipefail
. "%s/lib/common.sh" probe
prov_command REPS UNSET_VAR -- "$@"
prov_start
echo '{"rows": [1]}' > "$OUT_FILE"
prov_stamp "$OUT_FILE" '{"peer": "torch-1.2", "blas": "b", "gemm_gflops": 7, "threads": 2}' peers/torch_ddp.py
echo "$PROV_COMMAND"
''' % script_dir)
    out_file = os.path.join(tmp, "o.json")
    p = subprocess.run(["bash", probe, "--x", "a b", "it's"], capture_output=True, text=True,
                       env=dict(os.environ, REPS="3", OUT_FILE=out_file), timeout=60)
    check(p.returncode == 0, "probe.sh: rc %d %s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        cmd = p.stdout.strip().splitlines()[-1]
        import shlex
        words = shlex.split(cmd)
        check(words[0] == "REPS=3" and words[-3:] == ["--x", "a b", "it's"], "command %r" % cmd)
        d = json.load(open(out_file))
        check(d["rows"] == [1] and d["command"] == cmd, "stamped file %r" % d)
        complete(d, "probe.sh output", peer_expected=True)

    # 3. A real writer without a peer: telemetry_overhead.sh on a tiny run.
    out = os.path.join(tmp, "tel")
    p = subprocess.run(["bash", os.path.join(REPO, "experiments", "telemetry_overhead.sh"), "--model", "mlp",
                        "--policy", "ddp", "--ranks", "1", "--steps", "3", "--batch", "4", "--repeats", "1",
                        "--threads", "1", "--out", out, "--bin", BIN], capture_output=True, text=True, timeout=200,
                       cwd=REPO)
    check(p.returncode == 0, "telemetry_overhead.sh: rc %d %s" % (p.returncode, p.stderr[-500:]))
    if p.returncode == 0:
        d = json.load(open(os.path.join(out, "overhead.json")))
        complete(d, "overhead.json", peer_expected=False)
        check(d["command"].startswith("experiments/telemetry_overhead.sh --model mlp"), "command %r" % d["command"])

    # 4. A writer with the peer: bench_step.sh (skipped without python3-torch).
    have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    if have_torch:
        save = os.path.join(tmp, "bench.json")
        p = subprocess.run(["bash", os.path.join(REPO, "experiments", "bench_step.sh"), "mlp"], capture_output=True,
                           text=True, timeout=240, cwd=tmp,
                           env=dict(os.environ, REPS="1", THREADS="1", SAVE=save, DREAMDDP_BIN=BIN))
        check(p.returncode == 0, "bench_step.sh: rc %d %s" % (p.returncode, p.stderr[-500:]))
        if p.returncode == 0:
            d = json.load(open(save))
            complete(d, "bench_step SAVE", peer_expected=True)
            check(d["command"] == "REPS=1 THREADS=1 experiments/bench_step.sh mlp", "command %r" % d["command"])
    else:
        print("no python3-torch: bench_step.sh (the writer with a peer) not run")

# 4. A results file names no machine's folders: repo_relative takes the repository's own folder out of every string
# (a dreamddp policy's profile=DIR included), and no committed results file holds an absolute run folder.
root = os.path.realpath(REPO)
doc = {"spec": "dreamddp:h=8,profile=%s/runs/x/profile" % root, "runs": [{"dir": root + "/runs/x"}], "n": 3,
       "other": "/tmp/elsewhere"}
check(provenance.repo_relative(doc, REPO) == {"spec": "dreamddp:h=8,profile=runs/x/profile",
                                             "runs": [{"dir": "runs/x"}], "n": 3, "other": "/tmp/elsewhere"},
      "repo_relative: %r" % provenance.repo_relative(doc, REPO))
results = os.path.join(REPO, "experiments", "results")
for name in sorted(os.listdir(results)):
    if name.endswith(".json"):
        text = open(os.path.join(results, name)).read()
        hit = re.search(r'(?:^|[="\s])(/[^"\s,]*/runs/[^"\s,]*)', text)
        check(hit is None, "%s names an absolute run folder: %s" % (name, hit.group(1) if hit else ""))

print("FAILED: %d" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
