"""peers/torchft_peer.py: bad arguments exit 2 with one line on stderr and nothing on stdout; where torchft is
importable, a one-rank run of LocalSGD and of Streaming DiLoCo prints its JSON line.

  torchft_peer_test.py PEER [PEER_PYTHON]

The argument checks run under this interpreter (they come before torch is imported, except the model spec's). The
runs need PEER_PYTHON (default: the project's .venv-peer) with torch and torchft; without it they are skipped (said
on stdout) and only the argument checks count. Nothing reaches the network: the one rank and its lighthouse listen
on loopback.
"""
import json
import os
import socket
import subprocess
import sys

PEER = os.path.abspath(sys.argv[1])
PY = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.dirname(PEER)), ".venv-peer", "bin",
                                                         "python")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(python, args, env_extra=None, rank_env=True, timeout=240):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    if rank_env:
        env.update(RANK="0", WORLD_SIZE="1")
    env.update(env_extra or {})
    return subprocess.run([python, PEER] + args, capture_output=True, text=True, env=env, timeout=timeout)


BAD = [
    (["--sync-every", "0"], True, "sync-every"),
    (["--algo", "diloco", "--fragments", "3"], True, "does not divide"),
    (["--algo", "diloco", "--fragments", "4", "--fragment-sync-delay", "2"], True, "must be below"),
    (["--algo", "localsgd", "--fragments", "2"], True, "DiLoCo options"),
    (["--warmup", "3", "--steps", "5"], True, "multiple of --sync-every"),
    (["--steps", "5"], True, "multiple of --sync-every"),
    (["--no-such-option"], True, "unrecognized"),
    (["--algo", "sgd"], True, "invalid choice"),
    (["--timeout", "0"], True, "timeout"),
    (["--min-replicas", "2"], True, "above WORLD_SIZE"),
    ([], False, "RANK and WORLD_SIZE"),
]
for args, rank_env, expect in BAD:
    p = run(sys.executable, args, rank_env=rank_env)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2, "%s: exit %d, not 2" % (args, p.returncode))
    check(len(lines) == 1 and expect in p.stderr, "%s: stderr %r lacks one line with %r" % (args, p.stderr, expect))
    check(p.stdout == "", "%s: wrote to stdout: %r" % (args, p.stdout[:200]))

have_torchft = os.access(PY, os.X_OK) and subprocess.run(
    [PY, "-c", "import torchft, torch"], capture_output=True, cwd="/").returncode == 0
if not have_torchft:
    print("skip: %s cannot import torchft: the one-rank runs were not made (argument checks only)" % PY)
else:
    p = run(PY, ["--model", "nosuch"])
    check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "unknown model" in p.stderr,
          "--model nosuch: exit %d, stderr %r" % (p.returncode, p.stderr[-300:]))
    tiny = ["--model", "gpt2:layers=2,d=32,heads=2,ctx=8,vocab=50,positions=16", "--optimizer", "adamw",
            "--batch", "2", "--sync-every", "4", "--steps", "8", "--warmup", "4", "--timeout", "30"]
    for algo in (["--algo", "localsgd"], ["--algo", "diloco", "--fragments", "2", "--fragment-sync-delay", "1"]):
        with socket.socket() as s:  # a free loopback port for the lighthouse
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo", "THREADS": "1"}
        p = run(PY, tiny + algo, env_extra=env)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        check(p.returncode == 0 and len(lines) == 1, "%s: exit %d, %d JSON lines; stderr tail %r"
              % (algo, p.returncode, len(lines), p.stderr[-600:]))
        if not lines:
            continue
        j = json.loads(lines[0])
        check(j["peer"].startswith("torchft-") and j["world"] == 1 and j["timed_steps"] == 8,
              "%s: peer/world/timed_steps %r" % (algo, {k: j.get(k) for k in ("peer", "world", "timed_steps")}))
        syncs = 3 if algo[1] == "localsgd" else 6  # 12 inner steps: every 4 steps, or a fragment every 2
        committed = [c for c in j["commits"] if c[3]]
        check(len(committed) == syncs and j["inner_steps"] == 12,
              "%s: %d committed syncs (want %d), %d inner steps (want 12)" % (algo, len(committed), syncs,
                                                                               j["inner_steps"]))
        check(j["class"] == "torchft.local_sgd." + ("LocalSGD" if algo[1] == "localsgd" else "DiLoCo"),
              "%s: class %r" % (algo, j["class"]))
        check(len(j["loss_curve"]) == 12 and j["samples_per_s"] > 0 and j["gemm_gflops"] > 0,
              "%s: loss curve of %d points, samples/s %r" % (algo, len(j["loss_curve"]), j["samples_per_s"]))

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("ok")
