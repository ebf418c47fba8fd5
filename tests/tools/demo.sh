#!/bin/sh
# `cugraft demo`: the bundled workload gives bitwise-equal checksums eagerly and under cugraft
# (against the CPU fake driver when there is no GPU). Skipped (77) while the workload, the
# library or the fake driver is not built.
# usage: demo.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1
out=$("$CG" demo --iters 3); rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || { echo "FAIL: demo exited $rc"; exit 1; }
printf '%s\n' "$out" | grep -q "results    bitwise equal" || { echo "FAIL: no equality line"; exit 1; }
# A bad --iters is refused with exit 2 and a message naming the flag, before anything runs.
for bad in 0 -1 abc 99999999999999999999; do
  err=$("$CG" demo --iters "$bad" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || { echo "FAIL: demo --iters $bad exited $rc: $err"; exit 1; }
  printf '%s\n' "$err" | grep -q "^cugraft demo: --iters $bad: want an integer" ||
    { echo "FAIL: demo --iters $bad said: $err"; exit 1; }
done
# --report never overwrites a file that is not a cugraft report; it does replace an old report.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "my notes" > "$tmp/keep.txt"
"$CG" demo --iters 3 --report "$tmp/keep.txt" > "$tmp/out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && [ "$(cat "$tmp/keep.txt")" = "my notes" ] ||
  { echo "FAIL: demo --report over a file of the user's: exit $rc, file now: $(head -c 80 "$tmp/keep.txt")"; exit 1; }
"$CG" demo --iters 3 --report "$tmp/r.jsonl" > /dev/null 2>&1 && "$CG" demo --iters 3 --report "$tmp/r.jsonl" > /dev/null 2>&1 ||
  { echo "FAIL: demo --report over its own earlier report exited $?"; exit 1; }
[ "$(grep -c '"event":"header"' "$tmp/r.jsonl")" -eq 1 ] || { echo "FAIL: the report was not started afresh"; exit 1; }
for bad in "$tmp/r-%p.jsonl" "$tmp"; do
  "$CG" demo --iters 3 --report "$bad" > "$tmp/out" 2>&1; rc=$?
  [ "$rc" -eq 2 ] && grep -q "want the path of one file" "$tmp/out" ||
    { echo "FAIL: demo --report $bad: exit $rc: $(head -3 "$tmp/out")"; exit 1; }
done
echo "bad --iters refused; a file not a report kept; an old report replaced"
