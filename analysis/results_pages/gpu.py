"""docs/results/gpu.md: the step on a GPU."""
from .common import _absent, _f, _load, _prov


def _gpu_rounds(d):
    r = d.get("repeats", 1)
    return ("each side's median of %d alternating rounds (ours, then the peer)" % r if r > 1 else
            "each side once, ours first: not the alternating repeats the rules ask for")


def render_gpu_step(results, name="gpu_step.json"):
    d = _load(results, name)
    if not d:
        return _absent("a GPU step time", "run `tests/gpu/device_check.sh` on a machine with an NVIDIA GPU")
    out = ["| model (batch %d) | ours ms | torch ms | ours / torch |" % d["batch"], "|---|---|---|---|"]
    for r in d["results"]:
        out.append("| %s | %.3f | %s | %s |" % (r["model"], r["ours_ms"], _f(r.get("pytorch_ms"), "%.3f"),
                                               _f(r.get("ratio"), "%.2f")))
    gemm = d.get("ours_gemm_gflops"), d.get("peer_gemm_gflops")
    out += ["", "%s. FP32 GEMM (4096^3, no TF32): ours %s GFLOP/s, the peer's %s GFLOP/s (%s of ours). "
                "Median of %d CUDA-event-timed steps after %d warm-ups; %s. %s" % (
                    d["gpu"], _f(gemm[0], "%.0f"), _f(gemm[1], "%.0f"),
                    _f(gemm[1] / gemm[0] if gemm[0] and gemm[1] else None, "%.2fx"), d["iters"], d["warmup"],
                    _gpu_rounds(d), _prov(d)), ""]
    return "\n".join(out)
