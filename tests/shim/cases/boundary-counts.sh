# the report counts every boundary call the program made, those forwarded while every stream was
# settled (boundary.c) as those that took the full path: per entry point and per kind, equal to the
# calls the fake saw without the shim (conf_events records events on settled and on unsettled
# streams; threads does from 8 threads; lifecycle launches its own graph)

for p in conf_events threads; do
  eager e "$progs/$p"
  shim s "$progs/$p"
  same_result e s
  for ep in cuEventRecord cuStreamWaitEvent cuStreamSynchronize; do
    want=$(stat "api.$ep" "$tmp/e.stats")
    [ "$(summary "$tmp/s.jsonl" "entry_points.$ep")" = "${want:-0}" ] ||
      fail "$p: $ep counted $(summary "$tmp/s.jsonl" "entry_points.$ep"), the program made ${want:-0}"
  done
  rec=$(stat api.cuEventRecord "$tmp/e.stats") wait=$(stat api.cuStreamWaitEvent "$tmp/e.stats")
  want=$(( ${rec:-0} + ${wait:-0} ))
  [ "$(summary "$tmp/s.jsonl" boundaries.event)" = "$want" ] ||
    fail "$p: $(summary "$tmp/s.jsonl" boundaries.event) event boundaries counted, the program made $want"
done
# the program's own graph launched 10 times on a settled stream (a hook, not a boundary wrapper)
eager e "$progs/lifecycle" --mode capture
shim s "$progs/lifecycle" --mode capture
same_result e s
want=$(stat api.cuGraphLaunch "$tmp/e.stats")
[ "$(summary "$tmp/s.jsonl" entry_points.cuGraphLaunch)" = "${want:-0}" ] ||
  fail "capture: cuGraphLaunch counted $(summary "$tmp/s.jsonl" entry_points.cuGraphLaunch), the program made ${want:-0}"
want=$(( want + $(stat api.cuStreamBeginCapture_v2 "$tmp/e.stats") ))
[ "$(summary "$tmp/s.jsonl" boundaries.capture)" = "$want" ] ||
  fail "capture: $(summary "$tmp/s.jsonl" boundaries.capture) capture boundaries counted, the program made $want"
