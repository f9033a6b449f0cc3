#!/usr/bin/env bash
# Every experiment script's front door: `--help` prints its usage on stdout and exits 0 at once; a mistyped
# option exits 2 with its last stderr line naming it (several scripts used to call a last unknown option one that
# "needs a value", two had no --help at all, demo.sh ran the whole demo ignoring its argument). A bad
# DEMO_REPEATS is refused the same way.
# Usage: usage_test.sh REPO
set -u
repo=$1
fail=0
for f in "$repo"/experiments/*.sh "$repo"/experiments/*.py; do
  name=$(basename "$f")
  run=(bash "$f")
  [[ $f == *.py ]] && run=(/usr/bin/python3 "$f")
  out=$(timeout 20 "${run[@]}" --help 2>/tmp/usage_test_err.$$); rc=$?
  if [ $rc -ne 0 ] || [ -z "$out" ]; then
    echo "FAIL: $name --help: rc $rc, $(printf '%s' "$out" | wc -l) lines of usage; stderr: $(tail -n 1 /tmp/usage_test_err.$$)"
    fail=1
  fi
  timeout 20 "${run[@]}" --bogus-option >/dev/null 2>/tmp/usage_test_err.$$; rc=$?
  last=$(grep . /tmp/usage_test_err.$$ | tail -n 1)
  if [ $rc -ne 2 ] || [[ $last != *--bogus-option* ]] || [[ $last == *"needs a value"* ]]; then
    echo "FAIL: $name --bogus-option: rc $rc, last stderr line: $last"
    fail=1
  fi
done
# The demo's settings come from the environment: a DEMO_REPEATS outside 1..9 is refused with one line, exit 2,
# before anything runs.
for v in 0 10 two; do
  DEMO_REPEATS=$v timeout 20 bash "$repo/experiments/demo.sh" >/dev/null 2>/tmp/usage_test_err.$$; rc=$?
  if [ $rc -ne 2 ] || [ "$(grep -c . /tmp/usage_test_err.$$)" -ne 1 ] ||
     ! grep -q "DEMO_REPEATS must be an integer in 1..9" /tmp/usage_test_err.$$; then
    echo "FAIL: DEMO_REPEATS=$v demo.sh: rc $rc, stderr: $(cat /tmp/usage_test_err.$$)"
    fail=1
  fi
done
rm -f /tmp/usage_test_err.$$
[ $fail -eq 0 ] && echo "every experiment script: --help exits 0, an unknown option exits 2 naming it"
exit $fail
