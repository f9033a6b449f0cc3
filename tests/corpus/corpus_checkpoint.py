"""Bad checkpoints (core/train/checkpoint.cpp), made by editing a real one: "DDCKPT1\\n" + body + CRC32(body)."""
import os
import random
import shutil
import struct
import subprocess
import sys
import zlib

from corpus_case import Case


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints (core/train/checkpoint.cpp): "DDCKPT1\n" + body + CRC32(body), body = fingerprint string, step,
# params, buffers, optimizer state, layer steps, engine blob, sensitivity probe blob (core/common/bytes.h: u64
# length prefixes), data position (int64; absent in files of earlier versions). The source run probes at steps 0 and 4, so its last checkpoint (after step 5) holds an open probe.

CK_ARGS = ["--model", "mlp:width=64", "--data", "synthetic", "--batch", "8", "--threads", "1",
           "--sensitivity", "delays=1/3,every=4,batch=8"]
MAGIC = b"DDCKPT1\n"


def make_checkpoint(binary, tmp):
    d = os.path.join(tmp, "ck_source")
    p = subprocess.run([binary, "train"] + CK_ARGS + ["--steps", "8", "--checkpoint-every", "3", "--out", d],
                       capture_output=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        sys.exit("could not make the source checkpoint: %s" % p.stderr.decode()[-2000:])
    with open(os.path.join(d, "checkpoint.rank0.bin"), "rb") as f:
        return d, f.read()


def parse_body(body):
    """Splits a checkpoint body into its fields (offsets as written by write_checkpoint)."""
    fields, pos = [], 0

    def u64():
        nonlocal pos
        v = struct.unpack_from("<Q", body, pos)[0]
        pos += 8
        return v
    n = u64()
    fields.append(("fingerprint", body[8:8 + n]))
    pos += n
    fields.append(("step", body[pos:pos + 8]))
    pos += 8
    for name, width in [("params", 4), ("buffers", 4), ("opt_state", 4), ("layer_steps", 8)]:
        n = u64()
        fields.append((name, body[pos:pos + n * width]))
        pos += n * width
    for name in ("engine", "probe"):
        n = u64()
        fields.append((name, body[pos:pos + n]))
        pos += n
    fields.append(("data_position", body[pos:pos + 8]))  # the global sample position the next step starts at
    pos += 8
    assert pos == len(body), "checkpoint layout changed (core/train/checkpoint.cpp)"
    return fields


def parse_probe(blob):
    """The probe blob (core/train/sensitivity.cpp save_state): identity, t0, g(t0), then (delay, cosines) pairs."""
    n = struct.unpack_from("<Q", blob, 0)[0]
    ident, pos = blob[8:8 + n], 8 + n
    t0 = struct.unpack_from("<q", blob, pos)[0]
    pos += 8
    ng = struct.unpack_from("<Q", blob, pos)[0]
    ref = blob[pos + 8:pos + 8 + 4 * ng]
    pos += 8 + 4 * ng
    count = struct.unpack_from("<Q", blob, pos)[0]
    pos += 8
    measured = []
    for _ in range(count):
        d = struct.unpack_from("<i", blob, pos)[0]
        nc = struct.unpack_from("<Q", blob, pos + 4)[0]
        measured.append((d, blob[pos + 12:pos + 12 + 4 * nc]))
        pos += 12 + 4 * nc
    assert pos == len(blob), "probe state layout changed (core/train/sensitivity.cpp)"
    return ident, t0, ref, measured


def build_probe(ident, t0, ref, measured, tail=b""):
    out = struct.pack("<Q", len(ident)) + ident + struct.pack("<q", t0) + struct.pack("<Q", len(ref) // 4) + ref
    out += struct.pack("<Q", len(measured))
    for d, cos in measured:
        out += struct.pack("<i", d) + struct.pack("<Q", len(cos) // 4) + cos
    return out + tail


def build_body(fields):
    out = b""
    for name, data in fields:
        if name in ("step", "data_position"):
            out += data
        else:
            width = {"params": 4, "buffers": 4, "opt_state": 4, "layer_steps": 8}.get(name, 1)
            out += struct.pack("<Q", len(data) // width) + data
    return out


def seal(body):
    return MAGIC + body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def checkpoint_cases(binary, tmp):
    src_dir, good = make_checkpoint(binary, tmp)
    body = good[len(MAGIC):-4]
    fields = parse_body(body)
    cases = []
    rnd = random.Random(5)

    def add(name, blob, must, args=(), expect=2, is_dir=False, as_out=False):
        d = os.path.join(tmp, "ck_%d" % len(cases))
        os.makedirs(d)
        shutil.copy(os.path.join(src_dir, "metrics.h5"), d)  # the run's own file, which must stay as it was
        path = os.path.join(d, "checkpoint.rank0.bin")
        if is_dir:
            os.makedirs(path)
        elif blob is not None:
            with open(path, "wb") as f:
                f.write(blob)
        given = {x for x in args if x.startswith("--")}
        base = [x for i in range(0, len(CK_ARGS), 2) if CK_ARGS[i] not in given for x in CK_ARGS[i:i + 2]]
        argv = ["train"] + base + ["--steps", "8", "--resume", d] + list(args)
        fresh = None
        if as_out:
            fresh = os.path.join(tmp, "ck_out_%d" % len(cases))
            argv += ["--out", fresh]
        c = Case("checkpoint", name, argv, must, keep=[d], expect=expect, fresh_out=fresh)
        cases.append(c)

    # Bit flips across the file: magic, fingerprint, step, parameters, optimizer state, layer steps, CRC.
    offsets = [0, 3, 7, 8, 12, 16, 30, 60, len(MAGIC) + 8 + len(fields[0][1]) + 2]
    offsets += [int(len(good) * f) for f in (0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99)]
    offsets += [len(good) - 40, len(good) - 12, len(good) - 5, len(good) - 4, len(good) - 1]
    for off in offsets:
        b = bytearray(good)
        b[off] ^= 1 << rnd.randrange(8)
        add("bit flip at %d" % off, bytes(b), "checkpoint")
    # Truncations.
    for n in [0, 1, 7, 8, 11, 12, 20, 100, len(good) // 2, len(good) - 5, len(good) - 4, len(good) - 1]:
        add("truncated to %d bytes" % n, good[:n], "checkpoint" if n else "checkpoint")
    add("one byte appended", good + b"\x00", "checkpoint")
    add("random bytes, same size", bytes(rnd.randrange(256) for _ in range(len(good) // 64)) * 64, "checkpoint")
    add("random 1 KiB", bytes(rnd.randrange(256) for _ in range(1024)), "checkpoint")
    add("magic then random", MAGIC + bytes(rnd.randrange(256) for _ in range(4096)), "checkpoint")
    # Bodies with a valid CRC, so the field parsing itself is what must refuse them.
    add("sealed random body", seal(bytes(rnd.randrange(256) for _ in range(4096))), "checkpoint")
    add("sealed empty body", seal(b""), "checkpoint")
    add("sealed huge fingerprint length", seal(struct.pack("<Q", 2 ** 64 - 1) + body[8:]), "checkpoint")
    add("sealed huge param count", seal(build_body(fields[:2]) + struct.pack("<Q", 2 ** 62) + b"\x00" * 64),
        "checkpoint")
    add("sealed body cut after step", seal(build_body(fields[:2])), "checkpoint")
    add("sealed body cut in params", seal(build_body(fields)[:len(body) // 3]), "checkpoint")
    add("sealed trailing bytes", seal(body + b"\x00" * 8), "trailing")
    short = [(n, d[:-4] if n == "params" else d) for n, d in fields]
    add("sealed 1 param short", seal(build_body(short)), "checkpoint")
    fewer = [(n, d[:-8] if n == "layer_steps" else d) for n, d in fields]
    add("sealed layer steps of another model", seal(build_body(fewer)), "another model")
    for step in [-1, -100, 2 ** 63 - 1, 8, 1000]:
        f2 = [(n, struct.pack("<q", step) if n == "step" else d) for n, d in fields]
        add("sealed step %d" % step, seal(build_body(f2)), "step")
    # Refused once the run has started (the step is read with the rest of the file): the --out it made is removed.
    f2 = [(n, struct.pack("<q", 8) if n == "step" else d) for n, d in fields]
    add("sealed step 8, new --out", seal(build_body(f2)), "step", as_out=True)
    f2 = [(n, struct.pack("<q", -8) if n == "data_position" else d) for n, d in fields]
    add("sealed negative data position", seal(build_body(f2)), "data position")
    f2 = [(n, d.replace(b"model=mlp", b"model=cnn") if n == "fingerprint" else d) for n, d in fields]
    add("sealed fingerprint of cnn", seal(build_body(f2)), "model")
    return _checkpoint_probe_and_runs(tmp, cases, add, fields, good, src_dir)


def _checkpoint_probe_and_runs(tmp, cases, add, fields, good, src_dir):
    """checkpoint_cases, continued: the sensitivity probe's section, checkpoints of other runs, and the controls."""
    # The sensitivity probe's open probe (t0 = 4, delay 1 measured at step 5).
    ident, t0, ref, measured = parse_probe(dict(fields)["probe"])
    assert t0 == 4 and [d for d, _ in measured] == [1], (t0, measured)

    def with_probe(blob):
        return seal(build_body([(n, blob if n == "probe" else d) for n, d in fields]))
    add("sealed probe at a step that is no probe step", with_probe(build_probe(ident, 3, ref, measured)), "probe step")
    add("sealed probe with an unconfigured delay", with_probe(build_probe(ident, t0, ref, [(2, measured[0][1])])),
        "malformed")
    add("sealed probe with cosines of another model", with_probe(build_probe(ident, t0, ref, [(1, measured[0][1][:-4])])),
        "malformed")
    add("sealed probe with more delays than configured", with_probe(build_probe(ident, t0, ref, measured * 3)),
        "more delays")
    add("sealed probe with g(t0) one float short", with_probe(build_probe(ident, t0, ref[:-4], measured)), "checkpoint")
    add("sealed probe with trailing bytes", with_probe(build_probe(ident, t0, ref, measured, b"\x00" * 4)), "trailing")
    add("sealed probe cut short", with_probe(dict(fields)["probe"][:-6]), "checkpoint")
    # Controls: a checkpoint without the probe section (written before it existed) and a run probing differently
    # both resume, starting their probes afresh.
    def control(name, blob, args=()):
        d = os.path.join(tmp, "ck_control_%d" % len(cases))
        os.makedirs(d)
        with open(os.path.join(d, "checkpoint.rank0.bin"), "wb") as f:
            f.write(blob)
        shutil.copy(os.path.join(src_dir, "metrics.h5"), d)
        given = {x for x in args if x.startswith("--")}
        base = [x for i in range(0, len(CK_ARGS), 2) if CK_ARGS[i] not in given for x in CK_ARGS[i:i + 2]]
        cases.append(Case("checkpoint", "control: " + name, ["train"] + base + ["--steps", "8", "--resume", d] +
                          list(args), expect=0))
    control("checkpoint without a probe section", seal(build_body([f for f in fields if f[0] not in ("probe", "data_position")])))
    control("checkpoint without a data position", seal(build_body([f for f in fields if f[0] != "data_position"])))
    control("another probe configuration", good, ["--sensitivity", "delays=1/3,every=5,batch=8"])
    # Whole files of other runs: another model, seed, batch, policy, optimizer (the fingerprint names each).
    for what, args, must in [("model cnn", ["--model", "cnn"], "model"), ("model resnet20", ["--model", "resnet20"], "model"),
                             ("seed 5", ["--seed", "5"], "seed"), ("batch 16", ["--batch", "16"], "batch"),
                             ("policy localsgd", ["--policy", "localsgd:k=4"], "policy"),
                             ("optimizer adamw", ["--optimizer", "adamw"], "optimizer"),
                             ("data fashion-mnist", ["--data", "fashion-mnist"], "data"),
                             ("a switch", ["--switch", "2:localsgd:k=2"], "switch")]:
        add("checkpoint of another run: " + what, good, must, args=args)
    add("another model, new --out", good, "model", args=["--model", "cnn"], as_out=True)
    add("zero-length, new --out", b"", "checkpoint", as_out=True)
    add("checkpoint file missing", None, "checkpoint")
    add("checkpoint is a directory", None, "checkpoint", is_dir=True)
    # Control: the untouched copy resumes (it is the one file every mutation above starts from).
    d = os.path.join(tmp, "ck_control")
    os.makedirs(d)
    shutil.copy(os.path.join(src_dir, "checkpoint.rank0.bin"), d)
    shutil.copy(os.path.join(src_dir, "metrics.h5"), d)
    cases.append(Case("checkpoint", "control: resume the good checkpoint",
                      ["train"] + CK_ARGS + ["--steps", "8", "--resume", d], expect=0))
    return cases
