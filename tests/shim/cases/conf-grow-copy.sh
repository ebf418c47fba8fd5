# a device copy that grows by one block's elements every token, summed by a kernel whose grid
# grows with it (conf_grow --copy): the copy's size is patched into the graph like the kernel's
# shape, so the token replays with no divergence, and every copy moves the bytes asked for
# (same checksum, same work)

eager e "$progs/conf_grow" --copy
shim s "$progs/conf_grow" --copy
same_result e s; same_work e s
ops=$(summary "$tmp/s.jsonl" ops) replayed=$(summary "$tmp/s.jsonl" ops_replayed)
[ "$ops" -gt 0 ] && [ $((replayed * 100)) -ge $((ops * 95)) ] ||
  fail "replayed $replayed of $ops ops, want 95% (fallbacks: $(grep -o '"fallbacks":{[^}]*}' "$tmp/s.jsonl" | tail -1))"
[ "$(summary "$tmp/s.jsonl" divergences)" = 0 ] || fail "$(summary "$tmp/s.jsonl" divergences) divergences"
[ "$(summary "$tmp/s.jsonl" patches)" -ge 380 ] ||
  fail "$(summary "$tmp/s.jsonl" patches) patches, want two per token (the copy and the sum)"
