#!/usr/bin/python3
"""Checks a metrics.h5 against the schema of analysis/README.md with h5py (what analysis users will see).

  check_schema.py schema FILE steps=N sync_events=N ...   exact names, dtypes and row counts
  check_schema.py prefix FILE N                            /steps is exactly steps 0..N-1 (after a crash)
  check_schema.py resumed FILE N S                         a file resumed after step S: every table's schema,
                                                           /steps exactly 0..N-1, one resume event, probes ok
"""
import sys

import h5py
import numpy as np

I8, I4, F8 = np.dtype("<i8"), np.dtype("<i4"), np.dtype("<f8")
TABLES = {
    "steps": [("step", I8), ("wall_time_s", F8), ("loss", F8), ("lr", F8), ("forward_ms", F8),
              ("backward_ms", F8), ("update_ms", F8), ("exposed_comm_ms", F8), ("bytes_sent", I8),
              ("samples_per_s", F8)],
    "sync_events": [("step", I8), ("first_layer", I4), ("last_layer", I4), ("action", "enum"), ("group", I4),
                    ("rank", I4), ("bytes", I8), ("launch_s", F8), ("end_s", F8)],
    "eval": [("step", I8), ("test_loss", F8), ("test_accuracy", F8), ("perplexity", F8)],
    "layer_ready": [("step", I8), ("rank", I4), ("layer", I4), ("ready_s", F8)],
    "events": [("step", I8), ("kind", "str"), ("detail", "str")],
    "layers": [("index", I4), ("name", "str"), ("kind", "str"), ("params", I8), ("bytes", I8)],
}
ACTIONS = {"none": 0, "average_params": 1, "allreduce_grads": 2, "control": 3, "broadcast": 4}


def fail(msg):
    print("schema check FAILED:", msg, file=sys.stderr)
    sys.exit(1)


def check_columns(f, name, spec):
    ds = f[name]
    if ds.ndim != 1 or ds.dtype.names is None:
        fail(f"/{name} is not a 1-D compound table")
    if list(ds.dtype.names) != [c for c, _ in spec]:
        fail(f"/{name} columns {ds.dtype.names} != {[c for c, _ in spec]}")
    for col, want in spec:
        got = ds.dtype[col]
        if want == "enum":
            if h5py.check_enum_dtype(got) != ACTIONS or got.base != np.dtype("i1"):
                fail(f"/{name}.{col} enum {h5py.check_enum_dtype(got)} dtype {got}")
        elif want == "str":
            if h5py.check_string_dtype(got) is None or h5py.check_string_dtype(got).encoding != "utf-8":
                fail(f"/{name}.{col} is {got}, want utf-8 variable-length string")
        elif got != want:
            fail(f"/{name}.{col} dtype {got} != {want}")


def schema(path, counts):
    with h5py.File(path, "r") as f:
        for name, spec in TABLES.items():
            check_columns(f, name, spec)
            if name in counts and f[name].shape[0] != counts[name]:
                fail(f"/{name} has {f[name].shape[0]} rows, want {counts[name]}")
        for key in ("policy", "world", "telemetry_schema_version"):
            if key not in f.attrs:
                fail(f"root attribute {key} missing")
        if not isinstance(f.attrs["policy"], str) or int(f.attrs["world"]) != 4:
            fail(f"root attributes policy={f.attrs['policy']!r} world={f.attrs['world']!r}")
        steps = f["steps"][:]
        if not np.array_equal(steps["step"], np.arange(len(steps))):
            fail("/steps.step is not 0..N-1")
        names = [n.decode() for n in f["layers"]["name"]]
        if names[:2] != ["fc0", "fc1"]:
            fail(f"/layers names {names}")
        for sfx, key in (("", "probes"), ("_minibatch", "probes_minibatch")):
            cos = f["sensitivity/cosine" + sfx]
            delays = f["sensitivity/delays" + sfx][:]
            probes = f["sensitivity/probe_steps" + sfx][:]
            if cos.dtype != np.dtype("<f4") or cos.ndim != 3:
                fail(f"cosine{sfx} dtype {cos.dtype} ndim {cos.ndim}")
            if cos.shape != (counts.get(key, cos.shape[0]), len(f["layers"]), len(delays)):
                fail(f"cosine{sfx} shape {cos.shape}")
            if probes.dtype != I8 or delays.dtype != I4 or len(probes) != cos.shape[0]:
                fail(f"probe_steps{sfx}/delays{sfx} dtypes {probes.dtype}/{delays.dtype}")
            if cos.attrs["dims"] != "probe,layer,delay":
                fail("cosine dims attribute")


def prefix(path, n):
    with h5py.File(path, "r") as f:
        check_columns(f, "steps", TABLES["steps"])
        steps = f["steps"]["step"]
        if len(steps) != n or not np.array_equal(steps, np.arange(n)):
            fail(f"/steps holds {len(steps)} rows, want the gap-free prefix 0..{n - 1}")


def resumed(path, n, s):
    with h5py.File(path, "r") as f:
        for name, spec in TABLES.items():
            check_columns(f, name, spec)
        steps = f["steps"]["step"]
        if not np.array_equal(steps, np.arange(n)):
            fail(f"/steps.step is {list(steps)}, want 0..{n - 1} without duplicates")
        for name in ("sync_events", "eval", "layer_ready"):
            col = f[name]["step"]
            if len(col) and (col.max() >= n or np.any(np.diff(col) < 0)):
                fail(f"/{name}.step not sorted within 0..{n - 1}: {list(col)}")
        events = f["events"][:]
        resumes = [(int(e["step"]), e["detail"].decode()) for e in events if e["kind"].decode() == "resume"]
        if resumes != [(s, f"after step {s}")]:
            fail(f"resume events {resumes}")
        if "policy" not in f.attrs or "telemetry_schema_version" not in f.attrs:
            fail("root attributes lost")
        for sfx in ("", "_minibatch"):
            if "sensitivity/cosine" + sfx not in f:
                continue
            probes = f["sensitivity/probe_steps" + sfx][:]
            delays = f["sensitivity/delays" + sfx][:]
            cos = f["sensitivity/cosine" + sfx]
            if len(set(probes.tolist())) != len(probes) or cos.shape[0] != len(probes):
                fail(f"probe_steps{sfx} {list(probes)} vs cosine rows {cos.shape[0]}")
            # Imported probes must have been complete at the checkpoint; later ones belong to the resumed run.
            for t0 in probes:
                if t0 <= s < t0 + delays.max():
                    fail(f"probe t0={t0}{sfx} was incomplete at step {s} and should have been dropped")


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "schema":
        schema(path, {k: int(v) for k, v in (a.split("=") for a in sys.argv[3:])})
    elif mode == "prefix":
        prefix(path, int(sys.argv[3]))
    elif mode == "resumed":
        resumed(path, int(sys.argv[3]), int(sys.argv[4]))
    else:
        fail("unknown mode " + mode)
    print("schema check ok:", path)
