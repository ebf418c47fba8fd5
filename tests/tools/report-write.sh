#!/bin/sh
# What the shim does when its report path is a hard link, or the report cannot be written to the
# end, under a program against the CPU fake driver: a path with more than one link is refused
# (like a symbolic link: it may be planted) and left alone; after a write fails, the summary on
# stderr says the report is incomplete. The failure is the file size limit (EFBIG, SIGXFSZ
# ignored): the same write error path as a full disk (ENOSPC), without a tiny file system.
# usage: report-write.sh CUGRAFT SRCDIR BUILDDIR
set -u
BUILD=$3
LIB=$BUILD/shim/libcugraft.so PROG=$BUILD/tests/programs/fourway
[ -f "$LIB" ] && [ -x "$PROG" ] && [ -d "$BUILD/tests/fakecuda" ] || { echo "shim or fourway not built"; exit 77; }
export LD_LIBRARY_PATH="$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT

# A hard link to an existing file: refused with one warning, the file untouched.
echo precious > "$T/target"
ln "$T/target" "$T/hard"
CUGRAFT_REPORT=$T/hard LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 40 > "$T/hard.out" 2> "$T/hard.err"
rc=$?
[ "$rc" = 0 ] || fail "hard link: exit $rc: $(head -3 "$T/hard.err")"
[ "$(cat "$T/target")" = precious ] || fail "the hard link's file was written: $(head -c 200 "$T/target")"
grep -q "cannot write the report $T/hard: it has 2 hard links" "$T/hard.err" ||
	fail "hard link not refused: $(cat "$T/hard.err")"
[ "$(grep -c 'cannot write the report' "$T/hard.err")" = 1 ] || fail "hard link: not one warning: $(cat "$T/hard.err")"
echo "a hard link refused"

# A report cut by a failed write: the warning, then the summary naming the report incomplete.
# Only the report is a regular file under the limit (the program's output goes to pipes).
(trap '' XFSZ; ulimit -f 1; CUGRAFT_REPORT=$T/full.jsonl LD_PRELOAD=$LIB exec timeout 60 "$PROG" --iters 40) \
	2>&1 > /dev/null | cat > "$T/full.err"
grep -q "writing the report $T/full.jsonl failed" "$T/full.err" || fail "no write failure: $(cat "$T/full.err")"
grep -q "ops, .* replayed from" "$T/full.err" || fail "no summary on stderr: $(cat "$T/full.err")"
grep -q "report: $T/full.jsonl (incomplete: a write failed" "$T/full.err" ||
	fail "the summary does not say the report is incomplete: $(cat "$T/full.err")"
echo "a failed write: the summary says the report is incomplete"
exit $failed
