# the flusher sleeps while nothing is deferred: lifecycle --mode idle (10 rounds of launches and a
# sync, then 0.5 s with no driver call) wakes it at most 6 times a round (the round's deferral, its
# deadline, 4 quiet polls), also with deferral bounds of 4 s and more (whose sleeps once all failed
# at once: a spinning core)

eager e "$progs/lifecycle" --mode idle
for d in 2000 4000000 10000000; do
  rm -f "$tmp/s.jsonl"
  CUGRAFT_MAX_DEFER_US=$d shim s "$progs/lifecycle" --mode idle
  same_result e s; same_work e s
  w=$(summary "$tmp/s.jsonl" flusher_wakeups)
  [ "$w" -gt 0 ] && [ "$w" -le 60 ] || fail "CUGRAFT_MAX_DEFER_US=$d: the flusher woke $w times"
done
