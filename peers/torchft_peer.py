#!/usr/bin/env python3
"""The torchft peer: one rank of a fault-tolerant LocalSGD / DiLoCo / Streaming DiLoCo run with torchft's own
classes (Manager, ProcessGroupGloo, LocalSGD, DiLoCo, the lighthouse), on dreamddp's reference models.

Usage (one process per rank, e.g. under `dreamddp launch -n 2 --netem 1gbit --`):

    RANK=r WORLD_SIZE=N THREADS=1 python peers/torchft_peer.py --model gpt2:layers=2,d=64 --optimizer adamw \\
        --algo diloco --sync-every 8 --fragments 4 --fragment-sync-delay 1 --steps 48

Every rank is a replica group of its own (torchft's unit of fault tolerance): it hosts its group's TCPStore and
ManagerServer on its own address, and the groups meet through one lighthouse. Rank 0 runs the lighthouse inside
its process (torchft._torchft.LighthouseServer) on MASTER_ADDR:MASTER_PORT, which `dreamddp launch` sets to rank
0's address (inside the emulated cluster, rank 0's namespace: the only place every rank can reach);
`--lighthouse URL` uses a lighthouse that runs elsewhere instead.

Algorithms (--algo), with torchft's classes:
  localsgd  torchft.local_sgd.LocalSGD(sync_every=H): parameters averaged every H optimizer steps.
  diloco    torchft.local_sgd.DiLoCo(sync_every=H, outer SGD lr/momentum, nesterov): pseudo-gradients averaged
            every H steps and applied by the outer optimizer. --fragments F (F divides H) cuts the model's layers
            (in forward order, about equal parameter counts each) into F fragments synced in turn, one every H/F
            steps; --fragment-sync-delay D (D < H/F) lets the all-reduce of a fragment run for D inner steps
            before it is merged (Streaming DiLoCo). --quantize passes should_quantize=True (torchft's FP8
            all-reduce; its kernels are Triton/CUDA: refused with exit 2 where CUDA is not available).

Data: as `dreamddp train --data synthetic`, a fixed set of 10,000 random samples with random labels (tokens and
targets uniform in [0, vocab); images unit-variance noise with uniform labels), the same on every rank, sharded
over the ranks in a fresh order each epoch: a set a model can learn by heart, so both sides' losses fall. Optimizers as
peers/torch_ddp.py: sgd lr 0.01 momentum 0.9, adamw lr 1e-3, constant.

The run lasts until the Manager has committed the syncs of --warmup + --steps inner steps (a discarded sync is
redone, so a restarted replica that heals from a live one stops with it). Rank 0 prints one JSON line: peer, torch,
model, algo, class, settings, world, batch, params, optimizer, samples_per_s and step_ms (inner steps after
--warmup), final_loss, loss_curve ([seconds since the first step, step, loss] on rank 0), commits ([unix time,
manager step, participants, committed] per sync on rank 0), batches_committed, gemm_gflops, threads, blas.

--supervise R: this process starts the rank as a child and starts it again (up to R times) when it dies by a
signal, as torchft expects of its scheduler; the child rejoins through the lighthouse and heals from a live
replica. Bad arguments: one line on stderr, exit 2 (checked before torch is imported).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

PROG = 'torchft_peer.py'
HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    sys.stderr.write('%s: %s\n' % (PROG, msg))
    sys.exit(2)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        fail(message)


def parse_args(argv):
    ap = _Parser(prog=PROG, description='torchft peer of dreamddp (CPU, Gloo): LocalSGD, DiLoCo, Streaming DiLoCo.')
    ap.add_argument('--model', default='mlp', help='a spec of `dreamddp train --model` (peers/torch_ddp.py)')
    ap.add_argument('--optimizer', default='sgd', choices=['sgd', 'adamw'], help='sgd: lr 0.01, momentum 0.9; '
                    'adamw: lr 1e-3')
    ap.add_argument('--algo', default='localsgd', choices=['localsgd', 'diloco'])
    ap.add_argument('--sync-every', type=int, default=8, help='H: inner steps per sync of the whole model')
    ap.add_argument('--fragments', type=int, default=1, help='diloco: F fragments, one synced every H/F steps')
    ap.add_argument('--fragment-sync-delay', type=int, default=0, help='diloco: D inner steps of overlap (D < H/F)')
    ap.add_argument('--outer', default='nesterov', choices=['nesterov', 'avg'],
                    help='diloco: outer SGD with Nesterov momentum, or plain averaging (lr 1, momentum 0)')
    ap.add_argument('--outer-lr', type=float, default=0.7)
    ap.add_argument('--outer-momentum', type=float, default=0.9)
    ap.add_argument('--quantize', action='store_true', help='diloco: torchft quantized all-reduce')
    ap.add_argument('--batch', type=int, default=64, help='per-rank batch')
    ap.add_argument('--steps', type=int, default=48, help='timed inner steps')
    ap.add_argument('--warmup', type=int, default=-1, help='untimed inner steps before them (default H)')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--timeout', type=float, default=60, help='seconds for collectives, commits and heals')
    ap.add_argument('--quorum-timeout', type=float, default=120, help='seconds a quorum may take to form')
    ap.add_argument('--lighthouse', default='', help='URL of a running lighthouse (default: rank 0 runs one)')
    ap.add_argument('--min-replicas', type=int, default=0,
                    help="the lighthouse's min_replicas and the Manager's min_replica_size (default WORLD_SIZE)")
    ap.add_argument('--join-timeout', type=float, default=30, help="lighthouse: seconds to wait for stragglers")
    ap.add_argument('--heartbeat-timeout', type=float, default=5, help="lighthouse: a silent replica is gone after")
    ap.add_argument('--supervise', type=int, default=0, metavar='R', help='restart this rank up to R times')
    a = ap.parse_args(argv)
    for name in ('sync_every', 'fragments', 'batch', 'steps'):
        if getattr(a, name) < 1:
            fail('--%s must be a positive integer' % name.replace('_', '-'))
    for name in ('fragment_sync_delay', 'min_replicas', 'supervise', 'seed'):
        if getattr(a, name) < 0:
            fail('--%s must be a non-negative integer' % name.replace('_', '-'))
    for name in ('timeout', 'quorum_timeout', 'join_timeout', 'heartbeat_timeout'):
        if not getattr(a, name) > 0:
            fail('--%s must be a positive number of seconds' % name.replace('_', '-'))
    if a.warmup < 0:
        a.warmup = a.sync_every
    if a.algo == 'localsgd' and (a.fragments != 1 or a.fragment_sync_delay or a.quantize):
        fail('--fragments, --fragment-sync-delay and --quantize are DiLoCo options (--algo diloco)')
    if a.algo == 'diloco':
        if a.sync_every % a.fragments:
            fail('--fragments %d does not divide --sync-every %d' % (a.fragments, a.sync_every))
        if a.fragment_sync_delay >= a.sync_every // a.fragments:
            fail('--fragment-sync-delay %d must be below --sync-every / --fragments = %d'
                 % (a.fragment_sync_delay, a.sync_every // a.fragments))
        if not (0 < a.outer_lr <= 10) or not (0 <= a.outer_momentum < 1):
            fail('--outer-lr must be in (0, 10], --outer-momentum in [0, 1)')
    if (a.warmup + a.steps) % a.sync_every:
        fail('--warmup + --steps (%d) must be a multiple of --sync-every %d (whole periods)'
             % (a.warmup + a.steps, a.sync_every))
    if a.warmup % a.sync_every:
        fail('--warmup %d must be a multiple of --sync-every %d' % (a.warmup, a.sync_every))
    try:
        rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])
    except (KeyError, ValueError):
        fail('RANK and WORLD_SIZE must be set to integers')
    if world < 1 or not 0 <= rank < world:
        fail('RANK %d is not in [0, WORLD_SIZE %d)' % (rank, world))
    if a.min_replicas > world:
        fail('--min-replicas %d is above WORLD_SIZE %d' % (a.min_replicas, world))
    try:
        sys.path.insert(0, HERE)
        import torch_ddp  # noqa: F401  (the model spec is checked with torch_ddp's own parser)
    except ImportError as e:
        fail('cannot import torch or peers/torch_ddp.py: %s' % e)
    try:
        torch_ddp.parse_spec(a.model)
    except ValueError as e:
        fail(str(e))
    a.rank, a.world = rank, world
    return a


def supervise(a, argv):
    """Run this rank as a child; start it again when it dies by a signal (at most a.supervise times)."""
    child_argv = [x for i, x in enumerate(argv) if x != '--supervise' and (i == 0 or argv[i - 1] != '--supervise')
                  and not x.startswith('--supervise=')]
    restarts, child = 0, None

    def forward(sig, _frame):
        if child is not None and child.poll() is None:
            child.send_signal(sig)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    while True:
        env = dict(os.environ, TORCHFT_PEER_CHILD='1', TORCHFT_PEER_RESTART=str(restarts))
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + child_argv, env=env)
        rc = child.wait()
        if rc >= 0 or restarts >= a.supervise:
            sys.exit(rc if rc >= 0 else 128 - rc)
        restarts += 1
        sys.stderr.write('%s: rank %d died by signal %d; starting it again (%d of %d)\n'
                         % (PROG, a.rank, -rc, restarts, a.supervise))


def die_with_parent():
    """The supervised child dies with its supervisor (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def iface_address(name):
    """IPv4 address of interface `name` (SIOCGIFADDR); 127.0.0.1 for lo or when it has none."""
    import fcntl
    import socket
    import struct
    if not name or name == 'lo':
        return '127.0.0.1'
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack('256s', name[:15].encode()))
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return '127.0.0.1'
    finally:
        s.close()


def fragments_of(model, F):
    """F nn.ModuleLists of the model's layers (modules that own parameters, forward order; torch_ddp.sync_layers),
    cut into F contiguous groups of about equal parameter count (torch_ddp.plsgd_phases)."""
    import torch.nn as nn
    import torch_ddp
    layers = torch_ddp.sync_layers(model)
    phases = torch_ddp.plsgd_phases(layers, F)
    groups = [[m for m, ph in zip(layers, phases) if ph == f] for f in range(F)]
    if any(not g for g in groups):
        fail('--fragments %d: the model has too few layers for that many fragments' % F)
    for g in groups:
        for m in g:
            if any(True for _ in m.children()) and any(True for _ in m.parameters(recurse=False)):
                fail('--fragments: layer %s owns parameters and has children; cannot fragment this model'
                     % type(m).__name__)
    return [nn.ModuleList(g) for g in groups]


def make_manager(a, model):
    """The optimizer and this replica's torchft Manager around it, and the Lighthouse when this rank runs it
    (rank 0 without --lighthouse): (manager, optimizer, lighthouse or None, replicas a quorum needs). The Manager
    holds the replica group's TCPStore by address only: the store object rides on it, or the server would close
    when this function returns and every quorum would time out connecting to it."""
    from datetime import timedelta
    import torch
    from torch.distributed import TCPStore
    from torchft import Manager, ProcessGroupGloo
    from torchft.checkpointing.http_transport import HTTPTransport
    from torchft._torchft import LighthouseServer
    ip = iface_address(os.environ.get('GLOO_SOCKET_IFNAME', 'lo'))
    master = os.environ.get('MASTER_ADDR', '127.0.0.1')
    master_port = int(os.environ.get('MASTER_PORT', '29500'))
    min_replicas = a.min_replicas or a.world
    timeout = timedelta(seconds=a.timeout)
    lighthouse = None
    lighthouse_addr = a.lighthouse or 'http://%s:%d' % (master, master_port)
    if not a.lighthouse and a.rank == 0:
        lighthouse = LighthouseServer(bind='[::]:%d' % master_port, min_replicas=min_replicas,
                                      join_timeout_ms=int(a.join_timeout * 1000), quorum_tick_ms=20,
                                      heartbeat_timeout_ms=int(a.heartbeat_timeout * 1000))
    # This replica group's store, on this rank's own address (the group is this one rank).
    store = TCPStore(host_name=ip, port=0, is_master=True, wait_for_workers=False)

    class Transport(HTTPTransport):
        """torchft's HTTP checkpoint transport, advertised by address (host names of emulated nodes resolve
        nowhere)."""

        def address(self):
            return 'http://%s:%d/checkpoint/' % (ip, self._server.socket.getsockname()[1])

    if a.optimizer == 'sgd':
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timeout),
        load_state_dict=lambda sd: (model.load_state_dict(sd['model']), opt.load_state_dict(sd['optim'])),
        state_dict=lambda: {'model': model.state_dict(), 'optim': opt.state_dict()},
        min_replica_size=min_replicas, use_async_quorum=False, timeout=timeout,
        quorum_timeout=timedelta(seconds=a.quorum_timeout),
        connect_timeout=timeout, rank=0, world_size=1, store_addr=ip, store_port=store.port,
        lighthouse_addr=lighthouse_addr, replica_id='replica%d' % a.rank, port=0, hostname=ip,
        checkpoint_transport=Transport(timeout=timeout, num_chunks=0), init_sync=False)
    manager.dreamddp_peer_store = store
    return manager, opt, lighthouse, min_replicas


def make_algo(a, manager, model, opt, min_replicas):
    """The torchft algorithm (LocalSGD or DiLoCo) around the optimizer: (algorithm, its class, its settings, the
    syncs to commit)."""
    import torch
    from torchft.local_sgd import LocalSGD, DiLoCo
    settings = {'sync_every': a.sync_every}
    if a.algo == 'localsgd':
        cls = 'torchft.local_sgd.LocalSGD'
        algo = LocalSGD(manager, model, opt, sync_every=a.sync_every)
        commits_target = (a.warmup + a.steps) // a.sync_every
    else:
        cls = 'torchft.local_sgd.DiLoCo'
        frags = fragments_of(model, a.fragments) if a.fragments > 1 else [model]
        nesterov = a.outer == 'nesterov'
        outer = [torch.optim.SGD(f.parameters(), lr=a.outer_lr if nesterov else 1.0,
                                 momentum=a.outer_momentum if nesterov else 0.0, nesterov=nesterov) for f in frags]
        algo = DiLoCo(manager, frags, opt, outer, sync_every=a.sync_every, should_quantize=a.quantize,
                      fragment_sync_delay=a.fragment_sync_delay)
        settings.update({'fragments': a.fragments, 'fragment_sync_delay': a.fragment_sync_delay,
                         'outer': 'SGD(lr=%g, momentum=%g, nesterov=%s)' % (
                             a.outer_lr if nesterov else 1.0, a.outer_momentum if nesterov else 0.0, nesterov),
                         'should_quantize': a.quantize})
        commits_target = (a.warmup + a.steps) // a.sync_every * a.fragments
    settings['min_replica_size'] = min_replicas
    return algo, cls, settings, commits_target


def record_commits(manager):
    """Commits as rank 0 sees them: wraps should_commit (the one place a sync is decided); the list fills as the
    syncs are decided."""
    commits = []
    inner_should_commit = manager.should_commit

    def should_commit(*args, **kwargs):
        ok = inner_should_commit(*args, **kwargs)
        commits.append([round(time.time(), 3), manager.current_step(), manager.num_participants(), bool(ok)])
        return ok
    manager.should_commit = should_commit
    return commits


def train(a, algo, manager, model, opt, next_batch, loss_of, commits_target):
    """Inner steps until the syncs are committed: (loss curve, inner steps, start, end of the warm-up, its step,
    end, last loss)."""
    curve, step, t_first, t_warm, warm_step = [], 0, None, None, None
    loss_v = float('nan')
    with algo:
        while manager.current_step() < commits_target:
            if step >= 4 * (a.warmup + a.steps) + 4 * a.sync_every:
                sys.stderr.write('%s: rank %d: %d inner steps and only %d of %d syncs committed; giving up\n'
                                 % (PROG, a.rank, step, manager.current_step(), commits_target))
                sys.exit(3)
            x, y = next_batch()
            if t_first is None:
                t_first = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model(x), y)
            loss.backward()
            opt.step()  # LocalSGD / DiLoCo sync from the optimizer's post-step hook
            step += 1
            loss_v = loss.item()
            curve.append([round(time.perf_counter() - t_first, 3), step, round(loss_v, 4)])
            done = manager.current_step() * (a.sync_every // (1 if a.algo == 'localsgd' else a.fragments))
            if t_warm is None and done >= a.warmup:
                t_warm, warm_step = time.perf_counter(), step
    t_end = time.perf_counter()
    return curve, step, t_first, t_warm, warm_step, t_end, loss_v


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.supervise and not os.environ.get('TORCHFT_PEER_CHILD'):
        supervise(a, argv)
    if os.environ.get('TORCHFT_PEER_CHILD'):
        die_with_parent()
    try:  # everything the steps below import, so that a missing piece fails here, before anything starts
        import torch
        import torch.nn.functional as F
        from torch.distributed import TCPStore  # noqa: F401
        import torchft
        from torchft import Manager, ProcessGroupGloo  # noqa: F401
        from torchft.local_sgd import LocalSGD, DiLoCo  # noqa: F401
        from torchft.checkpointing.http_transport import HTTPTransport  # noqa: F401
        from torchft._torchft import LighthouseServer  # noqa: F401
        import torch_ddp
    except ImportError as e:
        fail('torchft is not importable (%s); install it beside torch (make deps-peer)' % e)
    try:
        from importlib.metadata import version
        tft_version = version('torchft')
    except Exception:  # noqa: BLE001 (metadata missing: say so rather than guess)
        tft_version = getattr(torchft, '__version__', 'unknown')

    if a.quantize and not torch.cuda.is_available():
        fail('--quantize: torchft %s quantizes with Triton FP8 kernels on CUDA devices only, and this CPU peer has '
             'none (every sync would fail and none would commit)' % tft_version)
    torch.set_num_threads(int(os.environ.get('THREADS', '1')))
    torch.manual_seed(a.seed)  # the same initial model on every replica (init_sync=False)
    try:
        model, _fixed, _loss = torch_ddp.build(a.model, a.batch)
    except ValueError as e:
        fail(str(e))
    import peer_data
    next_batch, vocab = peer_data.batch_maker(a.model, a.batch, a.seed, a.rank, a.world)
    if vocab:
        loss_of = lambda out, y: F.cross_entropy(out.reshape(-1, vocab), y.reshape(-1))  # noqa: E731
    else:
        loss_of = lambda out, y: F.cross_entropy(out, y)  # noqa: E731
    blas = torch_ddp.blas_libraries()
    gflops = torch_ddp.one_thread_gemm_gflops()

    manager, opt, lighthouse, min_replicas = make_manager(a, model)
    algo, cls, settings, commits_target = make_algo(a, manager, model, opt, min_replicas)
    commits = record_commits(manager)
    curve, step, t_first, t_warm, warm_step, t_end, loss_v = train(a, algo, manager, model, opt, next_batch, loss_of,
                                                                   commits_target)
    timed = step - warm_step
    elapsed = t_end - t_warm
    if a.rank == 0:
        world = max([c[2] for c in commits] or [a.world])
        print(json.dumps({
            'peer': 'torchft-' + tft_version, 'torch': torch.__version__, 'model': a.model, 'algo': a.algo,
            'class': cls, 'settings': settings, 'world': a.world, 'batch': a.batch,
            'params': torch_ddp.param_count(model), 'optimizer': a.optimizer, 'inner_steps': step,
            'timed_steps': timed,
            'samples_per_s': round(timed * a.batch * world / elapsed, 2) if timed else None,
            'step_ms': round(elapsed / timed * 1e3, 2) if timed else None, 'wall_s': round(t_end - t_first, 3),
            'final_loss': round(loss_v, 4), 'loss_curve': curve, 'commits': commits,
            'batches_committed': manager.batches_committed(), 'threads': torch.get_num_threads(), 'blas': blas,
            'gemm_gflops': gflops, 'restart': int(os.environ.get('TORCHFT_PEER_RESTART', '0'))}), flush=True)
    manager.shutdown(wait=False)
    if lighthouse is not None:
        time.sleep(1.0)  # the other replicas' last heartbeats and should_commit calls land before it goes
        lighthouse.shutdown()


if __name__ == '__main__':
    main()
