#!/bin/sh
# One report path written by several processes (CUGRAFT_REPORT without %p): `cugraft report`
# separates them by pid and header and merges them as it merges files. Records of an older
# writer (a pid in the header only) in a file of several processes: said on stderr. A RANK that
# is not a number: the shim says so once.
# usage: report-procs.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 BUILD=$3
LIB=$BUILD/shim/libcugraft.so PROG=$BUILD/tests/programs/fourway
[ -f "$LIB" ] && [ -x "$PROG" ] && [ -d "$BUILD/tests/fakecuda" ] || { echo "shim or fourway not built"; exit 77; }
command -v python3 > /dev/null || { echo "python3 missing"; exit 77; }
export LD_LIBRARY_PATH="$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
member() { # FILE KEY: a member of the --json object
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$1" "$2"
}

CUGRAFT_REPORT=$T/one.jsonl LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 40 > /dev/null || fail "one process: exit $?"
"$CG" report --json "$T/one.jsonl" > "$T/one.json" || fail "report of one process: exit $?"
ops=$(member "$T/one.json" ops)

# Eight processes at once, appending to one file.
N=8 i=0
while [ $i -lt $N ]; do
	CUGRAFT_REPORT=$T/shared.jsonl LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 40 > /dev/null &
	i=$((i + 1))
done
wait
[ "$(grep -c '"event":"header"' "$T/shared.jsonl")" = $N ] || fail "not $N headers in the shared file"
"$CG" report --json "$T/shared.jsonl" > "$T/shared.json" 2> "$T/shared.err" || fail "--json: exit $?: $(cat "$T/shared.err")"
[ ! -s "$T/shared.err" ] || fail "--json: stderr: $(cat "$T/shared.err")"
[ "$(member "$T/shared.json" files)" = 1 ] || fail "files: $(cat "$T/shared.json")"
[ "$(member "$T/shared.json" processes)" = $N ] || fail "processes: want $N: $(cut -c1-200 "$T/shared.json")"
[ "$(member "$T/shared.json" ops)" = $((N * ops)) ] ||
	fail "ops: want $N x $ops: $(cut -c1-200 "$T/shared.json")"
"$CG" report "$T/shared.jsonl" > "$T/shared.txt" || fail "text: exit $?"
[ "$(grep -c "^== $T/shared.jsonl, process " "$T/shared.txt")" = $N ] || fail "text: not $N processes: $(grep '^==' "$T/shared.txt")"
grep -q "^== merged: $N processes in 1 file" "$T/shared.txt" || fail "text: no merged section: $(grep '^==' "$T/shared.txt")"
echo "$N processes in one file: separated and merged"

# The same file as an older writer left it (pid only in headers): records are attributed to
# the header before them, and the reader says that this is a guess.
sed '/"event":"header"/!s/"pid":[0-9]*,//' "$T/shared.jsonl" > "$T/old.jsonl"
"$CG" report --json "$T/old.jsonl" > "$T/old.json" 2> "$T/old.err" || fail "old: exit $?"
[ "$(member "$T/old.json" processes)" = $N ] || fail "old: processes: $(cut -c1-200 "$T/old.json")"
grep -q "$T/old.jsonl: .* records carry no pid" "$T/old.err" || fail "old: not said: $(cat "$T/old.err")"
echo "records without a pid in a shared file: said"

# RANK that is not a number: one warning, rank 0 in the header.
RANK=abc CUGRAFT_REPORT=$T/rank.jsonl LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 40 > /dev/null 2> "$T/rank.err"
[ "$(grep -c 'RANK=abc' "$T/rank.err")" = 1 ] || fail "RANK=abc: not one warning: $(cat "$T/rank.err")"
grep -q '"rank":0' "$T/rank.jsonl" || fail "RANK=abc: the header's rank is not 0"
echo "RANK=abc: one warning"

# The same file given twice (or through a link) is read once: its processes counted once.
ln -s "$T/rank.jsonl" "$T/link.jsonl"
n=$("$CG" report --json "$T/rank.jsonl" "$T/rank.jsonl" "$T/link.jsonl" 2> "$T/twice.err" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["processes"])')
[ "$n" = 1 ] || fail "one file named three times: $n processes"
[ "$(grep -c 'again: read once' "$T/twice.err")" = 2 ] || fail "twice: $(cat "$T/twice.err")"
echo "a file named twice: read once"
exit $failed
