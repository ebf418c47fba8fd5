# 8 threads on their per-thread default streams, naps past the deferral bound, thread 0 on the
# legacy stream too, an observer thread polling events: the result and work exact, replays on the
# per-thread streams, and work deferred there flushed from other threads

eager e "$progs/threads" --ptds
shim s "$progs/threads" --ptds
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" ops_replayed)" -gt 0 ] || fail "nothing replayed on per-thread streams"
# deferred work flushed from another thread: the flusher (timeout), or another thread's call
# (stream order: what other streams deferred goes first); which one varies with the
# scheduling. Either may launch a complete chunk as its graph, no op eager: the proxy's wait
# for the owner's fence (cuStreamWaitEvent, which the program never calls) says it came
[ $(( $(summary "$tmp/s.jsonl" fallbacks.timeout) + $(summary "$tmp/s.jsonl" fallbacks.stream_order) +
      $(summary "$tmp/s.jsonl" defer_budget_raises) + $(stat api.cuStreamWaitEvent "$tmp/s.stats") )) -gt 0 ] ||
  fail "no deferred work was flushed by the flusher or another thread"
[ "$(summary "$tmp/s.jsonl" fallbacks.per_thread_stream)" = 0 ] || fail "per-thread streams kept eager"
