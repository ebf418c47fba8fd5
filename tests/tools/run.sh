#!/bin/sh
# `cugraft run`: exit codes (0, 3, 42) and a signal death (SIGTERM -> 143) come through, flags
# become CUGRAFT_* variables, the library is prepended to LD_PRELOAD, bad flag values are refused.
# The command runs from a copy of the build layout whose "libcugraft.so" is the C library (a
# harmless preload), so the launcher is tested without the shim; with the real shim built, the
# exit-code checks are repeated under it.
# usage: run.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 BUILD=$3
fail() { echo "FAIL: $*"; exit 1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tools" "$T/shim"
cp "$CG" "$T/tools/cugraft"
LIBC=$(ldd "$CG" | awk '/libc\.so/ { print $3 }')
[ -f "$LIBC" ] || fail "could not find the C library to stand in for the shim"
cp "$LIBC" "$T/shim/libcugraft.so"

check_codes() {   # $1: cugraft to use
	for code in 0 3 42; do
		"$1" run -- sh -c "exit $code"; rc=$?
		[ "$rc" -eq "$code" ] || fail "$1: exit $code came back as $rc"
	done
	"$1" run -- sh -c 'kill -TERM $$'; rc=$?
	[ "$rc" -eq 143 ] || fail "$1: SIGTERM death came back as $rc, want 143"
	"$1" run -- sh -c 'kill -KILL $$'; rc=$?
	[ "$rc" -eq 137 ] || fail "$1: SIGKILL death came back as $rc, want 137"
}
check_codes "$T/tools/cugraft"
echo "exit codes and signal deaths pass through"

# A sanitized build's runtime stays first for the command itself (tests/meson.build).
RT=${CG_SANITIZER_RT:+$CG_SANITIZER_RT:}
out=$(env -u CUGRAFT_REPORT LD_PRELOAD="$RT$LIBC" "$T/tools/cugraft" run --warmup 11 --chunk=2k \
	--scope +collectives --log info --disable --audit --record-only -- \
	sh -c 'echo "$CUGRAFT_WARMUP|$CUGRAFT_CHUNK|$CUGRAFT_SCOPE|$CUGRAFT_LOG|$CUGRAFT_DISABLE|$CUGRAFT_AUDIT|$CUGRAFT_RECORD_ONLY|$CUGRAFT_REPORT|$LD_PRELOAD"' 2>&1)
want="11|2k|+collectives|info|1|1|1|cugraft-%p.jsonl|$T/shim/libcugraft.so:$RT$LIBC"
[ "$out" = "$want" ] || fail "environment: got '$out', want '$want'"
out=$(CUGRAFT_REPORT=mine.jsonl "$T/tools/cugraft" run --report r-%r.jsonl -- sh -c 'echo $CUGRAFT_REPORT')
[ "$out" = "r-%r.jsonl" ] || fail "--report: got '$out'"
out=$(CUGRAFT_REPORT= "$T/tools/cugraft" run -- sh -c 'echo "[$CUGRAFT_REPORT]"')
[ "$out" = "[]" ] || fail "an empty CUGRAFT_REPORT must stay empty, got '$out'"
echo "flags set the environment"

for bad in "--warmup abc" "--chunk 0" "--chunk 12Q" "--log loud" "--scope kernel" "--bogus"; do
	# shellcheck disable=SC2086
	"$T/tools/cugraft" run $bad -- true 2>/dev/null; rc=$?
	[ "$rc" -eq 2 ] || fail "'run $bad' exited $rc, want 2"
done
# CUGRAFT_LIBRARY naming a file that is no shared library: refused, not passed to ld.so (which
# would ignore it and run the job without cugraft)
err=$(CUGRAFT_LIBRARY=/etc/passwd "$T/tools/cugraft" run -- true 2>&1); rc=$?
[ "$rc" -eq 1 ] && printf '%s\n' "$err" | grep -q "CUGRAFT_LIBRARY=/etc/passwd is no shared library" ||
	fail "CUGRAFT_LIBRARY=/etc/passwd: exit $rc: $err"
long=$(printf 'q%.0s' $(seq 1100))
"$T/tools/cugraft" run --report "$long.jsonl" -- true 2>/dev/null; rc=$?
[ "$rc" -eq 2 ] || fail "'run --report' with a 1106-character path exited $rc, want 2"
"$T/tools/cugraft" run -- /nonexistent/cmd 2>/dev/null; rc=$?
[ "$rc" -eq 127 ] || fail "missing command exited $rc, want 127"
"$T/tools/cugraft" run 2>/dev/null; rc=$?
[ "$rc" -eq 2 ] || fail "no command exited $rc, want 2"
echo "bad flags refused"

rm "$T/shim/libcugraft.so"
"$T/tools/cugraft" run -- true 2>/dev/null; rc=$?
[ "$rc" -ne 0 ] || fail "ran without the library"

if [ -f "$BUILD/shim/libcugraft.so" ]; then
	check_codes "$CG"
	echo "exit codes pass through the real shim too"
else
	echo "note: libcugraft.so not built; the real-shim pass was not run"
fi
