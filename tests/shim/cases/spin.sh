# the host spins on memory a deferred kernel writes: the flusher must submit it (lifecycle exits 3
# after 5 s otherwise, as it does with CUGRAFT_MAX_DEFER_US=10000000)

eager e "$progs/lifecycle" --mode spin
LOGRUN=1 shim s "$progs/lifecycle" --mode spin
same_result e s; same_work e s
[ "$(summary "$tmp/s.jsonl" fallbacks.timeout)" -gt 0 ] || fail "no deferred work timed out"
[ "$(summary "$tmp/s.jsonl" graph_launches)" -gt 0 ] || fail "no graph was launched"
