#!/usr/bin/python3
"""Bad-input corpus for dreamddp: generates hand-made bad CLI options, INI files, IDX datasets, profile JSON,
checkpoints and policy specs at test time, runs the binary on each and checks the rejection contract.

Every bad input must: exit 2 (no signal, no hang: within --bound seconds), print exactly one
'dreamddp CMD: error: ...' line naming the problem and nothing else on stderr but the start-up banner, print no
summary, and leave the --out / --resume directory as it was (no new directory where the error is one of usage).
A few valid "control" inputs per reader must succeed, so a reader that rejects everything cannot pass.

usage: bad_inputs.py --bin PATH/dreamddp [--reader cli|ini|idx|profile|checkpoint|policy|all] [--jobs N]
"""
import argparse
import concurrent.futures as cf
import os
import shutil
import sys
import tempfile
import time

from corpus_case import known_bug, run_case
from corpus_checkpoint import checkpoint_cases
from corpus_cli import cli_cases, ini_cases, policy_cases
from corpus_files import idx_cases, profile_cases


READERS = ["cli", "ini", "idx", "profile", "checkpoint", "policy"]
CASES = {"cli": cli_cases, "ini": ini_cases, "idx": idx_cases, "profile": profile_cases, "policy": policy_cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--reader", default="all", choices=READERS + ["all"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--bound", type=int, default=20, help="seconds a rejection may take")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    readers = READERS if a.reader == "all" else [a.reader]
    tmp = tempfile.mkdtemp(prefix="dreamddp-corpus-")
    try:
        cases = []
        for r in readers:
            sub = os.path.join(tmp, r)
            os.makedirs(sub)
            cases += checkpoint_cases(binary, sub) if r == "checkpoint" else CASES[r](sub)
        t0 = time.time()
        with cf.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            results = list(pool.map(lambda c: run_case(binary, c, a.bound), cases))
        bad = [(c, r) for c, r in zip(cases, results) if c.expect == 2]
        ctl = [(c, r) for c, r in zip(cases, results) if c.expect != 2]
        failures, xfail = [], []
        for c, (ok, crashed, problems, secs, rc, err) in zip(cases, results):
            why = known_bug(c)
            tag = "ok  " if ok and not why else "XPASS" if ok else "XFAIL" if why else "FAIL"
            if tag in ("FAIL", "XPASS"):
                failures.append(c)
            if tag == "XFAIL":
                xfail.append(c)
            if tag != "ok  " or a.verbose:
                print("%-5s %-10s %-48s %5.2fs rc=%s  %s" % (tag, c.reader, c.name[:48], secs, rc,
                                                            "; ".join(problems) or ("known bug fixed: remove it "
                                                            "from KNOWN" if why else "")))
                if why and not ok:
                    print("        known bug: %s" % why)
                if tag == "FAIL":
                    last = [l for l in err.split("\n") if l.strip()][-3:]
                    for l in last:
                        print("        stderr: %s" % l[:300])
        per = {}
        for c, r in bad:
            n, k = per.get(c.reader, (0, 0))
            per[c.reader] = (n + 1, k + (1 if r[0] else 0))
        print("per reader (clean rejections / bad inputs): " +
              ", ".join("%s %d/%d" % (k, v[1], v[0]) for k, v in per.items()))
        rejected = sum(1 for c, r in bad if r[4] == 2)
        clean = sum(1 for c, r in bad if r[0])
        crashes = sum(1 for c, r in zip(cases, results) if r[1])
        slowest = max(r[3] for r in results)
        print("%d inputs tried, %d rejected with exit 2 (%d cleanly: one error line, nothing written), %d crashes, "
              "%d known bugs (XFAIL), %d failures; %d/%d controls accepted; slowest %.1fs; %.1fs in all" %
              (len(bad), rejected, clean, crashes, len(xfail), len(failures), sum(1 for c, r in ctl if r[0]),
               len(ctl), slowest, time.time() - t0))
        return 1 if failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
