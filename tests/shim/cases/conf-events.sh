# cross-stream ordering through events (conf_events.c): deferring work past an event record, or
# a waiting stream's work ahead of its producer's, changes the checksum. Results and work exact,
# with the hazard met under replay.

eager e "$progs/conf_events"
shim s "$progs/conf_events"
same_result e s; same_work e s
# the hazard must be met under replay
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
[ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
  fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
