#!/bin/sh
# `cugraft report` on input that is not a report, or is one with a wrongly typed field: a
# directory, an empty file and a file without cugraft records exit non-zero with a message
# naming the file; an endless line (/dev/zero) stops at the line limit, in bounded memory, with
# a message; a summary member that should be a number and is not is named, not taken for a
# missing summary.
# usage: report-input.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1
failed=0
fail() { echo "FAIL: $*"; failed=1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
# refused NAME FILE MESSAGE: text and --json exit non-zero, stderr says MESSAGE
refused() {
	for mode in "" --json; do
		"$CG" report $mode "$2" > "$T/out" 2> "$T/err"
		rc=$?
		[ "$rc" != 0 ] || fail "$1${mode:+ $mode}: exit 0: $(head -3 "$T/out")"
		grep -qF -- "$3" "$T/err" || fail "$1${mode:+ $mode}: stderr without \"$3\": $(head -3 "$T/err")"
	done
}
mkdir "$T/dir"
refused directory "$T/dir" "$T/dir: is a directory"
: > "$T/empty"
refused "empty file" "$T/empty" "$T/empty: empty: no cugraft records"
printf 'hello\n{"a":1}\n' > "$T/text"
refused "no records" "$T/text" "$T/text: no cugraft records in 2 lines"
echo "a directory, an empty file, a file without records: refused"

# /dev/zero is one endless line. The limit on memory (where the build allows one: sanitizers
# reserve more) turns unbounded growth into a failure rather than a stalled machine.
limit=
(ulimit -v 2000000 && "$CG" --help) > /dev/null 2>&1 && limit="ulimit -v 2000000"
(${limit:-:}; exec timeout 30 "$CG" report /dev/zero) > "$T/out" 2> "$T/err"
rc=$?
[ "$rc" = 1 ] || fail "/dev/zero: exit $rc (124: ran 30 s), want 1: $(head -c 300 "$T/err")"
grep -q "/dev/zero:1: a line longer than 64 MiB" "$T/err" || fail "/dev/zero: $(head -c 300 "$T/err")"
echo "/dev/zero: stopped at the line limit"

# A summary whose "ops" is a string.
printf '{"event":"header","t":0,"pid":1,"rank":0}\n{"event":"summary","t":1,"pid":1,"ops":"12","launches":3}\n' > "$T/typed"
"$CG" report "$T/typed" > "$T/out" 2> "$T/err"
rc=$?
[ "$rc" = 1 ] || fail "typed: exit $rc, want 1"
grep -q "$T/typed:2: the summary's \"ops\" is a string, not a number" "$T/err" || fail "typed: stderr: $(cat "$T/err")"
grep -q "no summary record" "$T/out" && fail "typed: taken for a missing summary: $(cat "$T/out")"
grep -q "the summary's \"ops\" is not a number" "$T/out" || fail "typed: $(cat "$T/out")"
echo "a wrongly typed summary field: named"

# Summary members of other shapes: a list for an object of counts, a count that is no number,
# an object for a list. Each is named; the exit status says so.
for bad in '"fallbacks":[1,2]|"fallbacks" is an array, not an object' \
           '"fallbacks":{"learning":"x"}|"fallbacks" has "learning" a string, not a number' \
           '"kernels":{"a":1}|"kernels" is an object, not an array' \
           '"control":"graphs"|"control" is a string, not an object'; do
  member=${bad%%|*} said=${bad#*|}
  printf '{"event":"header","t":0,"pid":1,"rank":0}\n{"event":"summary","t":1,"pid":1,"ops":12,"launches":3,%s}\n' \
    "$member" > "$T/shaped"
  "$CG" report "$T/shaped" > "$T/out" 2> "$T/err"
  rc=$?
  [ "$rc" = 1 ] || fail "$member: exit $rc, want 1"
  grep -qF "$T/shaped:2: the summary's $said" "$T/err" || fail "$member: stderr: $(cat "$T/err")"
done
echo "summary members of the wrong shape: named"
exit $failed
