"""judge_peer accepts a peer whose GEMM rate is near ours and refuses, each with its reason, one that did not run, did
not report a rate, runs on netlib, is far slower than ours (in the run and alone) or far faster in the run (more
cores than it was given). Usage: judge_peer_test.py EXPERIMENTS_LIB_DIR"""
import sys

sys.path.insert(0, sys.argv[1])
import peer_rules  # noqa: E402

ours = 92.0
peer = lambda g, blas="libopenblasp-r0.3.21.so": {"gemm_gflops": g, "blas": blas, "threads": 1}
cases = [
    # (peer, standalone rate, expected ok, a word the note must hold)
    (peer(93.5), None, True, "1.02x"),
    (peer(ours * peer_rules.PEER_MIN_GEMM_FRACTION + 0.1), None, True, "vs ours"),
    (peer(ours * peer_rules.PEER_MAX_GEMM_FRACTION - 0.1), None, True, "vs ours"),
    (None, None, False, "did not run"),
    ({"blas": "libopenblas"}, None, False, "did not report"),
    (peer(90.0, "libblas.so.3 (netlib)"), None, False, "netlib"),
    (peer(40.0), None, False, "below"),
    (peer(40.0), 30.0, False, "below"),
    # slow inside an oversubscribed run, at its best alone: judged by the standalone rate
    (peer(40.0), 90.0, True, "standalone"),
    # OpenBLAS on both cores against our one thread (OPENBLAS_NUM_THREADS unset): 172.6 vs 92.0
    (peer(172.6), None, False, "more cores"),
    (peer(172.6), 92.0, False, "more cores"),
    # our rate measured beside other load (43.9, half its quiet value) while the peer's run found a quiet moment:
    # its own one-thread rate alone (67.4) is the ceiling's reference, so 80 in the run is still one core
    (peer(80.0), 67.4, True, "vs ours", 43.9),
    (peer(172.6), 67.4, False, "its own rate alone", 43.9),
]
failed = 0
for case in cases:
    p, alone, want, word = case[:4]
    ok, note = peer_rules.judge_peer(p, case[4] if len(case) > 4 else ours, alone)
    if ok != want or word not in note:
        print("FAIL: peer %s alone %s -> (%s, %r), want (%s, ...%r...)" % (p, alone, ok, note, want, word))
        failed += 1
print("%d of %d cases as expected" % (len(cases) - failed, len(cases)))
sys.exit(1 if failed else 0)
