# one hazard each (conf_*.c)

prog=$progs/conf_${case_name#conf-}
eager e "$prog"
shim s "$prog"
same_result e s; same_work e s
case $case_name in conf-events|conf-shapes|conf-legacy) # the hazard must be met under replay
  [ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
  [ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
    fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
esac
