"""The PyTorch replica of analysis/probe_e2e.py: the images it trains on, our layers mapped onto the torch
model's, loading our parameters and buffers into it, and the replica that trains and probes."""
import os

import numpy as np

import sensitivity_port

CHUNK = 256              # core/train/sensitivity.cpp: image models' probe chunk


# ---- inputs: Fashion-MNIST as our loader makes it (core/data/fashion_mnist.cpp, core/data/resize.cpp) ----

def axis_taps(n_in, n_out):
    scale = np.float32(n_in) / np.float32(n_out)
    s = np.maximum(scale * (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    i0 = np.minimum(s.astype(np.int64), n_in - 1)
    frac = s - i0.astype(np.float32)
    i1 = np.where(i0 < n_in - 1, i0 + 1, i0)
    return i0, i1, np.float32(1) - frac, frac


class Images:
    """Training images by index, in the model's input shape: 1x28x28 as stored, or 3xHxW (x/255 resized
    bilinearly, then normalized, one plane repeated as three channels)."""

    def __init__(self, data_dir, shape):
        img = sensitivity_port.read_idx_gz(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
        self.y = sensitivity_port.read_idx_gz(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")).astype(np.int64)
        self.u8, self.shape, self.size = img, tuple(shape), img.shape[0]

    def x(self, idx):
        u = self.u8[idx].astype(np.float32) / np.float32(255.0)
        if self.shape != (1, 28, 28):
            _, H, W = self.shape
            ty, tx = axis_taps(28, H), axis_taps(28, W)
            rows = tx[2] * u[:, :, tx[0]] + tx[3] * u[:, :, tx[1]]            # along x: [n, 28, W]
            u = ty[2][None, :, None] * rows[:, ty[0], :] + ty[3][None, :, None] * rows[:, ty[1], :]
        x = (u - np.float32(sensitivity_port.FASHION_MEAN)) / np.float32(sensitivity_port.FASHION_STD)
        if self.shape[0] == 3:
            x = np.repeat(x[:, None], 3, axis=1)
        return np.ascontiguousarray(x.reshape((len(idx),) + self.shape), dtype=np.float32)


def input_shape(name, cfg):
    return (3, cfg["image"], cfg["image"]) if name in ("resnet18", "resnet50") else (1, 28, 28)


# ---- the PyTorch replica ----

def torch_layers(model):
    """(module, parameter tensors, buffer tensors) per layer in our --save-params order."""
    import torch_ddp
    out = []
    for m in torch_ddp.sync_layers(model):
        params = [p for _, p in m.named_parameters(recurse=False)]
        bufs = [m.running_mean, m.running_var] if hasattr(m, "running_mean") and m.running_mean is not None else []
        out.append((m, params, bufs))
    return out


def load_theta(model, path, names, counts):
    """Parameters of the --save-params file into the model (buffers skipped: see the docstring)."""
    import torch
    raw = np.fromfile(path, dtype="<f4")
    layers = torch_layers(model)
    if len(layers) != len(counts):
        raise sensitivity_port.BadInput("the torch model has %d layers, our run %d (%s)" % (len(layers), len(counts), names))
    o = 0
    with torch.no_grad():
        for (m, params, bufs), name, n in zip(layers, names, counts):
            if sum(p.numel() for p in params) != n:
                raise sensitivity_port.BadInput("layer %s: %d parameters in our run, %d in torch's %s" %
                                  (name, n, sum(p.numel() for p in params), type(m).__name__))
            for p in params:
                p.copy_(torch.from_numpy(raw[o:o + p.numel()].copy()).view_as(p))
                o += p.numel()
            o += sum(b.numel() for b in bufs)
    if o != raw.size:
        raise sensitivity_port.BadInput("%s holds %d floats, the model %d" % (path, raw.size, o))


def read_buffers(path, model):
    """Per layer: the running statistics in a --save-params file (empty for layers without)."""
    raw = np.fromfile(path, dtype="<f4").astype(np.float64)
    out, o = [], 0
    for _, params, bufs in torch_layers(model):
        o += sum(p.numel() for p in params)
        nb = sum(b.numel() for b in bufs)
        out.append(raw[o:o + nb])
        o += nb
    return out


class Replica:
    """One PyTorch copy of the run in a given precision."""

    def __init__(self, spec, dtype, theta0, names, counts, ta):
        import torch
        import torch_ddp
        torch.manual_seed(0)
        self.model, _, _ = torch_ddp.build(spec, 1)
        load_theta(self.model, theta0, names, counts)
        self.model.to(dtype)
        self.dtype = dtype
        self.layers = torch_layers(self.model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=ta.lr, momentum=ta.momentum, nesterov=ta.nesterov,
                                   weight_decay=ta.weight_decay)

    def probe_gradient(self, x, y, mutate):
        """Per-layer gradient of the mean loss over the probe batch: train-mode forward over chunks of 256, each
        chunk's loss weighted by its share, running statistics restored (docs/design.md)."""
        import torch
        import torch.nn.functional as F
        saved = [b.clone() for _, _, bufs in self.layers for b in bufs]
        self.model.train(mutate != "eval-bn")
        self.model.zero_grad(set_to_none=False)
        n = x.shape[0]
        chunk = n if mutate == "one-chunk" else CHUNK
        for first in range(0, n, chunk):
            xc = torch.from_numpy(x[first:first + chunk]).to(self.dtype)
            yc = torch.from_numpy(y[first:first + chunk])
            (F.cross_entropy(self.model(xc), yc) * (xc.shape[0] / n)).backward()
        g = [np.concatenate([p.grad.detach().double().numpy().ravel() for p in params])
             for _, params, _ in self.layers]
        self.model.zero_grad(set_to_none=False)
        if mutate != "keep-stats":
            with torch.no_grad():
                for b, s in zip([b for _, _, bufs in self.layers for b in bufs], saved):
                    b.copy_(s)
        return g

    def train_step(self, x, y, lr):
        import torch
        import torch.nn.functional as F
        self.model.train()
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(torch.from_numpy(x).to(self.dtype)), torch.from_numpy(y))
        loss.backward()
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        return float(loss)

    def buffers(self):
        return [np.concatenate([b.detach().double().numpy().ravel() for b in bufs]) if bufs else np.zeros(0)
                for _, _, bufs in self.layers]


def cosines(a, b):
    out = []
    for u, v in zip(a, b):
        uu, vv = float(u @ u), float(v @ v)
        out.append(float(u @ v) / np.sqrt(uu * vv) if uu > 0 and vv > 0 else np.nan)
    return np.asarray(out)


def rel_err(a, b):
    """|a - b| / |b| per layer (0 where both are zero)."""
    out = []
    for u, v in zip(a, b):
        nv = float(np.linalg.norm(v))
        out.append(float(np.linalg.norm(u - v)) / nv if nv > 0 else (0.0 if not np.any(u) else np.inf))
    return np.asarray(out)
