"""One run's facts, shared by every script that measures or compares (bench_step, throughput, regime_map):
the machine (CPU model, flags, cores, load), our own GEMM rate, and the check that the PyTorch peer ran at its best.

A ratio against the peer is only published when the peer's GEMM rate (its `gemm_gflops`, same shape and thread
count as ours: 64x1024 . 1024x1024) is at least PEER_MIN_GEMM_FRACTION of ours, measured in the same run (a
slower peer is misconfigured: netlib, a wrong core type), and its in-run rate at most PEER_MAX_GEMM_FRACTION of ours
or of its own one-thread rate alone, whichever is higher (a faster one ran on more cores than it was given, e.g. OpenBLAS's own pool with OPENBLAS_NUM_THREADS unset, or our
GEMM is behind on this CPU: either way the two steps are not like for like); a run whose 1-minute load average was
above the number of cores is marked noisy.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402

PEER_MIN_GEMM_FRACTION = 0.7
PEER_MAX_GEMM_FRACTION = 1.5


# The machine facts live in provenance.py, the one module every results writer uses.
cpu_model, cpu_flags, load1 = provenance.cpu_model, provenance.cpu_flags, provenance.load_1m


def noisy(load):
    """True when the machine was busier than it has cores (someone else's work ran beside the measurement)."""
    return load > (os.cpu_count() or 1)


def git_commit(repo):
    return provenance.commit(repo)


def machine(repo=None):
    """The block every results file carries (provenance.start: load_1m_end is set when the file is stamped)."""
    return provenance.start(repo)


def our_gemm_gflops(binary, threads=1):
    """Our GEMM rate at the peer's shape, through `dreamddp bench gemm` (best of three 0.3 s windows)."""
    p = subprocess.run([binary, "bench", "gemm", "--threads", str(threads)], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        raise SystemExit("peer_rules: %s bench gemm failed: %s" % (binary, p.stderr.strip()[-300:]))
    return float(json.loads(p.stdout.strip().splitlines()[-1])["gemm_gflops"])


def judge_peer(peer, ours_gflops, standalone_gflops=None):
    """(ok, note) for one peer result (its JSON line as a dict, or None when it refused to run).

    standalone_gflops: the peer's GEMM rate measured alone at the start of the run (peer_gemm_alone), next to
    ours. The better of it and the rate measured inside the run judges the peer: inside a run of more processes
    than cores, or beside other load, the in-run rate reflects the contention, not the configuration, while a
    misconfigured BLAS (netlib, a wrong core type) is slow in both. Both are recorded."""
    if peer is None:
        return False, "the peer did not run (see its log): no ratio"
    g = peer.get("gemm_gflops")
    if g is None:
        return False, "the peer did not report its GEMM rate: no ratio"
    if "netlib" in str(peer.get("blas", "")):
        return False, "the peer runs on netlib's reference BLAS: misconfigured, no ratio"
    # Above the better of ours and its own one-thread rate alone: our rate, measured beside other load, can be low
    # by half while the peer's run found a quiet moment; its BLAS pinned to one thread alone cannot be outrun on
    # one core, whatever the load.
    ceiling = max(ours_gflops, standalone_gflops or 0.0)
    if g > PEER_MAX_GEMM_FRACTION * ceiling:
        return False, ("the peer's in-run GEMM rate %.1f GFLOP/s is above %.1f x %s (%.1f) at the same thread count: "
                       "it used more cores than it was given (OPENBLAS_NUM_THREADS?) or our GEMM is behind on this CPU "
                       "(`dreamddp bench gemm`); not like for like, no ratio"
                       % (g, PEER_MAX_GEMM_FRACTION, "ours" if ceiling == ours_gflops else "its own rate alone at one thread",
                          ceiling))
    judged, how = g, "in-run"
    if standalone_gflops is not None and standalone_gflops > g:
        judged, how = standalone_gflops, "standalone (in-run %.1f)" % g
    if judged < PEER_MIN_GEMM_FRACTION * ours_gflops:
        return False, ("the peer's %s GEMM rate %.1f GFLOP/s is below %.1f x ours (%.1f): misconfigured, no ratio"
                       % (how, judged, PEER_MIN_GEMM_FRACTION, ours_gflops))
    return True, "peer GEMM %.1f GFLOP/s %s vs ours %.1f (%.2fx)" % (judged, how, ours_gflops, judged / ours_gflops)


def peer_python(repo=None):
    """The peer's interpreter, as experiments/lib/common.sh's peer_python_init picks it: PEER_PYTHON, else the
    project's .venv-peer (make deps-peer), else Debian's /usr/bin/python3 (said once on stderr)."""
    for var in ("PEER_PY", "PEER_PYTHON"):  # PEER_PY: peer_python_init's choice, exported by the shell scripts
        if os.environ.get(var):
            return os.environ[var]
    repo = repo or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    venv = os.path.join(repo, ".venv-peer", "bin", "python")
    if os.access(venv, os.X_OK):
        return venv
    sys.stderr.write("peer_rules: no .venv-peer (make deps-peer): the peer runs on Debian's PyTorch\n")
    return "/usr/bin/python3"


def peer_gemm_alone(peer_script, env_prefix=(), python=None):
    """The peer's GEMM rate and BLAS measured alone (one process, one thread, a 3-step mlp run): its configuration
    as this run has it, free of the contention of an oversubscribed run. Returns its JSON line or None."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, RANK="0", WORLD_SIZE="1", THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        p = subprocess.run(list(env_prefix) + [python or peer_python(), peer_script, "--model", "mlp", "--steps", "3",
                                               "--warmup", "1", "--store", os.path.join(d, "store")],
                           capture_output=True, text=True, env=env, timeout=300)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if p.returncode == 0 and lines else None


def peer_config(peer):
    """What to print beside every ratio."""
    if not peer:
        return {}
    return {k: peer.get(k) for k in ("peer", "blas", "gemm_gflops", "threads", "openblas_coretype")}
