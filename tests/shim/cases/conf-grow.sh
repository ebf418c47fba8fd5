# a decoding loop's grid growing by one block every token (conf_grow): the shapes are patched into
# the graphs, replayed after warmup, every launch run with its own shape (same_work), no
# divergence; a launch the driver refuses returns the same error

eager e "$progs/conf_grow"
shim s "$progs/conf_grow"
same_result e s; same_work e s
r=$(field refused "$tmp/e.out")
[ -n "$r" ] && [ "$r" != 0 ] && [ "$r" = "$(field refused "$tmp/s.out")" ] ||
  fail "a launch the driver refuses returned $(field refused "$tmp/s.out") under the shim, $r without"
ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
[ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
  fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
[ "$(summary "$tmp/s.jsonl" divergences)" = 0 ] || fail "$(summary "$tmp/s.jsonl" divergences) divergences"
[ "$(summary "$tmp/s.jsonl" patches)" -ge 190 ] || fail "$(summary "$tmp/s.jsonl" patches) patches, want one per token"
[ "$(stat graph_launches "$tmp/s.stats")" = "$(summary "$tmp/s.jsonl" graph_launches)" ] ||
  fail "fake saw $(stat graph_launches "$tmp/s.stats") graph launches, shim reported $(summary "$tmp/s.jsonl" graph_launches)"
