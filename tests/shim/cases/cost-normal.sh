# graphs faster than eager: chunks are timed a few times, then replay with no event calls at all
# (none in the second half of the run); nothing gated. (Eager samples taken from learning
# sightings are policy_engine's tests: here chunks are mostly armed from the loop's sightings,
# with no learning sighting between, so whether one comes depends on where op hashes fall.)

export CUGRAFT_MAX_DEFER_US=10000000 CUGRAFT_WARMUP=3
eager e "$progs/fourway" --iters 80
LOGRUN=1 shim s "$progs/fourway" --iters 80
same_result e s; same_work e s
! grep -q cost_gate "$tmp/s.jsonl" || fail "a chunk was gated although its graph is faster"
[ "$(stat api.cuEventElapsedTime_v2 "$tmp/s.stats")" -gt 0 ] || fail "no timing sample was read"
[ "$(in_second_half '^cuGraphLaunch' "$tmp/s.log")" -gt 0 ] || fail "replay did not go on in the second half"
timing='^cuEvent(Record|Query|ElapsedTime)'  # (the events are destroyed at exit)
[ "$(in_second_half "$timing" "$tmp/s.log")" = 0 ] ||
  fail "timing never stops: $(in_second_half "$timing" "$tmp/s.log") event calls in the second half"
