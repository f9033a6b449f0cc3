#!/usr/bin/python3
"""The PyTorch peer: data-parallel training of dreamddp's reference models with PyTorch on CPU over Gloo.

Usage (one process per rank; RANK and WORLD_SIZE in the environment, THREADS = torch threads per rank):

    RANK=0 WORLD_SIZE=1 /usr/bin/python3 peers/torch_ddp.py --model mlp --algo ddp --store /tmp/peer-store

Models are the spec strings of `dreamddp train --model` (docs/cli.md): mlp, cnn, resnet20, gpt-mini,
gpt2[:layers=,d=,heads=,ctx=,vocab=,positions=], llama[:layers=,d=,heads=,ffn=,ctx=,vocab=],
resnet18[:image=,classes=,stem=] and resnet50[:image=,classes=,stem=] (the ResNets come from torchvision;
stem=cifar swaps in the CIFAR stem: conv3x3/1, no max-pool).

Algorithms (--algo):
  ddp       DistributedDataParallel: bucketed gradient all-reduce overlapped with backward, every step.
  localsgd  no gradient all-reduce; parameters averaged every --k steps (PeriodicModelAverager).
  partial   layer-wise partial parameter averaging as the DreamDDP artifact does it in PyTorch: a hook on each
            parameter's gradient accumulator starts an async all-reduce of that parameter's values when its
            layer's phase equals step mod --k; every handle is waited for after backward, then the optimizer
            steps. --phases gives each layer's phase (layers: the modules that own parameters, in registration
            order, which is the order of dreamddp's /layers); without it the layers are cut into --k contiguous
            groups of about equal size (plsgd).

Rank 0 prints one JSON line: peer, model, algo, k, world, batch, params, optimizer, samples_per_s, step_ms,
threads, blas, gemm_gflops (one-thread 64x1024 . 1024x1024, measured at start-up), openblas_coretype.

The peer runs at its best or not at all: it exits 2 on netlib's reference BLAS, and where OPENBLAS_CORETYPE or
OPENBLAS_L2_SIZE are set it starts itself again without them when a float32 GEMM agrees with a float64 one
without them (PEER_KEEP_CORETYPE=1 keeps them). Importing this file has no side effects (no re-exec, no process
group): scripts may import its model builders.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

# The model definitions sit beside this file; found however the peer is loaded (a script, importlib, a copy).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import GPT, Llama, cnn, gpt2_init, mlp, resnet20  # noqa: E402

PROG = 'torch_ddp.py'
TUNING_VARS = ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE')

# A float32 product checked against float64 on shapes that no kernel tiles evenly: a wrong core type gives wrong
# results or crashes, a right one agrees to float32 rounding (relative error far below 1e-4 at these sizes).
GEMM_SELF_CHECK = '\n'.join([
    'import torch',
    'g = torch.Generator().manual_seed(7)',
    'a = torch.randn(301, 517, dtype=torch.float64, generator=g)',
    'b = torch.randn(517, 131, dtype=torch.float64, generator=g)',
    'exact = a @ b',
    'err = ((a.float() @ b.float()).double() - exact).abs().max() / exact.abs().max()',
    'raise SystemExit(0 if err < 1e-4 else 1)',
])


def fail(msg):
    sys.stderr.write('%s: %s\n' % (PROG, msg))
    sys.exit(2)


def restart_without_tuning_vars():
    """exec this script again without OPENBLAS_CORETYPE/L2_SIZE when OpenBLAS computes correctly without them."""
    if os.environ.get('PEER_KEEP_CORETYPE') or not any(v in os.environ for v in TUNING_VARS):
        return
    env = {k: v for k, v in os.environ.items() if k not in TUNING_VARS}
    try:
        ok = subprocess.run([sys.executable, '-c', GEMM_SELF_CHECK], env=env, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    if ok:
        env['PEER_KEEP_CORETYPE'] = '1'
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


def blas_libraries():
    """The BLAS libraries mapped into this process, netlib's reference BLAS marked as such."""
    seen = set()
    with open('/proc/self/maps') as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ''
            if re.search(r'blas|blis|mkl_rt', os.path.basename(path)):
                seen.add(path)
    names = []
    for path in sorted(seen):
        netlib = '/blas/libblas' in path
        names.append(os.path.basename(path) + (' (netlib reference)' if netlib else ''))
    # PyPI's wheels link MKL into libtorch_cpu (the libraries mapped beside it are numpy's OpenBLAS and cuBLAS,
    # which the CPU matmul does not call): the build says so.
    if re.search(r'BLAS_INFO=mkl\b', torch.__config__.show()):
        return 'mkl (linked into libtorch_cpu)'
    return ', '.join(names) if names else 'none'


def one_thread_gemm_gflops(seconds=0.3):
    """GFLOP/s of a 64x1024 by 1024x1024 float32 product at the current torch thread count."""
    a, b = torch.randn(64, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        torch.mm(a, b)
    count, start = 0, time.perf_counter()
    while True:
        torch.mm(a, b)
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return round(2.0 * 64 * 1024 * 1024 * count / elapsed / 1e9, 1)


# ---- models (parameter counts as docs/cli.md lists them) -------------------------------------------------------


# NAME -> the keys its spec takes and their defaults (the presets of docs/cli.md).
MODEL_KEYS = {
    'mlp': {}, 'cnn': {}, 'resnet20': {}, 'gpt-mini': {},
    'gpt2': {'layers': 12, 'd': 768, 'heads': 12, 'ctx': 128, 'vocab': 50257, 'positions': 1024},
    'llama': {'layers': 12, 'd': 768, 'heads': 12, 'ffn': 2048, 'ctx': 128, 'vocab': 32000},
    'resnet18': {'image': 32, 'classes': 10, 'stem': 'imagenet'},
    'resnet50': {'image': 32, 'classes': 10, 'stem': 'imagenet'},
}
# Keys whose value is a word, with the words they take (the first is the default).
MODEL_WORDS = {'stem': ('imagenet', 'cifar')}


def parse_spec(spec):
    """'gpt2:layers=2,d=64' -> ('gpt2', {...defaults with layers=2, d=64}); ValueError on anything else."""
    name, _, options = spec.partition(':')
    if name not in MODEL_KEYS:
        raise ValueError('unknown model %r (one of %s)' % (name, ', '.join(MODEL_KEYS)))
    cfg = dict(MODEL_KEYS[name])
    for item in options.split(','):
        if not item:
            continue
        key, eq, value = item.partition('=')
        if eq and key in cfg and key in MODEL_WORDS:
            if value not in MODEL_WORDS[key]:
                raise ValueError('bad model option %r for %s (%s is one of %s)'
                                 % (item, name, key, ', '.join(MODEL_WORDS[key])))
            cfg[key] = value
            continue
        if not eq or key not in cfg or not re.fullmatch(r'[0-9]+', value) or int(value) == 0:
            raise ValueError('bad model option %r for %s (keys: %s; positive integers)'
                             % (item, name, ', '.join(cfg) if cfg else 'none'))
        cfg[key] = int(value)
    if name in ('gpt2', 'llama') and cfg['d'] % cfg['heads']:
        raise ValueError('%s: d=%d is not a multiple of heads=%d' % (name, cfg['d'], cfg['heads']))
    return name, cfg


def build(spec, batch):
    """(model, input batch, loss of the model's output): a fixed synthetic batch of the model's input shape."""
    name, c = parse_spec(spec)
    if name in ('gpt-mini', 'gpt2', 'llama'):
        if name == 'gpt-mini':
            ctx, vocab = 128, 256
            model = GPT(layers=4, d=256, heads=4, vocab=vocab, positions=ctx, tie=False)
        elif name == 'gpt2':
            ctx, vocab = c['ctx'], c['vocab']
            model = GPT(c['layers'], c['d'], c['heads'], vocab, max(c['positions'], ctx), tie=True)
            gpt2_init(model, c['layers'])
        else:
            ctx, vocab = c['ctx'], c['vocab']
            model = Llama(c['layers'], c['d'], c['heads'], c['ffn'], vocab)
        tokens = torch.randint(0, vocab, (batch, ctx))
        targets = torch.randint(0, vocab, (batch, ctx))
        return model, tokens, lambda logits: F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    if name in ('resnet18', 'resnet50'):
        try:
            import torchvision
        except ImportError:
            raise ValueError('%s needs torchvision (apt-get install python3-torchvision)' % name)
        model = getattr(torchvision.models, name)(num_classes=c['classes'])
        if c['stem'] == 'cifar':  # the CIFAR ResNets' stem: conv3x3/1, no max-pool; torchvision's conv init
            model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
            torch.nn.init.kaiming_normal_(model.conv1.weight, mode='fan_out', nonlinearity='relu')
            model.maxpool = torch.nn.Identity()
        images = torch.randn(batch, 3, c['image'], c['image'])
        labels = torch.randint(0, c['classes'], (batch,))
    else:
        model = {'mlp': mlp, 'cnn': cnn, 'resnet20': resnet20}[name]()
        images = torch.randn(batch, 1, 28, 28)
        labels = torch.randint(0, 10, (batch,))
    return model, images, lambda logits: F.cross_entropy(logits, labels)


def param_count(model):
    """Distinct parameters (a tied weight counted once)."""
    return sum(p.numel() for p in model.parameters())


# ---- synchronisation -------------------------------------------------------------------------------------------

def sync_layers(model):
    """The modules that own parameters directly, in registration (forward) order: dreamddp's layers. A module whose
    parameters all belong to an earlier one (gpt2's head, tied to the token embedding) is not a layer of its own:
    the tied weight is one layer, synced once."""
    seen, layers = set(), []
    for m in model.modules():
        own = [id(p) for p in m.parameters(recurse=False)]
        if own and not all(i in seen for i in own):
            layers.append(m)
            seen.update(own)
    return layers


def plsgd_phases(layers, H):
    """Phase of each layer when the layers are cut into H contiguous groups of about equal parameter count."""
    sizes = [sum(p.numel() for p in m.parameters(recurse=False)) for m in layers]
    total = float(sum(sizes))
    phases, before = [], 0
    for s in sizes:
        phases.append(min(H - 1, int(before * H / total)))
        before += s
    return phases


def broadcast_params(model):
    for p in model.parameters():
        dist.broadcast(p.data, src=0)


class PartialAverager:
    """Per-parameter gradient-accumulator hooks start async all-reduces of parameter values during backward."""

    def __init__(self, model, H, phases, world):
        layers = sync_layers(model)
        if len(phases) != len(layers) or any(ph < 0 or ph >= H for ph in phases):
            fail('--phases needs %d phases in [0, %d), got %r' % (len(layers), H, phases))
        self.H, self.world, self.step = H, world, 0
        self.pending = []
        self.nodes = []  # the accumulator nodes; a hook lives only as long as its node is referenced
        for layer, phase in zip(layers, phases):
            for p in layer.parameters(recurse=False):
                node = p.view_as(p).grad_fn.next_functions[0][0]
                node.register_hook(self._make_hook(p, phase))
                self.nodes.append(node)

    def _make_hook(self, p, phase):
        def hook(*_unused):
            if self.step % self.H == phase:
                self.pending.append((p, dist.all_reduce(p.data, async_op=True)))
        return hook

    def after_backward(self):
        for p, work in self.pending:
            work.wait()
            p.data.div_(self.world)
        self.pending = []
        self.step += 1


# ---- main ------------------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description='PyTorch data-parallel peer of dreamddp (CPU, Gloo).')
    ap.add_argument('--model', default='mlp',
                    help='mlp | cnn | resnet20 | gpt-mini | gpt2[:layers=,d=,heads=,ctx=,vocab=,positions=] | '
                         'llama[:layers=,d=,heads=,ffn=,ctx=,vocab=] | resnet18[:image=,classes=,stem=] | '
                         'resnet50[:image=,classes=,stem=] (stem=imagenet|cifar)')
    ap.add_argument('--optimizer', default='sgd', choices=['sgd', 'adamw'],
                    help='sgd: lr 0.01, momentum 0.9; adamw: lr 1e-3')
    ap.add_argument('--algo', default='ddp', choices=['ddp', 'localsgd', 'partial'])
    ap.add_argument('--k', type=int, default=8, help='localsgd: averaging period; partial: H')
    ap.add_argument('--phases', default='', help='partial: every layer\'s phase, comma-separated (default plsgd)')
    ap.add_argument('--batch', type=int, default=64, help='per-rank batch')
    ap.add_argument('--steps', type=int, default=30, help='timed steps')
    ap.add_argument('--warmup', type=int, default=5, help='untimed steps before them')
    ap.add_argument('--store', required=True, help='file for the Gloo rendezvous (shared by all ranks)')
    a = ap.parse_args(argv)
    for name in ('k', 'batch', 'steps'):
        if getattr(a, name) < 1:
            fail('--%s must be a positive integer' % name)
    if a.warmup < 0:
        fail('--warmup must be a non-negative integer')
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    restart_without_tuning_vars()
    try:
        rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])
    except (KeyError, ValueError):
        fail('RANK and WORLD_SIZE must be set to integers')
    torch.set_num_threads(int(os.environ.get('THREADS', '1')))
    torch.manual_seed(0)
    try:
        model, inputs, loss_of = build(a.model, a.batch)
        phases = [int(t) for t in a.phases.split(',')] if a.phases else None
    except ValueError as e:
        fail(str(e))
    blas = blas_libraries()
    if 'netlib' in blas:
        fail('PyTorch runs on netlib\'s reference BLAS (%s); install libopenblas0-pthread so the peer runs at its '
             'best' % blas)
    gflops = one_thread_gemm_gflops()

    dist.init_process_group('gloo', init_method='file://' + os.path.abspath(a.store), rank=rank, world_size=world)
    net, averager, partial = model, None, None
    if a.algo == 'ddp':
        net = nn.parallel.DistributedDataParallel(model)
    else:
        broadcast_params(model)
        if a.algo == 'localsgd':
            from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
            averager = PeriodicModelAverager(period=a.k, warmup_steps=0)
        else:
            partial = PartialAverager(model, a.k, phases if phases is not None
                                      else plsgd_phases(sync_layers(model), a.k), world)
    if a.optimizer == 'sgd':
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)

    start = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            dist.barrier()
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_of(net(inputs)).backward()
        if partial is not None:
            partial.after_backward()
        opt.step()
        if averager is not None:
            averager.average_parameters(net.parameters())
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({
            'peer': 'torch-' + torch.__version__, 'model': a.model, 'algo': a.algo, 'k': a.k, 'world': world,
            'batch': a.batch, 'params': param_count(model), 'optimizer': a.optimizer,
            'samples_per_s': round(a.steps * a.batch * world / elapsed, 1),
            'step_ms': round(elapsed / a.steps * 1e3, 2), 'threads': torch.get_num_threads(), 'blas': blas,
            'gemm_gflops': gflops, 'openblas_coretype': os.environ.get('OPENBLAS_CORETYPE', '')}), flush=True)
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
