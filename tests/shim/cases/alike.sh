# two chunks of a step that begin with the same kernel, the first step's first launch of an
# unproven shape: each chunk is learned at its first sighting and runs as its graph from its second
# (held as it comes for whichever of the two was learned last), so every op from the second step on
# replays: all but the 2 ops before the loop and the first step's 17

eager e "$progs/alike"
# a deferral budget of a second, so that a slow machine's flusher never releases a hold
CUGRAFT_MAX_DEFER_US=1000000 shim s "$progs/alike"
same_result e s; same_work e s
ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
[ "$ops" -gt 19 ] && [ "$replayed" = $((ops - 19)) ] ||
  fail "replayed $replayed of $ops ops, want $((ops - 19)) (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
[ "$(summary "$tmp/s.jsonl" divergences)" = 0 ] || fail "$(summary "$tmp/s.jsonl" divergences) divergences"
