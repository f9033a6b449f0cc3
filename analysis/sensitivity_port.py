"""The trainer's deterministic rules ported to Python for analysis/torch_sensitivity.py: seed streams and
permutations (core/data/shuffle.cpp), the sharder (core/data/sharder.h), the cnn's initialization and the
Fashion-MNIST reader, and the two ways a check can end early."""
import functools
import gzip
import os

import numpy as np


MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
FASHION_MEAN, FASHION_STD = 0.2860, 0.3530   # core/data/dataset.h
# Our layers in forward order -> the PyTorch peer's nn.Sequential index (peers/torch_ddp.py cnn()),
# with the tensors each layer owns, in the --save-params layout (docs/cli.md).
LAYERS = [("conv1", "0", ["weight"], []), ("bn1", "1", ["weight", "bias"], ["running_mean", "running_var"]),
          ("conv2", "3", ["weight"], []), ("bn2", "4", ["weight", "bias"], ["running_mean", "running_var"]),
          ("conv3", "7", ["weight"], []), ("bn3", "8", ["weight", "bias"], ["running_mean", "running_var"]),
          ("fc1", "12", ["weight", "bias"], []), ("fc2", "14", ["weight", "bias"], [])]


class BadInput(Exception):
    """Bad usage or input: exit 2."""


class Mismatch(Exception):
    """The check ran and failed: exit 1."""


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def derive_seed(seed, stream):
    return mix64(seed ^ mix64((stream + GOLDEN) & MASK))


def permutation(n, seed, stream):
    """Fisher-Yates over splitmix64 with rejection of biased draws (shuffle.cpp), as a numpy int64 array."""
    out = list(range(n))
    s = derive_seed(seed, stream)
    for i in range(n - 1, 0, -1):
        bound = i + 1
        threshold = ((1 << 64) - bound) % bound
        while True:
            s = (s + GOLDEN) & MASK
            r = mix64(s)
            if r >= threshold:
                break
        j = r % bound
        out[i], out[j] = out[j], out[i]
    return np.asarray(out, dtype=np.int64)


@functools.lru_cache(maxsize=4)
def fixed_subset(n, count, seed):
    return permutation(n, seed, MASK)[:count]


class Sharder:
    """core/data/sharder.h: global batch of step t = positions [t*N*b, (t+1)*N*b); rank r takes the r-th slice."""

    def __init__(self, size, seed, world, batch):
        self.size, self.seed, self.world, self.batch = size, seed, world, batch
        self.perms = {}

    def _perm(self, e):
        if e not in self.perms:
            if len(self.perms) >= 2:
                self.perms.pop(min(self.perms))
            self.perms[e] = permutation(self.size, self.seed, e)
        return self.perms[e]

    def indices(self, step, rank):
        first = step * self.world * self.batch + rank * self.batch
        pos = np.arange(first, first + self.batch, dtype=np.int64)
        return np.concatenate([self._perm(int(e))[pos[pos // self.size == e] % self.size]
                               for e in np.unique(pos // self.size)])


def init_params(seed):
    """theta(0) of our cnn (core/models/model.cpp finalize, core/nn/layers.cpp init): one splitmix64 stream over
    the layers in order; conv/linear U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (lo + (hi-lo)*u, contracted to one fma by
    -march=x86-64-v3), BatchNorm weight 1, bias 0, running mean 0, var 1. Returns {layer: [arrays]} (params, buffers)."""
    specs = {"conv1": (288, 9), "conv2": (18432, 288), "conv3": (73728, 576), "fc1": (6272 * 256, 6272),
             "fc2": (2560, 256)}
    bias = {"fc1": 256, "fc2": 10}
    counter = 0
    out = {}

    def draw(n, fan_in):
        nonlocal counter
        k = np.arange(counter + 1, counter + n + 1, dtype=np.uint64)
        counter += n
        with np.errstate(over="ignore"):
            z = np.uint64(seed) + k * np.uint64(GOLDEN)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
        b = np.float32(1.0) / np.sqrt(np.float32(fan_in))
        return (np.float64(2 * b) * u.astype(np.float64) - np.float64(b)).astype(np.float32)

    for name, _, _, _ in LAYERS:
        if name.startswith("bn"):
            c = {"bn1": 32, "bn2": 64, "bn3": 128}[name]
            out[name] = [np.ones(c, np.float32), np.zeros(c, np.float32), np.zeros(c, np.float32), np.ones(c, np.float32)]
        else:
            n, fan = specs[name]
            arrs = [draw(n, fan)]
            if name in bias:
                arrs.append(draw(bias[name], fan))
            out[name] = arrs
    return out


def read_idx_gz(path):
    if not os.path.exists(path):
        plain = path[:-3]
        if not os.path.exists(plain):
            raise BadInput("missing dataset file %s (install dataset-fashion-mnist or pass --data-dir)" % path)
        path = plain
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise BadInput("corrupt IDX file %s" % path)
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd)
    if data.size != int(np.prod(dims)):
        raise BadInput("truncated IDX file %s" % path)
    return data.reshape(dims)


def load_train(data_dir):
    img = read_idx_gz(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
    lbl = read_idx_gz(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
    lut = (np.arange(256, dtype=np.float32) / np.float32(255.0) - np.float32(FASHION_MEAN)) / np.float32(FASHION_STD)
    return lut[img].reshape(-1, 1, 28, 28), lbl.astype(np.int64)
