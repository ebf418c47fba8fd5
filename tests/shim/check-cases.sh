#!/bin/bash
# The shim cases tests/shim/meson.build registers against the files in cases/: every file there
# must be a case meson.build names (meson cannot glob: a file left out of its lists never runs),
# and every case it names must have its file, once.
# usage: check-cases.sh CASEDIR CASEFILE...   (the files of the cases meson.build names)
set -u
dir=$1; shift
status=0
declare -A named
for f in "$@"; do
  n=$(basename "$f" .sh)
  [ -f "$f" ] || { echo "FAIL: case $n is named in tests/shim/meson.build, but $f is missing"; status=1; }
  [ -z "${named[$n]:-}" ] || { echo "FAIL: case $n is named twice in tests/shim/meson.build"; status=1; }
  named[$n]=1
done
for f in "$dir"/*; do
  n=$(basename "$f")
  case $n in
  *.sh) [ -n "${named[${n%.sh}]:-}" ] ||
          { echo "FAIL: $f is a case no list in tests/shim/meson.build names: it never runs"; status=1; } ;;
  *) echo "FAIL: $f: case files end in .sh"; status=1 ;;
  esac
done
[ $status = 0 ] && echo "ok: ${#named[@]} cases named, each with its file in $dir"
exit $status
