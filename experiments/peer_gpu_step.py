#!/usr/bin/python3
"""PyTorch peer for experiments/bench_gpu.sh: median CUDA step time of the reference models.

One step = zero_grad, forward, loss.item() (our GpuModel also returns the loss to the host each step),
backward, SGD(lr 0.01, momentum 0.9).step(), on one fixed synthetic batch, timed with CUDA events after
warm-up; the median over --iters steps is reported. Prints a table and, last, one JSON line.

Model definitions: mlp and cnn are imported from peers/torch_ddp.py (importlib; importing it has no side effects)
when found. gpt-mini is declared here with the same modules, shapes and op order as torch_ddp.GPT, because that
class builds its position ids and causal mask on the CPU (torch.arange / torch.ones without a device), which
cannot be combined with CUDA tensors. Both are checked against the parameter counts of docs/cli.md.
Exit codes: 0 ok, 2 bad usage, 3 torch with CUDA not available (one line on stderr says so).
"""
import argparse, importlib.util, json, os, sys

PARAMS = {'mlp': 2913290, 'cnn': 1701354, 'gpt-mini': 3323392}  # docs/cli.md reference models


def gemm_gflops(torch, dev, n=4096):
    """The peer's FP32 GEMM rate (torch.mm), timed as bench_gpu_step times ours: median of 10 after 3 warm-ups."""
    a = torch.rand(n, n, device=dev) * 2 - 1
    b = torch.rand(n, n, device=dev) * 2 - 1
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(13):
        t0.record()
        torch.mm(a, b)
        t1.record()
        t1.synchronize()
        if i >= 3:
            ms.append(t0.elapsed_time(t1))
    ms.sort()
    return 2.0 * n ** 3 / (ms[len(ms) // 2] * 1e-3) / 1e9


def load_peer_module():
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.environ.get('DREAMDDP_PEER', ''), os.environ.get('TORCH_PEER', ''),
             os.path.join(here, '..', 'peers', 'torch_ddp.py')]
    for c in cands:
        if c and os.path.isfile(c):
            spec = importlib.util.spec_from_file_location('torch_ddp_peer', c)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod, os.path.normpath(c)
    return None, None


def declare_models(torch):
    nn, F = torch.nn, torch.nn.functional

    def mlp():
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def cnn():
        def block(i, o):
            return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
        return nn.Sequential(*block(1, 32), *block(32, 64), nn.MaxPool2d(2), *block(64, 128), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(128 * 7 * 7, 256), nn.ReLU(), nn.Linear(256, 10))

    class Block(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.fc, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            s.h = h

        def forward(s, x):
            B, T, D = x.shape
            q, k, v = s.qkv(s.ln1(x)).split(D, dim=2)
            q, k, v = [t.view(B, T, s.h, D // s.h).transpose(1, 2) for t in (q, k, v)]
            att = (q @ k.transpose(-2, -1)) / (D // s.h) ** 0.5
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
            att = att.masked_fill(mask, float('-inf')).softmax(-1)
            x = x + s.proj((att @ v).transpose(1, 2).reshape(B, T, D))
            return x + s.fc2(F.gelu(s.fc(s.ln2(x))))

    class GPT(nn.Module):
        def __init__(s, L=4, d=256, h=4, T=128, V=256):
            super().__init__()
            s.wte, s.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
            s.blocks = nn.Sequential(*[Block(d, h) for _ in range(L)])
            s.ln, s.head = nn.LayerNorm(d), nn.Linear(d, V, bias=False)

        def forward(s, idx):
            x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
            return s.head(s.ln(s.blocks(x)))

    return {'mlp': mlp, 'cnn': cnn, 'gpt-mini': GPT}


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--models', nargs='+', default=['mlp', 'gpt-mini'], choices=sorted(PARAMS))
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--warmup', type=int, default=10)
    p.add_argument('--iters', type=int, default=50)
    a = p.parse_args()
    if a.batch <= 0 or a.iters <= 0 or a.warmup < 0:
        p.error('--batch and --iters must be > 0, --warmup >= 0')
    try:
        import torch
    except Exception as e:  # not installed, or a broken install
        print('peer: torch with CUDA not available (import torch failed: %s)' % e, file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print('peer: torch with CUDA not available (torch %s, torch.version.cuda=%s, no usable device)'
              % (torch.__version__, torch.version.cuda), file=sys.stderr)
        return 3
    F = torch.nn.functional
    models = declare_models(torch)
    peer, peer_path = load_peer_module()
    if peer is not None:
        models['mlp'], models['cnn'] = peer.mlp, peer.cnn
    dev = torch.device('cuda')
    # Plain FP32 as ours (cuBLAS without TF32, cuDNN FMA math); PyTorch's own default lets cuDNN use TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    rows = []
    for name in a.models:
        model = models[name]().to(dev)
        n_params = sum(q.numel() for q in model.parameters())
        if n_params != PARAMS[name]:
            print('peer: %s has %d parameters, docs/cli.md says %d' % (name, n_params, PARAMS[name]), file=sys.stderr)
            return 1
        if name == 'gpt-mini':
            x = torch.randint(0, 256, (a.batch, 128), device=dev)
            y = torch.randint(0, 256, (a.batch, 128), device=dev)
            loss_fn = lambda out: F.cross_entropy(out.view(-1, 256), y.view(-1))
        else:
            x = torch.randn(a.batch, 1, 28, 28, device=dev)
            y = torch.randint(0, 10, (a.batch,), device=dev)
            loss_fn = lambda out: F.cross_entropy(out, y)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ms = []
        for i in range(a.warmup + a.iters):
            t0.record()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x))
            last = loss.item()
            loss.backward()
            opt.step()
            t1.record()
            t1.synchronize()
            if i >= a.warmup:
                ms.append(t0.elapsed_time(t1))
        ms.sort()
        rows.append({'model': name, 'batch': a.batch, 'iters': a.iters, 'median_ms': round(ms[len(ms) // 2], 4),
                     'min_ms': round(ms[0], 4), 'p90_ms': round(ms[min(len(ms) - 1, len(ms) * 9 // 10)], 4),
                     'final_loss': round(last, 4)})
    gpu = torch.cuda.get_device_name(0)
    gflops = gemm_gflops(torch, dev)
    print('# peer_gpu_step: torch %s (CUDA %s) on %s, %d warm-up + %d timed steps, TF32 matmul %s, cuDNN %s; '
          'mlp/cnn from %s'
          % (torch.__version__, torch.version.cuda, gpu, a.warmup, a.iters,
             'on' if torch.backends.cuda.matmul.allow_tf32 else 'off',
             'on' if torch.backends.cudnn.allow_tf32 else 'off', peer_path or 'this file (peer not found)'))
    print('%-10s %6s %10s %10s %10s' % ('model', 'batch', 'median_ms', 'min_ms', 'p90_ms'))
    for r in rows:
        print('%-10s %6d %10.3f %10.3f %10.3f' % (r['model'], r['batch'], r['median_ms'], r['min_ms'], r['p90_ms']))
    print('# torch FP32 GEMM 4096^3 (TF32 %s): %.0f GFLOP/s' % (
        'on' if torch.backends.cuda.matmul.allow_tf32 else 'off', gflops))
    print(json.dumps({'peer': 'torch-%s' % torch.__version__, 'device': gpu, 'blas': 'cuBLAS (torch, CUDA %s)'
                      % torch.version.cuda, 'gemm_gflops': round(gflops, 1), 'threads': None, 'results': rows}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
