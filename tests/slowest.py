#!/usr/bin/python3
"""Prints the N slowest tests of a ctest run from its JUnit file (ctest --output-junit FILE), so that drift in the
suite's time shows at the end of every run. usage: slowest.py JUNIT.xml [N]"""
import sys
import xml.etree.ElementTree as ET


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 10
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print("slowest tests: no JUnit file to read (%s)" % e)
        return 0
    rows = []
    for tc in root.iter("testcase"):
        status = tc.get("status") or ("failed" if tc.find("failure") is not None else
                                      "skipped" if tc.find("skipped") is not None else "run")
        rows.append((float(tc.get("time") or 0), tc.get("name"), status))
    rows.sort(reverse=True)
    total = sum(t for t, _, _ in rows)
    print("slowest %d of %d tests (%.0f s of test time in all):" % (min(n, len(rows)), len(rows), total))
    for t, name, status in rows[:n]:
        print("  %7.1f s  %s%s" % (t, name, "" if status in ("run", "passed") else "  (%s)" % status))
    return 0


if __name__ == "__main__":
    sys.exit(main())
