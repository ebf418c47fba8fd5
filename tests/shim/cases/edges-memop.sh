# memsets and device copies the driver refuses from iteration 35 on (misaligned, past the end, from
# a freed buffer, past the end of the destination): each call returns what it returns eagerly,
# nothing is deferred that the driver refused, the buffers come out the same

for bad in misaligned past-end freed-src copy-past-end; do
  eager "e-$bad" "$progs/conf_edges" --mode memop --bad "$bad"
  shim "s-$bad" "$progs/conf_edges" --mode memop --bad "$bad"
  same_result "e-$bad" "s-$bad"
  cmp -s "$tmp/e-$bad.out" "$tmp/s-$bad.out" ||
    fail "$bad: the program saw other results: $(diff "$tmp/e-$bad.out" "$tmp/s-$bad.out" | head -4 | tr '\n' ' ')"
  grep -q '^rc 35 ' "$tmp/e-$bad.out" || fail "$bad: the fake accepted the bad call eagerly"
  [ "$(summary "$tmp/s-$bad.jsonl" fallbacks.memop_range)" -gt 0 ] || fail "$bad: no memop_range fallback"
  [ "$(summary "$tmp/s-$bad.jsonl" graph_launches)" -gt 0 ] || fail "$bad: nothing replayed before iteration 35"
done
