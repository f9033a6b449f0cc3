"""The peers' synthetic training data, as `dreamddp train --data synthetic` makes it (torchft_peer.py)."""


SYNTHETIC_SIZE, SYNTHETIC_BYTES = 10000, 512 << 20   # dreamddp's synthetic training set: samples and byte budget


def batch_maker(spec, batch, seed, rank, world):
    """A function giving the next (inputs, targets) of this rank, and the vocabulary (None for images).

    As `dreamddp train --data synthetic`: one fixed set of random samples with random labels, the same on every
    rank (10,000 samples, fewer where they would pass 512 MiB), drawn in a fresh random order each epoch, of which
    rank r takes every world-th sample from r on; a model learns it by heart, so its loss falls as ours does."""
    import torch
    import torch_ddp
    name, c = torch_ddp.parse_spec(spec)
    g = torch.Generator().manual_seed(seed * 1000003 + 7)
    if name in ('gpt-mini', 'gpt2', 'llama'):
        ctx, vocab = (128, 256) if name == 'gpt-mini' else (c['ctx'], c['vocab'])
        n = max(1, min(SYNTHETIC_SIZE, SYNTHETIC_BYTES // (8 * ctx)))
        xs = torch.randint(0, vocab, (n, ctx), generator=g)
        ys = torch.randint(0, vocab, (n, ctx), generator=g)
    else:
        shape = (3, c['image'], c['image']) if name in ('resnet18', 'resnet50') else (1, 28, 28)
        classes = c['classes'] if name in ('resnet18', 'resnet50') else 10
        numel = 1
        for d in shape:
            numel *= d
        n = max(1, min(SYNTHETIC_SIZE, SYNTHETIC_BYTES // (4 * (numel + 1))))
        xs = torch.randn((n,) + shape, generator=g)
        ys = torch.randint(0, classes, (n,), generator=g)
        vocab = None
    state = {'epoch': 0, 'order': torch.empty(0, dtype=torch.long), 'pos': 0}

    def next_batch():
        idx = []
        while len(idx) < batch:
            if state['pos'] >= len(state['order']):
                perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1000003 + 11 +
                                                                                 state['epoch']))
                state['order'], state['pos'], state['epoch'] = perm[rank::world] if n >= world else perm, 0, \
                    state['epoch'] + 1
            take = min(batch - len(idx), len(state['order']) - state['pos'])
            idx += state['order'][state['pos']:state['pos'] + take].tolist()
            state['pos'] += take
        return xs[idx], ys[idx]
    return next_batch, vocab
