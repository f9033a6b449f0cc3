"""tests/sim/sim_test.py's cases of a shared machine: paced ranks, contention between compute and communication,
and the step a known contention gives."""
import json
import os

import h5py

from sim_util import check, run, simulate, write_profile


def case_paced(binary, tmp, _):
    """A profile of 2 ranks is paced to the slower one: every sync waits for it. The agreed forward, backward and
    update add up to the slowest rank's median pass, which the profile prints with every rank's. Where the ranks
    outnumber the cores, meta.json says the passes were timed one rank at a time, and simulate names the
    --shared-cores that shares them again."""
    d = os.path.join(tmp, "prof2r")
    rc, out, err = run(binary, ["launch", "-n", "2", "--", "profile", "--model", "mlp", "--batch", "16", "--steps",
                                "5", "--threads", "1", "--out", d])
    if rc != 0:
        raise SystemExit("2-rank profile failed: " + err)
    line = [x for x in out.splitlines() if x.startswith("each rank's median pass (ms): ")]
    check(len(line) == 1, f"one line with each rank's pass: {out}")
    if not line:
        return
    passes = [float(x) for x in line[0].split(": ", 1)[1].split(";")[0].split(", ")]
    step = json.load(open(os.path.join(d, "step.json")))
    total = 1e3 * (step["forward_s"] + step["update_s"] + sum(json.load(open(os.path.join(d, "bp.json"))).values()))
    # Printed to a microsecond; stored as the floats the ranks agreed on (relative 1e-6 per part).
    check(len(passes) == 2 and abs(total - max(passes)) <= 1e-3 + 1e-5 * total,
          f"forward + backward + update = the slowest rank's pass: {total:.4f} ms vs {passes}")
    # meta.json says how the ranks shared the cores; where they outnumber them, passes are timed one at a time.
    cores = len(os.sched_getaffinity(0))
    for ranks in (2, 4):
        dn = os.path.join(tmp, f"prof_share{ranks}")
        rc, out, err = run(binary, ["launch", "-n", str(ranks), "--", "profile", "--model", "mlp", "--batch", "8",
                                    "--steps", "3", "--threads", "1", "--out", dn])
        if rc != 0:
            raise SystemExit(f"{ranks}-rank profile failed: " + err)
        machine = json.load(open(os.path.join(dn, "meta.json"))).get("machine", {})
        crowded = ranks > cores
        want = "one rank at a time" if crowded else "every rank at once"
        check(machine.get("passes") == want and machine.get("ranks") == ranks and machine.get("cores") == cores,
              f"{ranks} ranks on {cores} cores: meta.json machine {machine}, passes should be {want!r}")
        check(("--shared-cores %d,threads=1" % cores in out) == crowded,
              f"{ranks} ranks on {cores} cores: the line naming --shared-cores printed only when crowded: {out}")
        # simulate from it: a note names --shared-cores when it is not given, none when it is.
        sim = ["simulate", "--profile", dn, "--cluster", f"{ranks}x1", "--steps", "2"]
        rc1, _, err1 = run(binary, sim)
        rc2, _, err2 = run(binary, sim + ["--shared-cores", f"{cores},threads=1"])
        check(rc1 == 0 and rc2 == 0 and ("--shared-cores %d,threads=1" % cores in err1) == crowded
              and "--shared-cores" not in err2,
              f"{ranks} ranks on {cores} cores: simulate's note on --shared-cores: {err1!r} / {err2!r}")


def case_contention(binary, tmp, _):
    """A profile's contention, both sides. Compute runs slower only while the rank's bulk collectives are in
    flight: the per-step control vote (a few floats, still running when a long forward starts) slows none of it.
    A transfer runs slower for the part of it that overlaps the rank's compute."""
    d = os.path.join(tmp, "prof")
    write_profile(d, ["a", "b"], [1e-3, 1e-3], [1e-4, 1e-4], [4096, 4096])
    common = ["--profile", d, "--cluster", "2x1,inter=1Gbps,lat=100us", "--cfg", "network/model:CM02",
              "--policy", "localsgd:k=1000", "--steps", "30", "--forward-ms", "50", "--update-ms", "1"]
    alone = simulate(binary, common)
    with open(os.path.join(d, "overlap.json"), "w") as f:
        json.dump({"compute_slowdown": 1.0, "comm_slowdown": 0.0}, f)
    slowed = simulate(binary, common)
    # The vote's ring is 2 transfers of a few bytes over routes of 100 us latency (CM02: no latency factor), a
    # few hundred microseconds: were it charged, it would add at most half that per step; slowing the whole
    # forward would add 50 ms.
    check(alone["step_ms"] >= 52.99 and slowed["step_ms"] - alone["step_ms"] <= 1.0,
          f"contention x2 while only a vote is in flight costs nothing worth a millisecond: {slowed['step_ms']:.3f} "
          f"vs {alone['step_ms']:.3f} ms/step")

    # The communication side: a bucket whose rounds all overlap the rank's compute takes 1 + comm_slowdown times
    # as long. ddp, one bucket per layer: "b" (backward first, 10 ms of link time) is all-reduced while "a"'s
    # 100 ms backward runs.
    d2 = os.path.join(tmp, "prof2")
    write_profile(d2, ["a", "b"], [0.1, 1e-3], [1e-6, 0.01])
    def b_bucket_ms(comm_slowdown):
        with open(os.path.join(d2, "overlap.json"), "w") as f:
            json.dump({"compute_slowdown": 0.0, "comm_slowdown": comm_slowdown}, f)
        out = os.path.join(tmp, f"b{comm_slowdown}")
        simulate(binary, ["--profile", d2, "--comm-bw", "1Gbps", "--cluster", "2x1,inter=1Gbps",
                          "--cfg", "network/model:CM02", "--policy", "ddp", "--steps", "4", "--bucket-cap-mb", "0",
                          "--out", out])
        with h5py.File(os.path.join(out, "metrics.h5"), "r") as f:
            e = f["sync_events"][:]
        e = e[(e["first_layer"] == 1) & (e["step"] == 2)]
        return float((e["end_s"] - e["launch_s"]).max()) * 1e3
    plain, slowed = b_bucket_ms(0.0), b_bucket_ms(1.0)
    check(plain >= 10 and abs(slowed / plain - 2.0) <= 0.02,
          f"comm_slowdown 1 doubles an all-reduce that overlaps compute throughout: {slowed:.3f} vs {plain:.3f} ms")


def _known_overlap_args(d, ranks, k, m):
    """The set-up of case_contention_step on `ranks` ranks: profile `d` with overlap.json (k, m), or none when
    both are 0, and simulate's arguments."""
    ov = os.path.join(d, "overlap.json")
    if os.path.exists(ov):
        os.remove(ov)
    if k or m:
        with open(ov, "w") as f:
            json.dump({"compute_slowdown": k, "comm_slowdown": m}, f)
    return ["--profile", d, "--comm-bw", "1Gbps", "--cluster", f"{ranks}x1,intra=1000TBps,inter=1Gbps",
            "--cfg", "network/model:CM02", "--cfg", "network/crosstraffic:0", "--policy", "ddp", "--steps", "6",
            "--bucket-cap-mb", "0", "--first-bucket-mb", "0", "--anomaly", "off", "--forward-ms", "10",
            "--update-ms", "5"]


def case_contention_step(binary, tmp, _):
    """A known overlap and slowdown give the known simulated step, and the simulation is bitwise reproducible.
    ddp on 2 ranks, one bucket per layer, CM02 without latency: layer "b" (backward first, 10 ms) is all-reduced
    in T = 20 ms of link time (2.5 MB over 1 Gbit/s split-duplex uplinks: S / BW) while layer "a"'s 100 ms backward
    runs. With compute x(1 + k) while the all-reduce is in flight, "a" does T / (1 + k) of its work in the overlap,
    so the step is T k / (1 + k) longer; with transfers also x(1 + m) while the rank computes, the all-reduce takes
    T (1 + m) and the step is T (1 + m) k / (1 + k) longer."""
    d = os.path.join(tmp, "prof")
    write_profile(d, ["a", "b"], [0.1, 0.01], [1e-6, 0.02])
    T = 20.0  # ms
    def step_ms(k, m, out=None):
        return simulate(binary, _known_overlap_args(d, 2, k, m) + (["--out", out] if out else []))["step_ms"]

    plain = step_ms(0.0, 0.0)
    # forward 10 + backward 10 + 100 + update 5, "a"'s all-reduce of 4 bytes ~0, b's hidden behind "a"
    check(abs(plain - 125.0) <= 0.05, f"no contention: the step is 125 ms: {plain:.4f}")
    for k, m in ((1.0, 0.0), (0.5, 0.0), (1.0, 1.0), (0.25, 0.5)):
        want = plain + T * (1 + m) * k / (1 + k)
        got = step_ms(k, m)
        check(abs(got - want) <= 0.01,
              f"compute x{1 + k}, comm x{1 + m} over a {T:.0f} ms overlap: step {got:.4f} ms, known {want:.4f} ms")

    # Bitwise reproducible: the same run twice gives the same summary and the same event tables, to the bit.
    outs = [os.path.join(tmp, f"rep{i}") for i in (1, 2)]
    a, b = (step_ms(0.25, 0.5, o) for o in outs)
    check(a == b, f"the same contended run twice: {a!r} and {b!r} ms/step")
    tables = []
    for o in outs:
        with h5py.File(os.path.join(o, "metrics.h5"), "r") as f:
            tables.append({k: f[k][:].tobytes() for k in ("steps", "sync_events", "layer_ready") if k in f})
    check(tables[0].keys() == tables[1].keys() and "sync_events" in tables[0]
          and all(tables[0][k] == tables[1][k] for k in tables[0]),
          f"the same contended run twice: {sorted(tables[0])} identical to the bit")


def case_shared_cores(binary, tmp, _):
    """--shared-cores: ranks computing at once share one machine's cores. Two ranks of a 125 ms step (forward 10,
    backward 10 + 100, update 5, almost nothing to send) on one core take 250 ms, on two cores 125 ms; one rank of
    two threads alone on two cores takes 125 ms, two such ranks 250 ms. On two cores the known overlap of
    case_contention_step gives its known step, so the slowed compute ends when the collective does. Bad values get
    one line and exit 2."""
    d = os.path.join(tmp, "prof")
    write_profile(d, ["a", "b"], [0.1, 0.01], [1e-6, 0.02])
    T = 20.0  # ms: layer b's all-reduce, hidden behind a's backward (see case_contention_step)

    def step_ms(ranks, cores, k=0.0, m=0.0, out=None):
        args = _known_overlap_args(d, ranks, k, m) + ["--shared-cores", cores]
        return simulate(binary, args + (["--out", out] if out else []))["step_ms"]

    for ranks, cores, want in ((2, "1", 250.0), (2, "2", 125.0), (1, "2,threads=2", 125.0),
                               (2, "2,threads=2", 250.0), (4, "2", 250.0)):
        got = step_ms(ranks, cores)
        check(abs(got - want) <= 0.05, f"{ranks} rank(s) on --shared-cores {cores}: step {got:.4f} ms, known {want}")
    for k, m in ((1.0, 0.0), (0.25, 0.5)):
        want = 125.0 + T * (1 + m) * k / (1 + k)
        got = step_ms(2, "2", k, m)
        check(abs(got - want) <= 0.01,
              f"on two shared cores, compute x{1 + k}, comm x{1 + m} over a {T:.0f} ms overlap: step {got:.4f} ms, "
              f"known {want:.4f} ms")
    outs = [os.path.join(tmp, f"rep{i}") for i in (1, 2)]
    a, b = (step_ms(4, "2", 0.25, 0.5, o) for o in outs)
    check(a == b, f"the same shared-core run twice: {a!r} and {b!r} ms/step")

    base = ["simulate", "--profile", d, "--steps", "2"]
    for extra, says in ((["--cluster", "2x1", "--shared-cores", "0"], "--shared-cores 0"),
                        (["--cluster", "2x1", "--shared-cores", "2,threads=3"], "outnumber"),
                        (["--cluster", "2x1", "--shared-cores", "2,thread=1"], "CORES,threads=T"),
                        (["--platform", os.path.join(os.path.dirname(__file__), "two_hosts_one_link.xml"),
                          "--shared-cores", "2"], "goes with --cluster")):
        rc, out, err = run(binary, base + extra)
        lines = err.strip().splitlines()
        check(rc == 2 and len(lines) == 1 and says in err, f"{extra}: exit 2 and one line naming it: {rc} {err!r}")
