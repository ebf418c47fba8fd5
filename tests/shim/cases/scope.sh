# CUGRAFT_SCOPE: the kernels, memops and streams it excludes run eagerly, in order, the result
# exact; the rest is still graphed

eager e "$progs/fourway" --iters 30
CUGRAFT_SCOPE=-cg_chain shim s "$progs/fourway" --iters 30
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" fallbacks.scope)" -gt 0 ] || fail "-cg_chain excluded nothing"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "-cg_chain stopped all graphs"
CUGRAFT_SCOPE=streams=999 shim s2 "$progs/fourway" --iters 30
same_result e s2
[ "$(summary "$tmp/s2.jsonl" graph_launches)" = 0 ] || fail "streams=999 still graphed"
CUGRAFT_SCOPE=memops shim s3 "$progs/fourway" --iters 30
same_result e s3
[ "$(summary "$tmp/s3.jsonl" fallbacks.scope)" -ge "$(field launches "$tmp/e.out")" ] ||
  fail "kernels graphed although CUGRAFT_SCOPE=memops"
