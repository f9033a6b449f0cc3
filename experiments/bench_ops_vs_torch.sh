#!/usr/bin/env bash
# experiments/bench_ops_vs_torch.sh: per-op time of our CPU kernels (build-*/core/ops/bench_ops) against the
# same ops in PyTorch, same shapes, same thread count, same timing rule (2 warm-up calls, median of ITERS).
#
#   experiments/bench_ops_vs_torch.sh [--threads N] [--iters N] [--out FILE]
#
# Rows are the ones bench_ops prints (conv/batchnorm/pool/relu of cnn and resnet20, Linear of the mlp and
# gpt-mini, attention/GELU/LayerNorm/softmax-xent of gpt-mini, the one-thread GEMM 64x1024x1024 and the
# optimizer update over the mlp's 2.9M parameters). Prints a table (ours ms, torch ms, ours/torch) and, last,
# one JSON line with the machine (date, nproc, CPU model, avx2/avx512f, torch version, load average).
# Environment: BENCH_OPS (default: build-perf/core/ops/bench_ops, else build/core/ops/bench_ops).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" bench_ops_vs_torch
prov_command -- "$@"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
py=/usr/bin/python3
threads=1 iters=20 out=""
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage_from_header; exit 0 ;;
    --threads) need_value -- "$@"; threads=$2; shift 2 ;;
    --iters) need_value -- "$@"; iters=$2; shift 2 ;;
    --out) need_value -- "$@"; out=$2; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "--iters must be a positive integer, got '$iters'"
bin=${BENCH_OPS:-}
if [[ -z $bin ]]; then
  for c in "$root/build-perf/core/ops/bench_ops" "$root/build/core/ops/bench_ops"; do
    [[ -x $c ]] && { bin=$c; break; }
  done
fi
[[ -n $bin && -x $bin ]] || die "no bench_ops binary (build it, or set BENCH_OPS)"
$py -c 'import torch' 2>/dev/null || die "python3-torch is not installed (make deps-peer)"

work=$(mktemp -d /tmp/dd-bench-ops-XXXXXX)
trap 'rm -rf "$work"' EXIT
prov_start
load0=$(cut -d' ' -f1-3 /proc/loadavg)
"$bin" "$threads" "$iters" >"$work/ours.txt"
tail -1 "$work/ours.txt" >"$work/ours.json"

# OPENBLAS_NUM_THREADS: OpenBLAS keeps its own thread pool beside torch's (set_num_threads does not reach it).
THREADS=$threads ITERS=$iters LOAD0="$load0" OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
  $py - "$work/ours.json" "$bin" <<'EOF' | tee "$work/all.txt"
import json, os, re, subprocess, sys, time, datetime
import torch
sys.path.insert(0, os.environ["PROV_LIB"])
import provenance
import torch.nn.functional as F

threads, iters = int(os.environ["THREADS"]), int(os.environ["ITERS"])
torch.set_num_threads(threads)
torch.manual_seed(0)
ours = json.load(open(sys.argv[1]))["ms"]
rows = {}

def bench(name, fn):
    fn(); fn()
    t = []
    for _ in range(iters):
        a = time.perf_counter(); fn(); t.append((time.perf_counter() - a) * 1e3)
    t.sort()
    rows[name] = t[len(t) // 2]

def rn(*s, grad=False):
    return torch.randn(*s, requires_grad=grad)

def conv(N, C, OC, H, k, s, p, need_dx):
    x = rn(N, C, H, H, grad=need_dx); w = rn(OC, C, k, k, grad=True)
    Ho = (H + 2 * p - k) // s + 1
    dy = rn(N, OC, Ho, Ho)
    nm = "conv%dx%d s%d %d->%d @%d N=%d%s" % (k, k, s, C, OC, H, N, "" if need_dx else " (no dx)")
    with torch.no_grad():
        bench(nm + " fwd", lambda: F.conv2d(x, w, None, s, p))
    def fb():
        y = F.conv2d(x, w, None, s, p); y.backward(dy)
    bench(nm + " fwd+bwd", fb)

def bn(N, C, HW):
    x = rn(N, C, HW, grad=True); g = torch.ones(C, requires_grad=True); b = torch.zeros(C, requires_grad=True)
    rm, rv = torch.zeros(C), torch.ones(C); dy = rn(N, C, HW)
    def fb():
        F.batch_norm(x, rm, rv, g, b, True, 0.1, 1e-5).backward(dy)
    bench("batchnorm C=%d HW=%d N=%d fwd+bwd" % (C, HW, N), fb)

def linear(N, i, o):
    x = rn(N, i, grad=True); W = rn(o, i, grad=True); b = rn(o, grad=True); dy = rn(N, o)
    bench("linear %d->%d N=%d fwd+bwd" % (i, o, N), lambda: F.linear(x, W, b).backward(dy))

conv(64, 1, 32, 28, 3, 1, 1, False); conv(64, 32, 64, 28, 3, 1, 1, True); conv(64, 64, 128, 14, 3, 1, 1, True)
bn(64, 32, 784); bn(64, 64, 784); bn(64, 128, 196)
x = rn(64, 64, 28, 28, grad=True); dyp = rn(64, 64, 14, 14)
bench("maxpool2 C=64 @28 N=64 fwd+bwd", lambda: F.max_pool2d(x, 2).backward(dyp))
dyr = rn(64, 64, 28, 28)
bench("relu 64x64x28x28 fwd+bwd", lambda: F.relu(x).backward(dyr))
conv(64, 1, 16, 28, 3, 1, 1, False); conv(64, 16, 16, 28, 3, 1, 1, True); conv(64, 16, 32, 28, 3, 2, 1, True)
conv(64, 16, 32, 28, 1, 2, 0, True); conv(64, 32, 32, 14, 3, 1, 1, True); conv(64, 32, 64, 14, 3, 2, 1, True)
conv(64, 64, 64, 7, 3, 1, 1, True)
bn(64, 16, 784)
linear(64, 784, 1024); linear(64, 1024, 1024); linear(64, 1024, 10)

B, T, C, NH, V = 8, 128, 256, 4, 256
N = B * T
qkv = rn(B, T, 3 * C, grad=True); dout = rn(B, T, C)
mask = torch.ones(T, T, dtype=torch.bool).tril()
def attn():
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (z.view(B, T, NH, C // NH).transpose(1, 2) for z in (q, k, v))
    a = (q @ k.transpose(-2, -1)) * (1.0 / (C // NH) ** 0.5)
    a = a.masked_fill(~mask, float("-inf")).softmax(-1)
    y = (a @ v).transpose(1, 2).reshape(B, T, C)
    y.backward(dout)
bench("attention B=8 T=128 C=256 NH=4 fwd+bwd", attn)
linear(N, C, 3 * C); linear(N, C, C); linear(N, C, 4 * C); linear(N, 4 * C, C)
g = rn(N, 4 * C, grad=True); dg = rn(N, 4 * C)
bench("gelu [1024,1024] fwd+bwd", lambda: F.gelu(g).backward(dg))
xl = rn(N, C, grad=True); w = rn(C, grad=True); b = rn(C, grad=True); dl = rn(N, C)
bench("layernorm [1024,256] fwd+bwd", lambda: F.layer_norm(xl, (C,), w, b, 1e-5).backward(dl))
lg = rn(N, V, grad=True); tg = torch.tensor([(i * 37) % V for i in range(N)])
bench("softmax_xent [1024,256] fwd+bwd", lambda: F.cross_entropy(lg, tg).backward())

A = rn(64, 1024); Bm = rn(1024, 1024)
with torch.no_grad():
    bench("gemm 64x1024x1024 (x W^T) fwd", lambda: A @ Bm.t())
P = 2913290
for kind in ("sgd", "adamw"):
    p = torch.nn.Parameter(torch.randn(P)); p.grad = torch.randn(P)
    opt = (torch.optim.SGD([p], lr=0.01, momentum=0.9) if kind == "sgd"
           else torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01))
    bench("%s update P=%d" % ("sgd momentum" if kind == "sgd" else "adamw", P), opt.step)

names = [n for n in ours if n in rows] + [n for n in rows if n not in ours]
print("%-46s %10s %10s %7s" % ("op", "ours ms", "torch ms", "ratio"))
res = []
for n in names:
    o, t = ours.get(n), rows.get(n)
    r = o / t if o is not None and t else None
    print("%-46s %10s %10s %7s" % (n, "%.3f" % o if o is not None else "-", "%.3f" % t if t else "-",
                                     "%.2f" % r if r else "-"))
    res.append({"op": n, "ours_ms": o, "torch_ms": t, "ratio": r})
gemm_ms = ours.get("gemm 64x1024x1024 (x W^T) fwd")
flags = open("/proc/cpuinfo").read()
model = re.search(r"model name\s*:\s*(.*)", flags)
blas = sorted({l.split()[-1] for l in open("/proc/self/maps") if re.search(r"(blas|blis|mkl_rt)", l)})
torch_gemm = 2 * 64 * 1024 * 1024 / rows["gemm 64x1024x1024 (x W^T) fwd"] / 1e6
# The peer here is PyTorch's ops called from this script (not peers/torch_ddp.py).
peer = {"script": "experiments/bench_ops_vs_torch.sh", "blas": ", ".join(os.path.basename(b) for b in blas),
        "gemm_gflops": round(torch_gemm, 1), "threads": threads, "torch": torch.__version__}
print(json.dumps(provenance.stamp_from_env({"bench": "ops_vs_torch", "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "threads": threads, "iters": iters, "nproc": os.cpu_count(),
                  "cpu_model": model.group(1).strip() if model else "unknown",
                  "avx2": " avx2" in flags, "avx512f": " avx512f" in flags,
                  "torch": torch.__version__, "torch_blas": blas, "ours_bin": sys.argv[2],
                  "ours_gemm_gflops": (2 * 64 * 1024 * 1024 / gemm_ms / 1e6) if gemm_ms else None,
                  "torch_gemm_gflops": 2 * 64 * 1024 * 1024 / rows["gemm 64x1024x1024 (x W^T) fwd"] / 1e6,
                  "loadavg_start": os.environ["LOAD0"],
                  "loadavg_end": " ".join(open("/proc/loadavg").read().split()[:3]), "rows": res}, peer_block_=peer)))
EOF
# --out FILE: the JSON line, indented, written there too.
if [ -n "$out" ]; then
  tail -n 1 "$work/all.txt" | $py -c 'import json, sys; json.dump(json.loads(sys.stdin.read()), open(sys.argv[1], "w"), indent=1)' "$out"
  echo "# saved to $out"
fi
