# CUDA_LAUNCH_BLOCKING=1: every launch has completed when it returns, so a host reading mapped
# memory right after it sees its write; cugraft defers nothing then, and says so

eager e "$progs/conf_edges" --mode blocking
CUDA_LAUNCH_BLOCKING=1 shim s "$progs/conf_edges" --mode blocking
shim d "$progs/conf_edges" --mode blocking
same_result e s
[ "$(field stale "$tmp/e.out")" = 0 ] || fail "eager read $(field stale "$tmp/e.out") stale values"
[ "$(field stale "$tmp/s.out")" = 0 ] || fail "with CUDA_LAUNCH_BLOCKING=1, $(field stale "$tmp/s.out") stale reads"
[ "$(field stale "$tmp/d.out")" -gt 0 ] || fail "deferred launches were never read stale: the test shows nothing"
grep -q '"startup_checks":\["CUDA_LAUNCH_BLOCKING' "$tmp/s.jsonl" || fail "the report header does not say it"
grep -q 'CUDA_LAUNCH_BLOCKING' "$tmp/s.err" || fail "stderr does not say it"
