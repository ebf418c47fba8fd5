#!/bin/sh
# docs/report.md documents everything the library writes into a report, read from the sources
# so that a key added there and missing from the page fails: every key a shim writer passes to
# the JSON writer (cg_json_*, cg_*_json*: record names, fields, summary members), the record
# names of shim/backend/events.c's table, the summary counters and ratios of policy/stats.def and the
# fallback reasons of policy/reason.h. On the page each must be a word inside a code span
# (`key`, or a member in `control{mode, phase}`).
# usage: docs-report.sh CUGRAFT SRCDIR BUILDDIR
set -u
SRC=$2
page=$SRC/docs/report.md
[ -f "$page" ] || { echo "FAIL: $page missing"; exit 1; }
writers=$(ls "$SRC"/shim/*/*.c | grep -v '/json\.c$')
keys=$(
  # cg_json_uint(j, "ops", ...), cg_layout_json_top(&j, "kernels", 20), cg_json_begin(j, "vote")
  cat $writers | grep -oE 'cg_[a-z_]*json[a-z_]*\([^,()]*, *"[A-Za-z0-9_]+"' | sed -E 's/.*"(.*)"/\1/'
  # [CG_EV_GRAPH_BUILT] = "graph_built"
  grep -oE '\[CG_EV_[A-Z_]+\] = "[a-z_]+"' "$SRC/shim/backend/events.c" | sed -E 's/.*"(.*)"/\1/'
  # CG_STAT(field, "key", doc) (NULL: not written) and CG_STAT_RATIO("key", num, den)
  grep -oE '^CG_STAT\([a-z_]+, *"[a-z0-9_]+"' "$SRC/policy/stats.def" | sed -E 's/.*"(.*)"/\1/'
  grep -oE '^CG_STAT_RATIO\("[a-z0-9_]+"' "$SRC/policy/stats.def" | sed -E 's/.*"(.*)"/\1/'
  # X(ID, "name", "hint") in CG_REASONS (the first, "none", is never written)
  grep -oE 'X\([A-Z_]+, +"[a-z_]+"' "$SRC/policy/reason.h" | sed -E 's/.*"(.*)"/\1/' | grep -vx none
  # every record's own two members (written by shim/base/json.c)
  echo event; echo t
)
documented=$(grep -o '`[^`]*`' "$page" | grep -oE '[A-Za-z0-9_]+' | sort -u)
n=0 bad=0
for k in $(printf '%s\n' "$keys" | sort -u); do
  n=$((n + 1))
  printf '%s\n' "$documented" | grep -qx "$k" || { echo "FAIL: '$k' is written into reports but not documented in docs/report.md"; bad=1; }
done
[ "$n" -ge 100 ] || { echo "FAIL: only $n keys read from the sources"; exit 1; }
[ $bad -eq 0 ] || exit 1
echo "all $n report keys documented"
