"""peers/torch_ddp.py: model parameter counts and layer sizes, and one JSON line from a 1-process run of each algo.

  torch_peer_test.py PEER [OTHER_PEER]

PEER's models must have the parameter counts docs/cli.md lists; where OTHER_PEER exists (another implementation of
the same peer, e.g. an older copy), both must build the same parameter count and the same sync layers (sizes in
order) for mlp, cnn, resnet20, gpt-mini and tiny gpt2/llama specs; gpt2 starts near ln(vocab) (GPT-2's
initialization). Exit 77 (skip) without torch.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
except ImportError:
    print("skip: /usr/bin/python3 lacks torch")
    sys.exit(77)

PEER = os.path.abspath(sys.argv[1])
OTHER = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else ""
# docs/cli.md's reference models
DOCUMENTED = {"mlp": 2913290, "cnn": 1701354, "resnet20": 272186, "gpt-mini": 3323392}
TINY = ["gpt2:layers=2,d=32,heads=2,ctx=8,vocab=50,positions=16", "gpt2:layers=1,d=16,heads=4,ctx=20,vocab=7,positions=4",
        "llama:layers=2,d=32,heads=4,ffn=48,ctx=8,vocab=40"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def load(path, name):
    # A peer re-executes itself when OPENBLAS_CORETYPE is set; keep whatever imports it from doing so.
    os.environ["PEER_KEEP_CORETYPE"] = "1"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def shape(mod, spec, layers_of=None):
    """(parameters, per-layer sizes) of a spec built by `mod`, its layers cut by `layers_of` (mod's own by default)."""
    model = mod.build(spec, 2)[0]
    sizes = [sum(p.numel() for p in m.parameters(recurse=False)) for m in (layers_of or mod.sync_layers)(model)]
    return sum(p.numel() for p in model.parameters()), sizes


peer = load(PEER, "peer_under_test")
for m, n in DOCUMENTED.items():
    got = shape(peer, m)[0]
    check(got == n, "%s has %d parameters, docs/cli.md says %d" % (m, got, n))
# gpt2's head is tied to the token embedding: counted once.
p, _ = shape(peer, TINY[0])
expect = 50 * 32 + 16 * 32 + 2 * (4 * 32 + 3 * 32 * 32 + 3 * 32 + 32 * 32 + 32 + 4 * 32 * 32 + 4 * 32 + 4 * 32 * 32 + 32) + 2 * 32
check(p == expect, "%s has %d parameters, by hand %d" % (TINY[0], p, expect))
# ... and it is one layer, synced once: wte, wpe, 6 per block, the final LayerNorm; no layer for the head.
_, sizes = shape(peer, TINY[0])
check(len(sizes) == 2 + 6 * 2 + 1 and sizes[0] == 50 * 32,
      "%s: %d layers (%s), want 15 with the tied head in the first" % (TINY[0], len(sizes), sizes))
# gpt2 starts as GPT-2 does (N(0, 0.02), residual projections scaled by depth): the untrained loss on uniform
# random targets is near ln(vocab), not the ~500 of N(0, 1) embeddings under a tied head. At d=768 the logits'
# standard deviation is about 0.02 sqrt(768) = 0.55, which adds about 0.55^2/2 = 0.15 to ln(50257) = 10.8.
import math  # noqa: E402
for spec in ("gpt2:layers=12,d=768,heads=12,ctx=32,vocab=50257", "gpt2:layers=2,d=64,heads=2,ctx=16,vocab=2000"):
    torch.manual_seed(0)
    model, x, loss_of = peer.build(spec, 2)
    with torch.no_grad():
        loss = float(loss_of(model(x)))
    vocab = peer.parse_spec(spec)[1]["vocab"]
    check(abs(loss / math.log(vocab) - 1) <= 0.05,
          "%s: initial loss %.3f, ln(vocab) %.3f" % (spec, loss, math.log(vocab)))
    proj = model.blocks[0].proj.weight
    want = 0.02 / math.sqrt(2 * peer.parse_spec(spec)[1]["layers"])
    # the sample standard deviation of n normals is within 5/sqrt(2n) of sigma (relative) but for 1 in 3.5 million
    check(abs(float(proj.std()) / want - 1) <= 5 / math.sqrt(2 * proj.numel()),
          "%s: proj std %.5f, want %.5f" % (spec, float(proj.std()), want))
# bad specs are refused with ValueError (the CLI turns it into exit 2)
for bad in ("gpt2:layers=0", "gpt2:d=30,heads=4", "mlp:d=3", "nosuch", "llama:ffn=x", "resnet18:stem=foo",
            "resnet50:stem=7", "mlp:stem=cifar"):
    try:
        peer.parse_spec(bad)
        check(False, "spec %r accepted" % bad)
    except ValueError:
        pass

# stem=cifar: conv1 3x3 (1,728 parameters instead of 9,408), no max pool, the same 41 layers (docs/models.md)
try:
    import torchvision  # noqa: F401
    for spec, n in (("resnet18", 11181642), ("resnet18:stem=cifar", 11173962), ("resnet50:stem=cifar", 23520842)):
        p, sizes = shape(peer, spec)
        check(p == n, "%s has %d parameters, docs/models.md says %d" % (spec, p, n))
        check(sizes[0] == (1728 if "cifar" in spec else 9408), "%s: conv1 has %d parameters" % (spec, sizes[0]))
    model, images, _ = peer.build("resnet18:image=8,stem=cifar", 2)
    check(type(model.maxpool).__name__ == "Identity" and tuple(model.conv1.stride) == (1, 1),
          "resnet18:stem=cifar keeps a max pool or a strided conv1")
    check(tuple(model.layer1(model.relu(model.bn1(model.conv1(images)))).shape) == (2, 64, 8, 8),
          "resnet18:stem=cifar at image 8: layer1 is not at 8x8")
except ImportError:
    print("no torchvision: the ResNet counts are not checked")

if OTHER and os.path.isfile(OTHER):
    other = load(OTHER, "other_peer")
    for m in list(DOCUMENTED) + TINY:
        a, b = shape(peer, m), shape(other, m, peer.sync_layers)  # the same modules, cut into layers as ours
        check(a == b, "%s: %s builds %d params / %d layers, %s %d / %d" % (m, PEER, a[0], len(a[1]), OTHER, b[0], len(b[1])))
    print("compared with", OTHER)
else:
    print("no second peer file: counts checked against docs/cli.md only")

FIELDS = ("peer", "model", "algo", "k", "world", "batch", "params", "optimizer", "samples_per_s", "step_ms",
          "threads", "blas", "gemm_gflops", "openblas_coretype")
with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for i, (algo, extra) in enumerate([("ddp", []), ("localsgd", ["--k", "2"]), ("partial", ["--k", "2"]),
                                       ("partial", ["--k", "2", "--optimizer", "adamw", "--phases", ",".join(str(i % 2) for i in range(21))])]):
        model = TINY[2] if "--phases" in extra else "mlp"
        p = subprocess.run(["/usr/bin/python3", PEER, "--model", model, "--algo", algo, "--steps", "2", "--warmup",
                            "1", "--batch", "4", "--store", os.path.join(d, "s%d" % i)] + extra,
                           capture_output=True, text=True, env=env, timeout=120)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or len(lines) != 1:
            if "netlib" in p.stderr:
                print("skip: torch runs on netlib's reference BLAS here (the peer refuses it)")
                sys.exit(77)
            check(False, "%s %s: rc %d, %d JSON lines; stderr %s" % (algo, extra, p.returncode, len(lines), p.stderr[-300:]))
            continue
        j = json.loads(lines[0])
        check(all(f in j for f in FIELDS), "%s: JSON line lacks %s" % (algo, [f for f in FIELDS if f not in j]))
        check(j["algo"] == algo and j["world"] == 1 and j["threads"] == 1 and j["params"] == shape(peer, model)[0],
              "%s: JSON line %s" % (algo, j))
        check(j["gemm_gflops"] > 0 and j["step_ms"] > 0, "%s: rates %s" % (algo, j))
    # wrong number of phases: exit 2, one line
    p = subprocess.run(["/usr/bin/python3", PEER, "--model", "mlp", "--algo", "partial", "--k", "2", "--phases", "0,1",
                        "--steps", "1", "--warmup", "0", "--store", os.path.join(d, "bad")],
                       capture_output=True, text=True, env=env, timeout=120)
    check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, "bad --phases: rc %d, %r" % (p.returncode, p.stderr))
    p = subprocess.run(["/usr/bin/python3", PEER, "--model", "gpt2:heads=0", "--store", os.path.join(d, "bad2")],
                       capture_output=True, text=True, env=env, timeout=120)
    check(p.returncode == 2 and "heads=0" in p.stderr, "bad spec: rc %d, %r" % (p.returncode, p.stderr))

print("FAILED: %d" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
