"""The models of the PyTorch peer (peers/torch_ddp.py), each the twin of ours in core/models: mlp, cnn,
resnet20, GPT and Llama, with GPT-2's initialization."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp():
    """784-1024-1024-1024-10 with ReLU: 2,913,290 parameters."""
    widths = [784, 1024, 1024, 1024, 10]
    mods = [nn.Flatten()]
    for i in range(len(widths) - 1):
        mods.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def _conv_bn_relu(cin, cout):
    return [nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def cnn():
    """Three conv-BN-ReLU stages (32, 64, 128 channels, two 2x2 max-pools), fc 6272-256-10: 1,701,354 parameters."""
    return nn.Sequential(*_conv_bn_relu(1, 32), *_conv_bn_relu(32, 64), nn.MaxPool2d(2),
                         *_conv_bn_relu(64, 128), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(128 * 7 * 7, 256), nn.ReLU(), nn.Linear(256, 10))


class ResidualBlock(nn.Module):
    """Two 3x3 conv-BN with a 1x1 conv-BN projection on the shortcut where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


def resnet20():
    """CIFAR-style ResNet-20 on 1x28x28 input (three stages of three blocks, 16/32/64 channels)."""
    mods = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, first_stride in ((16, 1), (32, 2), (64, 2)):
        for j in range(3):
            mods.append(ResidualBlock(cin, cout, first_stride if j == 0 else 1))
            cin = cout
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*mods)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(head_dim)) v over (B, heads, T, head_dim) with future positions masked out."""
    T = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    return torch.matmul(scores.masked_fill(future, float('-inf')).softmax(dim=-1), v)


def split_heads(t, heads):
    B, T, D = t.shape
    return t.view(B, T, heads, D // heads).transpose(1, 2)


def merge_heads(t):
    B, H, T, hd = t.shape
    return t.transpose(1, 2).reshape(B, T, H * hd)


class GPTBlock(nn.Module):
    """Pre-LayerNorm transformer block: fused qkv projection, GELU MLP of width 4d."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        att = causal_attention(split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads))
        x = x + self.proj(merge_heads(att))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and learned position embeddings, blocks, final LayerNorm, bias-free head (optionally tied)."""

    def __init__(self, layers, d, heads, vocab, positions, tie):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(positions, d)
        self.blocks = nn.Sequential(*(GPTBlock(d, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if tie:
            self.head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.wte(idx) + self.wpe(pos))))


def gpt2_init(model, layers):
    """GPT-2's initialization, as dreamddp's gpt2 (docs/models.md): embeddings and linears N(0, 0.02) with zero
    biases, the residual projections (proj, fc2) N(0, 0.02/sqrt(2 layers)), LayerNorms 1 and 0."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.zero_()
        for b in model.blocks:
            b.proj.weight.normal_(0.0, 0.02 / math.sqrt(2 * layers))
            b.fc2.weight.normal_(0.0, 0.02 / math.sqrt(2 * layers))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + self.eps))


def apply_rope(x, base=10000.0):
    """Rotary embedding on (B, heads, T, head_dim): each pair (2i, 2i+1) rotated by t * base^(-2i/head_dim)."""
    T, hd = x.shape[-2], x.shape[-1]
    inv_freq = torch.pow(base, -torch.arange(0, hd, 2, dtype=torch.float32, device=x.device) / hd)
    angle = torch.outer(torch.arange(T, dtype=torch.float32, device=x.device), inv_freq)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    """RMSNorm, bias-free q/k/v/o with RoPE on q and k, SwiGLU feed-forward."""

    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.n1 = RMSNorm(d)
        self.n2 = RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        y = self.n1(x)
        q = apply_rope(split_heads(self.q(y), self.heads))
        k = apply_rope(split_heads(self.k(y), self.heads))
        x = x + self.o(merge_heads(causal_attention(q, k, split_heads(self.v(y), self.heads))))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    def __init__(self, layers, d, heads, ffn, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*(LlamaBlock(d, heads, ffn) for _ in range(layers)))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        return self.head(self.norm(self.blocks(self.embed(idx))))
