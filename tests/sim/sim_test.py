#!/usr/bin/python3
"""tests/sim: `dreamddp simulate` checked against closed forms, the analytic time model and the real engine.

  sim_test.py --bin PATH/dreamddp --case ring|model|sequence|bad|speed [--profiles DIR]

ring      a 2-rank ring all-reduce of S bytes over one shared link takes SimGrid's LV08 closed form (2%)
model     ddp, localsgd, plsgd, dreamddp on an artifact profile, in the time model's own assumptions (one FIFO
          channel, no latency, per-layer comm time = the profile's c_l), equal `dreamddp schedule`'s numbers (1%)
sequence  per rank, the simulated collectives (step, layers, action, group, bytes) equal the /sync_events a real
          2-rank `dreamddp launch -n 2 -- train` run launches, for several policies
bad       bad platform specs, profiles and options: exit 2 with one error line, nothing on stdout
speed     100 simulated steps of 64 ranks on the 125-layer GPT-2 profile take well under a minute
contention_step  a known overlap and contention slowdown give the known step; the run is bitwise reproducible
shared_cores     ranks computing at once share --shared-cores: known steps, the known overlap there, bad values
transforms  the averages on copies (compress=, outer=, delay=) run on sizes alone: on the GPT-2 profile they cost at
          most 2x the peak memory and 3x the CPU time of the same run without them (ratios, measured in one test)
"""
import argparse
import json
import os
import sys
import tempfile
import time

import h5py

from sim_contention_cases import case_contention, case_contention_step, case_paced, case_shared_cores
from sim_util import FAILS, check, events, run, simulate, simulate_measured, write_profile

HERE = os.path.dirname(os.path.abspath(__file__))


def case_ring(binary, tmp, _):
    S, BW, LAT = 100e6, 1e9 / 8, 100e-6  # bytes; the link of two_hosts_one_link.xml: 1 Gbit/s, 100 us
    d = os.path.join(tmp, "one")
    write_profile(d, ["w"], [0], [1], [S])
    plat = os.path.join(HERE, "two_hosts_one_link.xml")
    # LV08 (SimGrid's default): a flow's latency is 13.01 x the route's; link capacity 0.97 x bandwidth; with TCP
    # cross-traffic each flow also loads its reverse route at 0.05. A 2-rank ring is 2 steps; at each step both
    # ranks send S/2 to each other over the one shared link, so each flow gets 0.97 BW / (2 x 1.05).
    for cross, share in ((1, 2 * 1.05), (0, 2.0)):
        s = simulate(binary, ["--profile", d, "--platform", plat, "--policy", "ddp", "--steps", "1", "--anomaly",
                              "off", "--cfg", f"network/crosstraffic:{cross}"])
        closed = 2 * (13.01 * LAT + (S / 2) / (0.97 * BW / share)) * 1e3
        check(abs(s["step_ms"] - closed) <= 0.02 * closed,
              f"ring 2 ranks, {S:.0f} B, one link, crosstraffic={cross}: simulated {s['step_ms']:.3f} ms, "
              f"closed form {closed:.3f} ms")
    # The same through --cluster 2x1 (split-duplex uplinks: the two directions do not share), CM02, no latency:
    # each step sends S/2 each way at full bandwidth, so the all-reduce takes S / BW.
    s = simulate(binary, ["--profile", d, "--cluster", "2x1,intra=1000TBps,inter=1Gbps", "--policy", "ddp",
                          "--steps", "1", "--anomaly", "off", "--cfg", "network/model:CM02",
                          "--cfg", "network/crosstraffic:0"])
    closed = S / BW * 1e3
    check(abs(s["step_ms"] - closed) <= 0.02 * closed,
          f"ring 2 ranks --cluster 2x1 CM02: simulated {s['step_ms']:.3f} ms, closed form {closed:.3f} ms")


def case_model(binary, tmp, profiles):
    P = os.path.join(profiles, "gpt2_16_1gbit")
    def schedule(h, fillin):
        rc, out, err = run(binary, ["schedule", "--profile", P, "--h", str(h)] + (["--fillin"] if fillin else []))
        if rc != 0:
            raise SystemExit("schedule failed: " + err)
        return json.loads(out.strip().splitlines()[-1])
    h10, h10f, h1 = schedule(10, False), schedule(10, True), schedule(1, False)
    rc, out, err = run(binary, ["schedule", "--profile", P, "--h", "10", "--delay", "4"])
    if rc != 0:
        raise SystemExit("schedule --delay failed: " + err)
    h10d4 = json.loads(out.strip().splitlines()[-1])
    # One FIFO channel per rank, no latency, no cross-traffic, no bandwidth factor (CM02), and each layer's bytes
    # = c_l x BW over a 2-rank ring of bandwidth BW, so its all-reduce takes exactly c_l; one bucket per layer.
    common = ["--profile", P, "--cluster", "2x1,intra=1000TBps,inter=1GBps", "--comm-bw", "1GBps",
              "--cfg", "network/model:CM02", "--cfg", "network/crosstraffic:0", "--bucket-cap-mb", "0",
              "--first-bucket-mb", "0", "--anomaly", "off", "--steps", "105"]  # timed: steps 5..104, 10 periods
    expect = [("ddp", h1["dreamddp"], "model with H=1 (every layer every step, overlapped)"),
              ("localsgd:k=10", h10["localsgd"], "B + C/H"),
              ("plsgd:h=10", h10["plsgd"], "plsgd"),
              ("dreamddp:h=10,fillin=0,profile=" + P, h10["dreamddp"], "dreamddp, solver's phases"),
              ("dreamddp:h=10,profile=" + P, h10f["dreamddp"], "dreamddp with fill-in"),
              ("localsgd:k=10,delay=4", h10d4["localsgd_delay"], "Local SGD merged 4 steps after its launch")]
    for pol, want, what in expect:
        s = simulate(binary, common + ["--policy", pol])
        got = s["step_ms"] / 1e3
        check(abs(got - want) <= 0.01 * want, f"{pol.split(',profile')[0]}: simulated {got:.6f} s/iter, "
              f"modelled {want:.6f} ({what})")


# The sequence runs' mlp: the same four layers as the default one, narrow, so that 16 real runs take seconds.
MLP = "mlp:width=64"


def case_sequence(binary, tmp, _):
    steps = 12
    real_root = os.path.join(tmp, "real")
    profs = {}
    for model in (MLP, "cnn"):
        # The profile only has to name the model's layers (dreamddp reads its schedule from it, in both runs).
        probe = os.path.join(tmp, "probe_" + model)
        rc, out, err = run(binary, ["train", "--model", model, "--data", "synthetic", "--steps", "1", "--batch",
                                    "4", "--threads", "1", "--out", probe])
        if rc != 0:
            raise SystemExit("train probe failed: " + err)
        with h5py.File(os.path.join(probe, "metrics.h5"), "r") as f:
            names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["layers"]["name"]]
        profs[model] = os.path.join(tmp, model + "_profile")
        write_profile(profs[model], names, [1e-3 * (i + 1) for i in range(len(names))], [2e-3] * len(names))
    prof = profs[MLP]
    runs = [(MLP, p) for p in ["ddp", "localsgd:k=4", "plsgd:h=3", "dreamddp:h=3,profile=" + prof,
                                 "dreamddp:h=4,fillin=0,profile=" + prof]]
    # BatchNorm layers: their buffers travel with parameter averages (bytes of the bucket), not with gradients.
    runs += [("cnn", "localsgd:k=4"), ("cnn", "plsgd:h=3"), ("cnn", "dreamddp:h=3,profile=" + profs["cnn"])]
    # hier with a tier assignment that does not depend on the gradient signals (all layers fast, or none): the
    # simulation feeds constant signals; profiling steps (lock-step), the control all-reduce, the group average.
    runs += [(MLP, "hier:nodes=1x2,fast=1,intra=2,inter=4,profile_steps=3"),
             (MLP, "hier:nodes=1x2,fast=0,slow=3,profile_steps=3")]
    # delay=T: averages merged T steps later (logged at the merge, the last ones at the end of training).
    runs += [(MLP, "plsgd:h=4,delay=2"), (MLP, "dreamddp:h=4,fillin=0,delay=2,profile=" + prof),
             (MLP, "localsgd:k=4,delay=2")]
    # Transformed averages: the codec's bytes, the outer step's averages (the engine itself forms both).
    runs += [(MLP, "plsgd:h=4,compress=int8"), (MLP, "localsgd:k=4,outer=nesterov"),
             (MLP, "plsgd:h=3,compress=bf16,delay=2"), (MLP, "localsgd:k=4,compress=topk:p=1,values=int8,delay=1")]
    # Switches: into a policy at a step > 0 (the engine's one average, then the new schedule).
    runs += [(MLP, "ddp --switch 5:plsgd:h=3"), (MLP, "localsgd:k=4 --switch 6:dreamddp:h=3,profile=" + prof)]
    # The control file, read by rank 0 at step 0 and switched to once every rank has the vote.
    ctl = os.path.join(tmp, "control")
    with open(ctl, "w") as f:
        f.write("plsgd:h=3\n")
    runs += [(MLP, "ddp --control-file " + ctl)]
    for model, spec in runs:
        prof = profs[model]
        pol, *more = spec.split(" ")
        real = os.path.join(real_root, str(abs(hash(model + spec))))
        rc, out, err = run(binary, ["launch", "-n", "2", "--", "train", "--model", model, "--data", "synthetic",
                                    "--steps", str(steps), "--batch", "8", "--threads", "1", "--policy", pol,
                                    "--out", real] + more, timeout=240)
        if rc != 0:
            raise SystemExit(f"launch -n 2 train --policy {pol} failed ({rc}): {err[-2000:]}")
        want = events(os.path.join(real, "metrics.h5"), 0)
        sim = os.path.join(tmp, "sim" + str(abs(hash(model + spec))))
        simulate(binary, ["--profile", prof, "--model", model, "--cluster", "1x2", "--policy", pol, "--steps",
                          str(steps), "--events", "all", "--out", sim] + more
                 + (["--signals", "constant"] if pol.startswith("hier") else []))
        short = model + " " + spec.split(",profile")[0].replace(tmp + "/", "")
        check(len(want) > 0, f"{short}: the real run logged {len(want)} collectives")
        for r in (0, 1):
            got = events(os.path.join(sim, "metrics.h5"), r)
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
            check(got == want, f"{short}: simulated rank {r} launches the real engine's {len(want)} collectives in "
                  f"order" + ("" if got == want else f" (got {len(got)}; first difference at #{first}: "
                                                      f"{got[first] if first is not None else None} vs "
                                                      f"{want[first] if first is not None else None})"))


def case_agree(binary, tmp, profiles):
    """Ranks that measure different times still decide alike, as in a real run: with a straggler, every rank of a
    self-profiling dreamddp takes rank 0's agreed profile, so all launch the same collectives (the simulated
    control and profile all-reduces carry their data; only the arenas' do not)."""
    P = os.path.join(profiles, "gpt2_16_1gbit")
    out = os.path.join(tmp, "agree")
    simulate(binary, ["--profile", P, "--comm-bw", "1Gbps", "--cluster", "4x1,inter=1Gbps", "--slow", "2=1.7",
                      "--policy", "dreamddp:h=4", "--steps", "30", "--events", "all", "--out", out])
    per = [events(os.path.join(out, "metrics.h5"), r) for r in range(4)]
    check(len(per[0]) > 30 and all(p == per[0] for p in per[1:]),
          f"4 ranks, rank 2 1.7x slower, self-profiled dreamddp:h=4: every rank launched the same "
          f"{len(per[0])} collectives ({[len(p) for p in per]})")


def case_bad(binary, tmp, profiles):
    P = os.path.join(profiles, "gpt2_16_1gbit")
    good = ["--profile", P, "--comm-bw", "1Gbps", "--steps", "2", "--policy", "ddp"]
    nosize = os.path.join(tmp, "nosize")
    write_profile(nosize, ["a", "b"], [0.001, 0.001], [0.01, 0.01])
    partial = os.path.join(tmp, "partial")
    write_profile(partial, ["a", "b"], [0.001, 0.001], [0.01, 0.01])
    json.dump({"a": 100}, open(os.path.join(partial, "bytes.json"), "w"))
    badjson = os.path.join(tmp, "badjson")
    os.makedirs(badjson, exist_ok=True)
    open(os.path.join(badjson, "bp.json"), "w").write("{\"a\": ")
    open(os.path.join(badjson, "comm.json"), "w").write("{\"a\": 1}")
    badxml = os.path.join(tmp, "bad.xml")
    open(badxml, "w").write("<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"h\"")
    nonempty = os.path.join(tmp, "nonempty")
    os.makedirs(nonempty, exist_ok=True)
    open(os.path.join(nonempty, "x"), "w").write("x")
    cases = [
        (["--cluster", "0x4"] + good, "N"),
        (["--cluster", "4"] + good, "NxG"),
        (["--cluster", "4x"] + good, "G"),
        (["--cluster", "2x2,inter=fast"] + good, "bandwidth"),
        (["--cluster", "2x2,inter=10"] + good, "unit"),
        (["--cluster", "2x2,intra=-1Gbps"] + good, "bandwidth"),
        (["--cluster", "2x2,lat=-5us"] + good, "duration"),
        (["--cluster", "2x2,lat=5parsecs"] + good, "unit"),
        (["--cluster", "2x2,color=red"] + good, "unknown key"),
        (["--cluster", "2x2,inter"] + good, "key=value"),
        (["--cluster", "99999x99999"] + good, "N"),
        (["--cluster", "2x2", "--slow", "9=1.5"] + good, "rank 9"),
        (["--cluster", "2x2", "--slow", "1=0"] + good, "FACTOR"),
        (["--cluster", "2x2", "--slow", "x=2"] + good, "RANK"),
        (["--cluster", "2x2", "--platform", badxml] + good, "exactly one"),
        (good, "exactly one"),
        (["--platform", os.path.join(tmp, "missing.xml")] + good, "missing.xml"),
        (["--platform", badxml] + good, "bad.xml"),
        (["--cluster", "2x2", "--profile", os.path.join(tmp, "nope"), "--comm-bw", "1Gbps"], "nope"),
        (["--cluster", "2x2", "--profile", badjson, "--comm-bw", "1Gbps"], "bp.json"),
        (["--cluster", "2x2", "--profile", nosize], "sizes"),
        (["--cluster", "2x2", "--profile", partial], "'b'"),
        (["--cluster", "2x2", "--profile", nosize, "--model", "mlp"], "fc"),
        (["--cluster", "2x2", "--profile", nosize, "--model", "mlp", "--comm-bw", "1Gbps"], "only one"),
        (["--cluster", "2x2", "--policy", "threshold"] + good[:-2], "signals"),
        (["--cluster", "2x2", "--policy", "nosuch"] + good[:-2], "unknown policy"),
        (["--cluster", "2x2", "--switch", "bogus"] + good, "STEP:SPEC"),
        (["--cluster", "2x2", "--policy", "hier:nodes=3x1", "--signals", "constant"] + good[:-2], "describes 3 ranks"),
        (["--cluster", "2x2", "--cfg", "network/model:NOPE"] + good, "cfg"),
        (["--cluster", "2x2", "--cfg", "justakey"] + good, "KEY:VALUE"),
        (["--cluster", "2x2", "--steps", "0"] + good[:-4], "--steps"),
        (["--cluster", "2x2", "--collectives", "tree"] + good, "collectives"),
        (["--cluster", "2x2", "--out", nonempty] + good, "not empty"),
        (["--cluster", "2x2", "--bogus"] + good, "bogus"),
    ]
    for i, (args, must) in enumerate(cases):
        fresh = os.path.join(tmp, f"refused-{i}")  # a refused run leaves no --out behind
        if "--out" not in args:
            args = args + ["--out", fresh]
        rc, out, err = run(binary, ["simulate"] + args, timeout=60)
        check(not os.path.exists(fresh), f"simulate {' '.join(args)}: refused, and no {fresh} left behind")
        lines = [l for l in err.splitlines() if l.strip()]
        ok = rc == 2 and len(lines) == 1 and lines[0].startswith("dreamddp simulate: error:") and must in lines[0] \
            and not out.strip()
        check(ok, f"simulate {' '.join(a if len(a) < 40 else '...' + a[-30:] for a in args)}: exit {rc}, "
              f"{len(lines)} line(s): {lines[0] if lines else ''}")
    check(os.listdir(nonempty) == ["x"], "a refused --out is left as it was")


def case_speed(binary, tmp, profiles):
    P = os.path.join(profiles, "gpt2_16_1gbit")
    for pol in ("ddp", "dreamddp:h=10"):
        t0 = time.time()
        s = simulate(binary, ["--profile", P, "--bytes", os.path.join(HERE, "..", "..", "app", "sim",
                                                                      "gpt2_bytes.json"),
                              "--cluster", "64x1,inter=1Gbps", "--policy", pol, "--steps", "100"])
        dt = time.time() - t0
        check(dt < 30, f"100 steps x 64 ranks x 125 layers, {pol}: {dt:.1f} s wall ({s['flows']} flows; bound 30 s)")


def case_transforms(binary, tmp, profiles):
    # Before they ran on sizes alone, the transformed run held anchors and residuals of the parameters per rank and
    # encoded them: 46x the memory and 90x the time of the plain run at 4 ranks. CPU time, not wall time: the bound
    # does not depend on what else the machine runs.
    P = os.path.join(profiles, "gpt2_16_1gbit")
    common = ["--profile", P, "--cluster", "16x1,inter=1Gbps", "--comm-bw", "1Gbps", "--steps", "24"]
    plain, cpu0, rss0 = simulate_measured(binary, common + ["--policy", "localsgd:k=4"])
    spec = "localsgd:k=4,compress=int8,outer=nesterov,delay=2"
    moved, cpu1, rss1 = simulate_measured(binary, common + ["--policy", spec])
    check(moved["comm_bytes"] < plain["comm_bytes"] / 3,
          f"{spec} sends the int8 codec's bytes ({moved['comm_bytes']} vs {plain['comm_bytes']})")
    check(rss1 <= 2 * rss0, f"{spec}: peak RSS {rss1:.0f} MB, the plain run's {rss0:.0f} MB (bound 2x)")
    check(cpu1 <= 3 * max(cpu0, 0.2), f"{spec}: {cpu1:.2f} s CPU, the plain run's {cpu0:.2f} s (bound 3x)")


def case_own_profile(binary, tmp, _):
    """A profile written by `dreamddp profile` records its model and layer sizes: simulate needs no --model, and
    runs exactly what it runs with --model (the same layout, so the same buckets, bytes and times)."""
    d = os.path.join(tmp, "prof")
    rc, out, err = run(binary, ["profile", "--model", "mlp", "--batch", "16", "--steps", "3", "--threads", "1",
                                "--out", d])
    if rc != 0:
        raise SystemExit("profile failed: " + err)
    meta = json.load(open(os.path.join(d, "meta.json")))
    sizes = json.load(open(os.path.join(d, "bytes.json")))
    check(meta.get("model") == "mlp" and meta.get("batch") == 16, f"meta.json names the model and batch: {meta}")
    names = list(json.load(open(os.path.join(d, "bp.json"))))
    check(list(sizes) == names, f"bytes.json names bp.json's layers in order: {list(sizes)} vs {names}")
    check(sizes.get("fc1") == 4 * (784 * 1024 + 1024), f"fc1's bytes: {sizes.get('fc1')}")
    common = ["--profile", d, "--cluster", "2x1,inter=1Gbps", "--policy", "plsgd:h=4", "--steps", "8"]
    a, b = simulate(binary, common), simulate(binary, common + ["--model", "mlp"])
    check(a["step_ms"] == b["step_ms"] and a["comm_bytes"] == b["comm_bytes"] and a["comm_bytes"] > 0,
          f"simulate from the profile alone equals --model mlp: {a['step_ms']} vs {b['step_ms']} ms, "
          f"{a['comm_bytes']} vs {b['comm_bytes']} B")
    # The profile times the rest of a step too (step.json): simulate adds it unless told otherwise, and a step of
    # one rank is then forward + backward + update.
    step = json.load(open(os.path.join(d, "step.json")))
    check(step["forward_s"] > 0 and step["update_s"] > 0, f"step.json times the forward and the update: {step}")
    bp_ms = 1e3 * sum(json.load(open(os.path.join(d, "bp.json"))).values())
    one = ["--profile", d, "--cluster", "1x1", "--policy", "ddp", "--steps", "6"]
    want = 1e3 * (step["forward_s"] + step["update_s"]) + bp_ms
    got = simulate(binary, one)
    check(abs(got["step_ms"] - want) <= 1e-6 * want + 1e-6 and got["forward_ms"] == 1e3 * step["forward_s"],
          f"one simulated rank's step is the profile's forward + backward + update: {got['step_ms']} vs {want} ms")
    none = simulate(binary, one + ["--forward-ms", "0", "--update-ms", "0"])
    check(abs(none["step_ms"] - bp_ms) <= 1e-6 * bp_ms + 1e-6,
          f"--forward-ms 0 --update-ms 0 leave the backward alone: {none['step_ms']} vs {bp_ms} ms")
    with open(os.path.join(d, "meta.json"), "w") as f:
        f.write("[1, 2]")
    rc, _, err = run(binary, ["simulate"] + common)
    check(rc == 2 and "meta.json" in err and len(err.strip().splitlines()) == 1,
          f"a broken meta.json: exit {rc}, {err.strip()}")


CASES = {"ring": case_ring, "model": case_model, "sequence": case_sequence, "agree": case_agree, "bad": case_bad,
         "speed": case_speed, "transforms": case_transforms, "own_profile": case_own_profile, "paced": case_paced,
         "contention": case_contention, "contention_step": case_contention_step,
         "shared_cores": case_shared_cores}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--case", required=True, choices=list(CASES))
    ap.add_argument("--profiles", default=os.environ.get("DREAMDDP_PROFILES", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "dreamddp-profiles")))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dd_sim_test_") as tmp:
        CASES[a.case](a.bin, tmp, a.profiles)
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
