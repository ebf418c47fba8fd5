#!/bin/sh
# What the program's waits take, eagerly (`cugraft profile`) and under cugraft (`cugraft report`),
# on the fake driver's device timeline: every op FAKECUDA_GPU_NS long on one device, each eager
# launch call spending FAKECUDA_SPIN_NS on the host first, a sync waiting until the device is
# done. syncloop's 5 syncs an iteration each follow 3 to 7 kernels of 200 us launched 100 us
# apart: eagerly the device has run most of them by the sync; deferred into graphs none had
# started, so each wait takes longer by what the deferral exposed (about 100 us a kernel), while
# the launch calls take far less. The waits are counted alike in both, every one timed, and
# those that submitted deferred work apart.
# usage: waits.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 BUILD=$3
fail() { echo "FAIL: $*"; exit 1; }
PROG=$BUILD/tests/programs/syncloop
LIB=$BUILD/shim/libcugraft.so
[ -x "$PROG" ] && [ -f "$LIB" ] && [ -f "$BUILD/tests/fakecuda/libcuda.so.1" ] || exit 77
LD_LIBRARY_PATH=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | grep -v '/fakecupti$' | paste -sd: -)
LD_LIBRARY_PATH=$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH FAKECUDA_SPIN_NS=100000 FAKECUDA_GPU_NS=200000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

eager=$("$CG" profile -- "$PROG" --iters 20) || fail "profile exit $?"
# "  waits  7.1 per iteration (syncs, copies to or from the host), 456.3 us each over the run"
line=$(printf '%s\n' "$eager" | grep '^  waits ') || { printf '%s\n' "$eager"; fail "no waits line"; }
per=$(printf '%s\n' "$line" | awk '{ print $2 }')
e_us=$(printf '%s\n' "$line" | awk '{ for (i = 1; i <= NF; i++) if ($(i + 1) == "each") {
  v = $(i - 1); sub(/,/, "", $i); print ($i == "ms" ? v * 1000 : v); exit } }')
# 5 syncs, an upload and a loss read an iteration, a logging read every 10th
[ "$per" = 7.1 ] || { printf '%s\n' "$eager"; fail "waits per iteration: want 7.1, got '$per'"; }

CUGRAFT_MEASURE=0 CUGRAFT_REPORT=$tmp/r.jsonl LD_PRELOAD=$LIB "$PROG" --iters 20 > /dev/null ||
  fail "syncloop under cugraft exit $?"
report=$("$CG" report "$tmp/r.jsonl") || fail "report exit $?"
# "             its 151 waits (syncs, copies to or from the host) took 109.3 ms, 724.1 us each, ..."
line=$(printf '%s\n' "$report" | grep "^ *its [0-9]* waits (syncs, copies to or from the host) took ") ||
  { printf '%s\n' "$report"; fail "no waits line in the report"; }
c_us=$(printf '%s\n' "$line" | awk '{ for (i = 1; i <= NF; i++) if ($i == "us" && $(i + 1) == "each,") { print $(i - 1); exit } }')
n=$(printf '%s\n' "$line" | awk '{ print $2 }')
want=$(python3 -c 'import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][-1]
print(s["boundaries"].get("sync", 0) + s["boundaries"].get("host_copy", 0))' "$tmp/r.jsonl")
[ "$n" = "$want" ] || fail "waits timed: $n, the program made $want syncs and host copies"
awk -v e="$e_us" -v c="$c_us" 'BEGIN { exit !(e > 0 && c - e >= 150) }' ||
  { printf '%s\n%s\n' "$eager" "$report"; fail "a wait took $e_us us eagerly and $c_us us under cugraft: want it longer by 150 us or more"; }
echo "a wait: $e_us us eagerly, $c_us us with the work deferred to it ($n waits)"
# Some of them submitted the work deferred before them (what had not made a whole chunk by
# then); recording only, none did.
# "             27 of them submitted work deferred before them, 889.1 us each; the others ..."
f=$(printf '%s\n' "$report" | sed -n 's/^ *\([0-9]*\) of them submitted work deferred before them.*/\1/p' | head -1)
[ -n "$f" ] && [ "$f" -gt 0 ] && [ "$f" -lt "$n" ] ||
  { printf '%s\n' "$report"; fail "waits that flushed deferred work: '$f' of $n"; }
CUGRAFT_RECORD_ONLY=1 CUGRAFT_REPORT=$tmp/o.jsonl LD_PRELOAD=$LIB "$PROG" --iters 20 > /dev/null ||
  fail "syncloop recording only exit $?"
only=$("$CG" report "$tmp/o.jsonl") || fail "report exit $?"
printf '%s\n' "$only" | grep -q "^ *0 of them submitted work deferred before them$" ||
  { printf '%s\n' "$only"; fail "recording only, a wait flushed deferred work"; }
echo "$f of the $n waits submitted work deferred before them; recording only, none"
