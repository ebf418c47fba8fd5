# the deferral controller times the program's epochs eager and graphed: with each graph launch
# made to cost 2 ms, the program goes eager. The results are exact, and the report has the
# decision and the summary the controller's state.

export CUGRAFT_MEASURE=1
# (an epoch lasts 3 ms at least: the fake's eager iterations take tens of microseconds)
spin=0,2000000 want=eager iters=300
eager e "$progs/fourway" --iters $iters
FAKECUDA_SPIN_NS=$spin shim s "$progs/fourway" --iters $iters
same_result e s; same_work e s
grep -q '"event":"decision"' "$tmp/s.jsonl" || fail "no controller decision in the report"
first=$(grep -m1 '"event":"decision"' "$tmp/s.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decision"])')
[ "$first" = $want ] || fail "first decision $first, want $want: $(grep -m1 '"event":"decision"' "$tmp/s.jsonl")"
mode=$(summary "$tmp/s.jsonl" control.mode)
[ "$mode" = $want ] || fail "the summary's control mode is '$mode', want $want"
[ "$(summary "$tmp/s.jsonl" control.decisions)" -ge 1 ] || fail "the summary counts no decision"
[ "$(summary "$tmp/s.jsonl" fallbacks.measured_eager)" -gt 0 ] || fail "no op ran eagerly by measurement"
