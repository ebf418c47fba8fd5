# grid and element count changing every 7th iteration, a different last iteration, logging
# kernels every 10th (conf_shapes.c): a graph learned for another shape, or a stale template past
# a divergence, changes the checksum. Results and work exact, with the hazard met under replay.

eager e "$progs/conf_shapes"
shim s "$progs/conf_shapes"
same_result e s; same_work e s
# the hazard must be met under replay
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
[ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
  fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
