# deferred work whose eager submission fails (its graph's memset node refused, then the memset
# itself): the error reaches the program at its next sync, never silence. The fake's 3rd
# cuMemsetD32Async is the first eager submission of a deferred one (the 1st is the program's own,
# the 2nd the graph's capture) as of this commit's learning.

FAKECUDA_FAIL="cuGraphExecMemsetNodeSetParams:1+=1,cuMemsetD32Async:3=1" \
  shim s "$progs/conf_edges" --mode memop --at 1000
[ "$(cat "$tmp/s.rc")" = 0 ] || fail "exited $(cat "$tmp/s.rc"): $(tail -2 "$tmp/s.err")"
[ "$(grep -c '^rc' "$tmp/s.out")" = 1 ] && grep -q '^rc [0-9]* cuStreamSynchronize 1$' "$tmp/s.out" ||
  fail "the failed deferred memset was not returned by one sync: $(grep '^rc' "$tmp/s.out" | head -3 | tr '\n' ' ')"
grep -q 'deferred work failed' "$tmp/s.err" || fail "nothing said on stderr"
