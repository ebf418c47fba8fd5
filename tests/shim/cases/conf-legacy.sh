# the legacy default stream ordering a blocking stream's work and its own with no events
# (conf_legacy.c): deferring work across that implicit synchronisation changes the checksum.
# Results and work exact, with the hazard met under replay.

eager e "$progs/conf_legacy"
shim s "$progs/conf_legacy"
same_result e s; same_work e s
# the hazard must be met under replay
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
[ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
  fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
