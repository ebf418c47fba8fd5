# start-up made slow (tests/faultalloc: the policy engine's allocation waits 500 ms) while 8
# threads and an observer make their first calls: they wait until the shim is built, so no stream
# runs eagerly for want of an engine ("no_memory"), every launch is seen, and the result is exact

eager e "$progs/threads"
FAULTALLOC_N=1 FAULTALLOC_DELAY_MS=500 lib=$lib:$FAULTALLOC_LIB shim s "$progs/threads"
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" fallbacks.no_memory)" = 0 ] ||
  fail "$(summary "$tmp/s.jsonl" fallbacks.no_memory) ops ran eagerly as no_memory"
[ "$(summary "$tmp/s.jsonl" launches)" = "$(field launches "$tmp/e.out")" ] ||
  fail "shim saw $(summary "$tmp/s.jsonl" launches) launches, the program made $(field launches "$tmp/e.out")"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
