#!/bin/sh
# docs/configuration.md documents every row of shim/base/options.def with its default: a variable
# missing from the page's table, or listed with another default, fails. An empty default is
# written "(empty)".
# usage: docs-options.sh CUGRAFT SRCDIR BUILDDIR
set -u
SRC=$2
page=$SRC/docs/configuration.md
[ -f "$page" ] || { echo "FAIL: $page missing"; exit 1; }
# X(id, "CUGRAFT_NAME", KIND, "default", ...): one "NAME DEFAULT" line each (rows span two lines)
rows=$(tr '\n' ' ' < "$SRC/shim/base/options.def" |
  grep -o 'X([A-Z_]*, *"CUGRAFT_[A-Z_]*", *[A-Z]*, *"[^"]*"' |
  sed 's/^X([A-Z_]*, *"\(CUGRAFT_[A-Z_]*\)", *[A-Z]*, *"\([^"]*\)"$/\1 \2/')
n=0 bad=0
while read -r name def; do
  [ -n "$name" ] || continue
  n=$((n + 1))
  [ -n "$def" ] || def="(empty)"
  # the table row: | `NAME` | DEFAULT | ...
  got=$(grep "^| \`$name\` |" "$page" | head -1 | awk -F'|' '{ gsub(/^ +| +$|`/, "", $3); print $3 }')
  if [ -z "$got" ]; then
    echo "FAIL: $name (shim/base/options.def) has no row in docs/configuration.md"; bad=1
  elif [ "$got" != "$def" ]; then
    echo "FAIL: $name: docs/configuration.md says default '$got', shim/base/options.def says '$def'"; bad=1
  fi
done <<ROWS
$rows
ROWS
[ "$n" -ge 10 ] || { echo "FAIL: only $n options read from shim/base/options.def"; exit 1; }
[ $bad -eq 0 ] || exit 1
echo "all $n options documented with their defaults"
