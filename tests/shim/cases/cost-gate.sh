# graphs slower than eager on the fake's simulated GPU clock (FAKECUDA_GRAPH_SLOW=1): the timed
# chunks are disabled (cost_gate) and replay no more; results and work exact. Chunk cuts hash
# per-process handles, so runs differ: each claim is checked inside one run's call log (half: the
# second half of its kernel runs).

export CUGRAFT_MAX_DEFER_US=10000000
eager e "$progs/fourway" --iters 80
FAKECUDA_GRAPH_SLOW=1 LOGRUN=1 shim s "$progs/fourway" --iters 80
same_result e s; same_work e s
[ "$(stat memops_run "$tmp/s.stats")" = "$(stat memops_run "$tmp/e.stats")" ] ||
  fail "memops run: e=$(stat memops_run "$tmp/e.stats") s=$(stat memops_run "$tmp/s.stats")"
gated=$(grep -c '"event":"chunk_disabled".*"reason":"cost_gate"' "$tmp/s.jsonl")
[ "$gated" -gt 0 ] || fail "no chunk disabled by the cost gate"
[ "$(in_second_half '^cuGraphLaunch' "$tmp/s.log")" = 0 ] ||
  fail "gated chunks kept replaying: $(in_second_half '^cuGraphLaunch' "$tmp/s.log") graph launches in the second half"
