#!/bin/sh
# Where the shim's report may go (CUGRAFT_REPORT), under a program against the CPU fake driver:
# a FIFO nobody reads and /dev/stderr read by `head -c 100` neither block nor kill the job
# (SIGPIPE); a symbolic link (to a file, or dangling) and a file of another user are refused
# with one warning and left alone; a new report is created 0644 (less the umask); a program
# that closed its stdout keeps its output out of the report; /dev/null means no report.
# usage: report-path.sh CUGRAFT SRCDIR BUILDDIR
set -u
BUILD=$3
LIB=$BUILD/shim/libcugraft.so PROG=$BUILD/tests/programs/fourway
[ -f "$LIB" ] && [ -x "$PROG" ] && [ -d "$BUILD/tests/fakecuda" ] || { echo "shim or fourway not built"; exit 77; }
export LD_LIBRARY_PATH="$BUILD/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fail() { echo "FAIL: $*"; exit 1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
# run NAME REPORT: fourway under the shim, 60 s at most; $T/NAME.{out,err,rc}
run() {
	CUGRAFT_REPORT=$2 LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 40 > "$T/$1.out" 2> "$T/$1.err"
	echo $? > "$T/$1.rc"
}
ok() { # NAME: exited 0 with a checksum, and said one warning naming the report
	[ "$(cat "$T/$1.rc")" = 0 ] || fail "$1: exit $(cat "$T/$1.rc") (124: hung): $(head -3 "$T/$1.err")"
	grep -q '^checksum ' "$T/$1.out" || fail "$1: no checksum"
	n=$(grep -c 'cannot write the report' "$T/$1.err")
	[ "$n" = 1 ] || fail "$1: $n warnings about the report, want 1: $(cat "$T/$1.err")"
}
run plain "$T/plain.jsonl"
[ "$(cat "$T/plain.rc")" = 0 ] || fail "plain report: exit $(cat "$T/plain.rc")"
grep -q '"event":"summary"' "$T/plain.jsonl" || fail "plain report has no summary"
[ "$(stat -c %a "$T/plain.jsonl")" = "$(printf '%o' $((0644 & ~$(umask))))" ] ||
	fail "created with mode $(stat -c %a "$T/plain.jsonl"), umask $(umask)"
want=$(grep '^checksum ' "$T/plain.out")

# A FIFO nobody reads: opening it for writing used to wait forever.
mkfifo "$T/fifo" || fail "mkfifo"
run fifo "$T/fifo"
ok fifo
grep -q "cannot write the report $T/fifo: a FIFO that nobody reads" "$T/fifo.err" || fail "fifo: $(cat "$T/fifo.err")"
[ "$(grep '^checksum ' "$T/fifo.out")" = "$want" ] || fail "fifo: another checksum"
# The summary then goes to stderr.
grep -q 'ops, .* replayed from' "$T/fifo.err" || fail "fifo: no summary on stderr"
echo "a FIFO nobody reads: refused, the job runs"

# A FIFO with a reader gets the records (never waiting for it): this shell holds it open for
# reading (and writing, so that opening does not wait) while the job runs, then reads what the
# pipe holds (the report is smaller than a pipe's 64 KiB).
exec 3<> "$T/fifo"
run fifo2 "$T/fifo"
python3 -c 'import os, sys
os.set_blocking(3, False)
data = b""
while True:
    try:
        chunk = os.read(3, 65536)
    except BlockingIOError:
        break
    data += chunk
sys.stdout.buffer.write(data)' > "$T/fifo.read"
exec 3>&-
[ "$(cat "$T/fifo2.rc")" = 0 ] || fail "fifo with a reader: exit $(cat "$T/fifo2.rc")"
[ ! -s "$T/fifo2.err" ] || fail "fifo with a reader: $(cat "$T/fifo2.err")"
grep -q '"event":"summary"' "$T/fifo.read" || fail "the FIFO's reader got no summary"
echo "a FIFO with a reader gets the report"

# /dev/stderr into `head -c 100`: head leaves after the header's first bytes; later records
# used to kill the job with SIGPIPE (exit 141).
for i in 1 2 3; do
	{ CUGRAFT_REPORT=/dev/stderr LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 200 2>&1 > "$T/head.out"
	  echo $? > "$T/head.rc"; } | head -c 100 > "$T/head.got"
	[ "$(cat "$T/head.rc")" = 0 ] || fail "/dev/stderr | head -c 100: exit $(cat "$T/head.rc") (141: SIGPIPE)"
	grep -q '^{"event":"header"' "$T/head.got" || fail "head did not get the header: $(cat "$T/head.got")"
	grep -q '^checksum ' "$T/head.out" || fail "/dev/stderr | head: no checksum"
done
# /dev/stdout into a file: the records are there, after the program's own lines.
run stdout /dev/stdout
[ "$(cat "$T/stdout.rc")" = 0 ] || fail "/dev/stdout: exit $(cat "$T/stdout.rc")"
grep -q '^{"event":"summary"' "$T/stdout.out" || fail "/dev/stdout: no summary in stdout"
[ ! -s "$T/stdout.err" ] || fail "/dev/stdout: $(cat "$T/stdout.err")"
echo "/dev/stderr read by head -c 100, /dev/stdout to a file"

# A program that closed its stdout: the report must not become its fd 1, or the program's own
# output lands in the report.
CUGRAFT_REPORT=$T/closed.jsonl LD_PRELOAD=$LIB timeout 60 "$PROG" --iters 40 >&- 2> "$T/closed.err"
rc=$?
[ "$rc" = 0 ] || fail "stdout closed: exit $rc: $(head -3 "$T/closed.err")"
bad=$(grep -vc '^{"event":' "$T/closed.jsonl")
[ "$bad" = 0 ] || fail "stdout closed: $bad lines of the program's output in the report: $(grep -v '^{' "$T/closed.jsonl" | head -2)"
grep -q '"event":"summary"' "$T/closed.jsonl" || fail "stdout closed: no summary"
# /dev/null: no report, no warning.
run null /dev/null
[ "$(cat "$T/null.rc")" = 0 ] && [ ! -s "$T/null.err" ] || fail "/dev/null: exit $(cat "$T/null.rc"): $(cat "$T/null.err")"
echo "stdout closed, /dev/null"

# A link to an existing file: refused, the target untouched.
echo precious > "$T/target"
ln -s "$T/target" "$T/link"
run link "$T/link"
ok link
[ "$(cat "$T/target")" = precious ] || fail "the link's target was written: $(head -c 200 "$T/target")"
grep -q "cannot write the report $T/link: it is a symbolic link" "$T/link.err" || fail "link: $(cat "$T/link.err")"
# A dangling link: its target is not created.
ln -s "$T/created" "$T/dangling"
run dangling "$T/dangling"
ok dangling
[ ! -e "$T/created" ] || fail "the dangling link's target was created"
echo "symbolic links refused"

# A file of another user (only root can make one here).
if [ "$(id -u)" = 0 ] && chown 65534 "$T/plain.jsonl" 2> /dev/null; then
	cp "$T/plain.jsonl" "$T/plain.before"
	run other "$T/plain.jsonl"
	ok other
	grep -q "it belongs to another user" "$T/other.err" || fail "other: $(cat "$T/other.err")"
	cmp -s "$T/plain.jsonl" "$T/plain.before" || fail "another user's file was written"
	echo "another user's file refused"
else
	echo "note: not root: another user's file not tried"
fi
