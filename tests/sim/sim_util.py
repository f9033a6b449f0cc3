"""Helpers of tests/sim/sim_test.py: the failed checks, running the binary and reading what a simulation wrote."""
import json
import os
import subprocess
import tempfile

import h5py


FAILS = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILS.append(what)


def run(binary, args, timeout=300):
    p = subprocess.run([binary] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def simulate(binary, args):
    rc, out, err = run(binary, ["simulate"] + args)
    if rc != 0:
        raise SystemExit(f"simulate {' '.join(args)} failed ({rc}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1])


def write_profile(d, names, bp, comm, sizes=None):
    os.makedirs(d, exist_ok=True)
    json.dump(dict(zip(names, bp)), open(os.path.join(d, "bp.json"), "w"))
    json.dump(dict(zip(names, comm)), open(os.path.join(d, "comm.json"), "w"))
    if sizes is not None:
        json.dump(dict(zip(names, sizes)), open(os.path.join(d, "bytes.json"), "w"))


def events(path, rank=None):
    with h5py.File(path, "r") as f:
        e = f["sync_events"][:]
    if rank is not None:
        e = e[e["rank"] == rank]
    return [(int(r["step"]), int(r["first_layer"]), int(r["last_layer"]), int(r["action"]), int(r["group"]),
             int(r["bytes"])) for r in e]


def simulate_measured(binary, args):
    """Runs simulate; returns (summary, CPU seconds of the process, peak RSS in MB) from the process's own rusage."""
    with open(os.devnull, "w") as null, tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen([binary, "simulate"] + args, stdout=out, stderr=null)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if p.returncode != 0:
        raise SystemExit(f"simulate {' '.join(args)} failed ({p.returncode})")
    return json.loads(text.strip().splitlines()[-1]), ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0
