# CUGRAFT_RECORD_ONLY=1, the recording pass-through: nothing deferred or graphed, the same launches
# reach the fake, the result and work exact

eager e "$progs/fourway" --iters 20
CUGRAFT_RECORD_ONLY=1 shim s "$progs/fourway" --iters 20
same_result e s; same_work e s
[ "$(stat launch_eager "$tmp/s.stats")" = "$(stat launch_eager "$tmp/e.stats")" ] || fail "record-only changed eager launches"
[ "$(summary "$tmp/s.jsonl" graph_launches)" = 0 ] || fail "record-only launched graphs"
