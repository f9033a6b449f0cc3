"""Bad dataset files (IDX + gzip through --data-dir: core/data/idx_file.cpp, fashion_mnist.cpp) and bad profile
JSON (core/sync/profile/profile_io.cpp, through `schedule --profile DIR` and `--policy dreamddp:profile=DIR`)."""
import gzip
import os
import random
import struct

from corpus_case import Case, QUICK


# ---------------------------------------------------------------------------------------------------------------
# IDX + gzip dataset files (core/data/idx_file.cpp, fashion_mnist.cpp) through --data-dir.

IMG, LBL = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
TIMG, TLBL = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"


def idx_bytes(dims, data, type_code=0x08, ndims=None):
    head = bytes([0, 0, type_code, len(dims) if ndims is None else ndims])
    return head + b"".join(struct.pack(">I", d) for d in dims) + data


def gz(b):
    return gzip.compress(b, mtime=0)


def small_fashion(rnd, n):
    """A tiny valid Fashion-MNIST split: n images of 28x28 and n labels in 0..9."""
    img = idx_bytes([n, 28, 28], bytes(rnd.randrange(256) for _ in range(n * 784)))
    lbl = idx_bytes([n], bytes(rnd.randrange(10) for _ in range(n)))
    return img, lbl


def idx_cases(tmp):
    rnd = random.Random(11)
    img, lbl = small_fashion(rnd, 64)
    timg, tlbl = small_fashion(rnd, 16)
    good = {IMG: gz(img), LBL: gz(lbl), TIMG: gz(timg), TLBL: gz(tlbl)}
    cases = []

    def dataset(name, replace=None, drop=(), plain=None):
        """A data dir holding the good files, with `replace` {stem: bytes} stored as stem.gz (or as `plain`
        stems without .gz), `drop` stems left out."""
        d = os.path.join(tmp, "idx_%d" % len(cases))
        os.makedirs(d)
        files = dict(good)
        files.update(replace or {})
        for stem, b in files.items():
            if stem in drop:
                continue
            fn = stem if plain and stem in plain else stem + ".gz"
            with open(os.path.join(d, fn), "wb") as f:
                f.write(b)
        return d

    def add(name, must, expect=2, **kw):
        d = dataset(name, **kw)
        out = os.path.join(tmp, "idx_out_%d" % len(cases))
        args = ["train", "--data", "fashion-mnist", "--data-dir", d, "--threads", "1", "--steps", "2", "--batch",
                "4", "--eval-samples", "8", "--out", out]
        cases.append(Case("idx", name, args, must, expect=expect, keep=[d], fresh_out=out if expect == 2 else None))

    # Wrong magic: type code, number of dimensions, leading bytes, labels where images belong.
    add("magic: float type code", IMG, replace={IMG: gz(idx_bytes([64, 28, 28], img[16:], type_code=0x0D))})
    add("magic: int type code", IMG, replace={IMG: gz(idx_bytes([64, 28, 28], img[16:], type_code=0x0C))})
    add("magic: 2 dims", IMG, replace={IMG: gz(idx_bytes([64, 784], img[16:]))})
    add("magic: 4 dims", IMG, replace={IMG: gz(idx_bytes([64, 1, 28, 28], img[16:]))})
    add("magic: leading byte", IMG, replace={IMG: gz(b"\x01" + img[1:])})
    add("magic: labels in place of images", IMG, replace={IMG: gz(lbl)})
    add("magic: images in place of labels", LBL, replace={LBL: gz(img)})
    add("magic: ascii text", IMG, replace={IMG: gz(b"this is not an IDX file\n" * 10)})
    add("magic: double gzip", IMG, replace={IMG: gz(gz(img))})
    add("magic: test labels 0 dims", TLBL, replace={TLBL: gz(bytes([0, 0, 8, 0]) + tlbl[8:])})
    # Truncated header.
    for n in [0, 1, 3, 4, 5, 8, 12, 15]:
        add("header cut at %d bytes" % n, IMG, replace={IMG: gz(img[:n])})
    add("label header cut at 6 bytes", LBL, replace={LBL: gz(lbl[:6])})
    # Dimensions: overflow, zero, not 28x28, count mismatch.
    big = 2 ** 31
    add("dims 2^31 x 2^31 x 28", IMG, replace={IMG: gz(idx_bytes([big, big, 28], b""))})
    add("dims 2^32-1 each", IMG, replace={IMG: gz(idx_bytes([2 ** 32 - 1] * 3, img[16:]))})
    add("dims 2^31 x 28 x 28 (no data)", IMG, replace={IMG: gz(idx_bytes([big, 28, 28], img[16:]))})
    add("dims 2^20 x 28 x 28, 64 images", IMG, replace={IMG: gz(idx_bytes([2 ** 20, 28, 28], img[16:]))})
    add("labels 2^32-1", LBL, replace={LBL: gz(idx_bytes([2 ** 32 - 1], lbl[8:]))})
    add("dims zero images", IMG, replace={IMG: gz(idx_bytes([0, 28, 28], b""))})
    add("dims zero width", IMG, replace={IMG: gz(idx_bytes([64, 28, 0], b""))})
    add("images 32x32", IMG, replace={IMG: gz(idx_bytes([64, 32, 32], bytes(64 * 1024)))})
    add("images 784x1", IMG, replace={IMG: gz(idx_bytes([64, 784, 1], img[16:]))})
    add("images 1x784", IMG, replace={IMG: gz(idx_bytes([64, 1, 784], img[16:]))})
    add("one byte short", IMG, replace={IMG: gz(img[:-1])})
    add("one byte long", IMG, replace={IMG: gz(img + b"\x00")})
    add("half the data", IMG, replace={IMG: gz(img[:16 + 32 * 784])})
    add("labels one short", LBL, replace={LBL: gz(lbl[:-1])})
    add("labels one long", LBL, replace={LBL: gz(lbl + b"\x01")})
    add("63 labels for 64 images", LBL, replace={LBL: gz(idx_bytes([63], lbl[8:-1]))})
    add("65 labels for 64 images", LBL, replace={LBL: gz(idx_bytes([65], lbl[8:] + b"\x01"))})
    add("test: 15 labels for 16 images", TLBL, replace={TLBL: gz(idx_bytes([15], tlbl[8:-1]))})
    return _idx_labels_gzip_files(tmp, cases, add, dataset, rnd, img, lbl, tlbl, good)


def _idx_labels_gzip_files(tmp, cases, add, dataset, rnd, img, lbl, tlbl, good):
    """idx_cases, continued: labels out of range, broken gzip, plain files, missing or odd files, and the controls."""
    # Labels outside 0..9.
    for bad, at in [(10, 0), (255, 63), (128, 17)]:
        b = bytearray(lbl)
        b[8 + at] = bad
        add("label %d at %d" % (bad, at), "label %d" % bad, replace={LBL: gz(bytes(b))})
    b = bytearray(tlbl)
    b[8 + 5] = 10
    add("test label 10", TLBL, replace={TLBL: gz(bytes(b))})
    # Broken gzip: cut at several points, corrupted deflate data and trailer, random bytes.
    zimg = good[IMG]
    for cut in [1, 2, 10, 18, len(zimg) // 3, len(zimg) // 2, len(zimg) - 8, len(zimg) - 4, len(zimg) - 1]:
        add("gzip cut at %d of %d" % (cut, len(zimg)), IMG, replace={IMG: zimg[:cut]})
    for off in [len(zimg) // 2, len(zimg) - 6, len(zimg) - 2]:
        b = bytearray(zimg)
        b[off] ^= 0x55
        add("gzip byte %d flipped" % off, IMG, replace={IMG: bytes(b)})
    add("gzip header then garbage", IMG, replace={IMG: zimg[:10] + bytes(rnd.randrange(256) for _ in range(500))})
    add("random bytes", IMG, replace={IMG: bytes(rnd.randrange(256) for _ in range(2000))})
    add("random bytes (labels)", LBL, replace={LBL: bytes(rnd.randrange(256) for _ in range(300))})
    add("zero-length images", IMG, replace={IMG: b""})
    add("zero-length test labels", TLBL, replace={TLBL: b""})
    add("gzip of nothing", IMG, replace={IMG: gz(b"")})
    # Plain (uncompressed) files: bad ones are caught just the same.
    add("plain file one byte short", IMG, replace={IMG: img[:-1]}, plain={IMG})
    add("plain file wrong magic", IMG, replace={IMG: b"\x00\x00\x09\x03" + img[4:]}, plain={IMG})
    # Missing or odd files.
    add("missing train images", IMG, drop={IMG})
    add("missing test labels", TLBL, drop={TLBL})
    d = dataset("images are a directory", drop={IMG})
    os.makedirs(os.path.join(d, IMG + ".gz"))
    out = os.path.join(tmp, "idx_out_%d" % len(cases))
    cases.append(Case("idx", "images are a directory", ["train", "--data", "fashion-mnist", "--data-dir", d] +
                      QUICK[2:] + ["--out", out], IMG, keep=[d], fresh_out=out))
    d = dataset("images are /dev/zero", drop={IMG})
    os.symlink("/dev/zero", os.path.join(d, IMG + ".gz"))
    out = os.path.join(tmp, "idx_out_%d" % len(cases))
    cases.append(Case("idx", "images link to /dev/zero", ["train", "--data", "fashion-mnist", "--data-dir", d] +
                      QUICK[2:] + ["--out", out], IMG, keep=[d], fresh_out=out))
    d = dataset("dangling link", drop={LBL})
    os.symlink(os.path.join(d, "nowhere"), os.path.join(d, LBL + ".gz"))
    out = os.path.join(tmp, "idx_out_%d" % len(cases))
    cases.append(Case("idx", "labels are a dangling link", ["train", "--data", "fashion-mnist", "--data-dir", d] +
                      QUICK[2:] + ["--out", out], LBL, keep=[d], fresh_out=out))
    for name, ddir, must in [("data dir missing", tmp + "/no_such_data", "no_such_data"),
                             ("data dir is a file", __file__, IMG), ("data dir empty", tmp + "/idx_empty", IMG)]:
        os.makedirs(tmp + "/idx_empty", exist_ok=True)
        out = os.path.join(tmp, "idx_out_%d" % len(cases))
        cases.append(Case("idx", name, ["train", "--data", "fashion-mnist", "--data-dir", ddir] + QUICK[2:] +
                          ["--out", out], must, fresh_out=out))
    # Controls: the tiny set trains, gzip or plain, and a plain file named .gz is read transparently.
    add("control: tiny gzip set", "", expect=0)
    add("control: plain files", "", expect=0, replace={IMG: img, LBL: lbl}, plain={IMG, LBL})
    add("control: plain bytes under .gz name", "", expect=0, replace={IMG: img})
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Profile JSON (core/sync/profile/profile_io.cpp) through `schedule --profile DIR` and `--policy dreamddp:profile=DIR`.

def profile_cases(tmp):
    cases = []
    good_bp = '{"fc1": 0.002, "fc2": 0.001, "fc3": 0.001, "fc4": 0.0005}'
    good_comm = '{"fc1": 0.004, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}'

    def pdir(bp, comm):
        d = os.path.join(tmp, "prof_%d" % len(cases))
        os.makedirs(d)
        for fn, body in [("bp.json", bp), ("comm.json", comm)]:
            if body is None:
                continue
            with open(os.path.join(d, fn), "wb") as f:
                f.write(body if isinstance(body, bytes) else body.encode())
        return d

    def add(name, bp, comm, must, via="schedule", expect=2):
        d = pdir(bp, comm)
        if via == "schedule":
            out = os.path.join(tmp, "prof_out_%d.json" % len(cases))
            args = ["schedule", "--profile", d, "--h", "10", "--out", out]
        else:
            out = os.path.join(tmp, "prof_out_%d" % len(cases))
            args = ["train", "--policy", "dreamddp:h=8,profile=" + d] + QUICK + ["--out", out]
        cases.append(Case("profile", name + " [%s]" % via, args, must, fresh_out=out, keep=[d], expect=expect))

    deep = 100000
    bad_bodies = [
        ("not JSON", "hello", "not valid JSON"),
        ("empty file", "", "not valid JSON"),
        ("truncated object", '{"fc1": 0.1,', "not valid JSON"),
        ("trailing comma", '{"fc1": 0.1,}', "not valid JSON"),
        ("single quotes", "{'fc1': 0.1}", "not valid JSON"),
        ("bare Infinity", '{"fc1": Infinity}', "not valid JSON"),
        ("bare inf", '{"fc1": inf}', "not valid JSON"),
        ("trailing garbage", '{"fc1": 0.1} x', "not valid JSON"),
        ("binary garbage", bytes(random.Random(3).randrange(256) for _ in range(1000)), "not valid JSON"),
        ("invalid utf-8 key", b'{"fc\xff": 0.1}', "not valid JSON"),
        ("array", "[0.1, 0.2]", "JSON object"),
        ("string", '"fc1"', "JSON object"),
        ("number", "0.5", "JSON object"),
        ("null", "null", "JSON object"),
        ("deeply nested arrays", "[" * deep + "]" * deep, "bp.json"),
        ("deeply nested value", '{"fc1": ' + "[" * deep + "]" * deep + "}", "fc1"),
        ("string value", '{"fc1": "0.1"}', "non-numeric"),
        ("bool value", '{"fc1": true}', "non-numeric"),
        ("nested object value", '{"fc1": {"t": 0.1}}', "non-numeric"),
        ("array value", '{"fc1": [0.1]}', "non-numeric"),
        ("negative time", '{"fc1": -0.1}', "fc1"),
        ("negative zero point", '{"fc1": 0.1, "fc2": -1e-300}', "fc2"),
        ("huge time", '{"fc1": 1e400}', "1e400"),
        ("huge negative", '{"fc1": -1e400}', "1e400"),
        ("newline in layer name", '{"fc\\n1": -1}', "fc"),
        ("control chars in name", '{"\\u0001\\u001b[31m": "x"}', "non-numeric"),
        ("long layer name", '{"' + "L" * 100000 + '": -1}', "invalid time"),
    ]
    for name, body, must in bad_bodies:
        add("bp " + name, body, good_comm, must)
    for name, body, must in bad_bodies[:6] + bad_bodies[10:14] + bad_bodies[16:22]:
        add("comm " + name, good_bp, body, must)
    add("missing bp.json", None, good_comm, "bp.json")
    add("missing comm.json", good_bp, None, "comm.json")
    add("both empty objects", "{}", "{}", "no layers")
    return _profile_places_and_gaps(tmp, cases, add, good_bp, good_comm)


def _profile_places_and_gaps(tmp, cases, add, good_bp, good_comm):
    """profile_cases, continued: odd profile places, bad profiles through train's policy spec, layers without a
    time, and the controls."""
    d = os.path.join(tmp, "prof_dir_bp")
    os.makedirs(os.path.join(d, "bp.json"))
    with open(os.path.join(d, "comm.json"), "w") as f:
        f.write(good_comm)
    cases.append(Case("profile", "bp.json is a directory [schedule]", ["schedule", "--profile", d, "--h", "10"],
                      "bp.json", keep=[d]))
    cases.append(Case("profile", "profile dir missing [schedule]", ["schedule", "--profile", tmp + "/nope", "--h",
                      "10"], "nope"))
    cases.append(Case("profile", "profile dir is a file [schedule]", ["schedule", "--profile", __file__, "--h",
                      "10"], "profile"))
    # Through the policy spec of train: the profile is read when the policy is made, before any work.
    for name, bp, comm, must in [("not JSON", "hello", good_comm, "not valid JSON"),
                                 ("array", "[1]", good_comm, "JSON object"),
                                 ("negative", good_bp, '{"fc1": -3}', "fc1"),
                                 ("string value", good_bp, '{"fc1": "x"}', "non-numeric"),
                                 ("missing comm.json", good_bp, None, "comm.json")]:
        add(name, bp, comm, must, via="train")
    cases.append(Case("profile", "profile dir missing [train]", ["train", "--policy", "dreamddp:h=8,profile=" + tmp +
                      "/nope"] + QUICK, "nope"))
    # A layer without a time: null, NaN (Python's "no measurement"), or named by one file only. Each would cost 0 in
    # every model built on the profile, so each is refused naming the layer.
    three = '{"fc1": 0.004, "fc2": 0.004, "fc3": 0.004}'
    for via in ("schedule", "train"):
        add("bp NaN time with NaN comm", '{"fc1": NaN, "fc2": 0.1, "fc3": 0.1, "fc4": 0.1}',
            '{"fc1": NaN, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}', '"fc1" has no time', via=via)
        add("bp NaN time, comm Infinity", '{"fc1": NaN, "fc2": 0.1, "fc3": 0.1, "fc4": 0.1}',
            '{"fc1": Infinity, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}', "not valid JSON", via=via)
        add("bp NaN time, comm negative", '{"fc1": NaN, "fc2": 0.1, "fc3": 0.1, "fc4": 0.1}',
            '{"fc1": -0.004, "fc2": 0.004, "fc3": 0.004, "fc4": 0.0001}', '"fc1"', via=via)
        # The artifact's Llama-2 profiles give NaN as the backward time of modules without parameters: read as 0 s,
        # and said in one line naming the layers.
        add("control: bp NaN time reads as 0 s", '{"fc1": 0.1, "fc2": NaN, "fc3": 0.1, "fc4": -NaN}', good_comm,
            '"fc2", "fc4" (modules without parameters): read as 0 s', via=via, expect=0)
        add("comm -NaN time", good_bp, '{"fc1": 0.2, "fc2": -NaN, "fc3": 0.1, "fc4": 0.1}', '"fc2" has no time', via=via)
        add("bp null time", '{"fc1": 0.1, "fc2": 0.1, "fc3": null, "fc4": 0.1}', good_comm, '"fc3" has no time', via=via)
        add("comm names 3 of 4 layers", good_bp, three, '"fc4"', via=via)
        add("bp names 3 of 4 layers", three, good_comm, '"fc4"', via=via)
        add("comm names another layer", good_bp, good_comm[:-1] + ', "fc5": 0.1}', '"fc5"', via=via)
        add("comm Infinity via NaN-like token", good_bp, '{"fc1": -Infinity}', "not valid JSON", via=via)
    # Controls: a good profile, and the same layers in another order in comm.json.
    add("control: good profile", good_bp, good_comm, "", expect=0)
    add("control: good profile", good_bp, good_comm, "", via="train", expect=0)
    add("control: comm.json in another order", good_bp,
        '{"fc4": 0.0001, "fc3": 0.004, "fc2": 0.004, "fc1": 0.004}', "", expect=0)
    return cases
