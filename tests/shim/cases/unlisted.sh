# an entry point in no list is default-denied: the work pending at it runs before it, as many
# kernels as without the shim; each such call is counted in the report, and graphs still replay

LOGRUN=1 eager e "$progs/fourway" --iters 30 --unlisted
LOGRUN=1 shim s "$progs/fourway" --iters 30 --unlisted
same_result e s; same_work e s
# kernels run before each unlisted call must be the same as without the shim
before() { awk '/^run /{n++} /^cuCtxGetStreamPriorityRange$/{print n+0}' "$1"; }
[ "$(before "$tmp/e.log")" = "$(before "$tmp/s.log")" ] || fail "work pending at an unlisted call was not flushed first"
[ "$(summary "$tmp/s.jsonl" unclassified_entry_points.cuCtxGetStreamPriorityRange)" = 30 ] ||
  fail "unlisted calls not counted: $(summary "$tmp/s.jsonl" unclassified_entry_points.cuCtxGetStreamPriorityRange)"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
