#!/bin/sh
# What the shim does when its report path is a hard link, under a program against the CPU fake
# driver: a path with more than one link is refused (like a symbolic link: it may be planted)
# and left alone.
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

exit $failed
