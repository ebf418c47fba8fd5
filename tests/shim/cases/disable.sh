# CUGRAFT_DISABLE=1: a pure pass-through, no report, the fake sees the same driver calls; programs
# whose first wrapped call is a plain linked one (no dlsym, no cuGetProcAddress) give the same
# result

eager e "$progs/fourway" --iters 20
CUGRAFT_DISABLE=1 shim s "$progs/fourway" --iters 20
same_result e s; same_work e s
diff <(grep '^api\.' "$tmp/e.stats") <(grep '^api\.' "$tmp/s.stats") > /dev/null || fail "disabled shim changed driver calls"
[ ! -s "$tmp/s.jsonl" ] || fail "disabled shim wrote a report"
# programs whose first wrapped call is a plain linked one (no dlsym, no cuGetProcAddress)
for m in exit-no-cleanup ctx-destroy; do
  eager e2 "$progs/lifecycle" --mode $m
  CUGRAFT_DISABLE=1 shim s2 "$progs/lifecycle" --mode $m
  same_result e2 s2
done
