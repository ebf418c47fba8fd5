# the same arguments each iteration, other stack bytes in the padding between parameters: replays
# patch nothing (the padding is neither read from the program nor compared)

eager e "$progs/lifecycle" --mode padding
shim s "$progs/lifecycle" --mode padding
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
[ "$(summary "$tmp/s.jsonl" patches)" = 0 ] ||
  fail "$(summary "$tmp/s.jsonl" patches) patches of unchanged arguments (fake: $(stat api.cuGraphExecKernelNodeSetParams_v2 "$tmp/s.stats") kernel node updates)"
