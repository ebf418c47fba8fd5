#!/bin/sh
# `cugraft run --help` lists every CUGRAFT_ variable of shim/base/options.def, read from the table
# itself so that a row added there and missing here fails.
# usage: help.sh CUGRAFT SRCDIR BUILDDIR
set -u
CG=$1 SRC=$2
fail() { echo "FAIL: $*"; exit 1; }
help=$("$CG" run --help) || fail "run --help exited $?"
names=$(grep -o '"CUGRAFT_[A-Z_]*"' "$SRC/shim/base/options.def" | tr -d '"')
n=0
for name in $names; do
	printf '%s\n' "$help" | grep -q "^  $name " || fail "$name missing from cugraft run --help"
	grep -q "^\.B $name\$" "$SRC/tools/cugraft.1" || fail "$name missing from the man page"
	n=$((n + 1))
done
[ "$n" -ge 10 ] || fail "only $n variables found in options.def"
echo "all $n variables listed"
"$CG" --help | grep -q "^  report " || fail "cugraft --help does not list report"
"$CG" frobnicate 2>/dev/null; [ $? -eq 2 ] || fail "unknown command not refused"
