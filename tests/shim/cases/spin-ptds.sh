# the host spins on memory a deferred kernel writes on its per-thread stream: the flusher must
# submit it (lifecycle exits 3 after 5 s otherwise, as it does with CUGRAFT_MAX_DEFER_US=10000000),
# through the proxy stream, and the program thread's stream must catch up before its next use

eager e "$progs/lifecycle" --mode spin-ptds
LOGRUN=1 shim s "$progs/lifecycle" --mode spin-ptds
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" fallbacks.timeout)" -gt 0 ] || fail "no deferred work timed out"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
# The flusher cannot name the program thread's per-thread stream: it makes the proxy wait
# for the fence, submits there, records the handback; the program thread's next call
# (a sync: the program calls no cuStreamWaitEvent itself) first waits for the handback.
verdict=$(awk '/^cuStreamWaitEvent/ { if (st == 2) { st = 0; done++ } else st = 1; next }
  st == 1 && /^cuEventRecord/ { st = 2; next }
  st == 2 && /^cuStreamSynchronize|^cuLaunchKernel$/ { bad++ }
  END { print (done > 0 && !bad) ? "ok" : "redirects " done + 0 ", used before catching up " bad + 0 }' "$tmp/s.log")
[ "$verdict" = ok ] || fail "per-thread stream hand-over: $verdict"
