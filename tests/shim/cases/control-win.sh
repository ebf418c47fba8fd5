# the deferral controller times the program's epochs eager and graphed: with each eager op made to
# cost 100 us of host time, graphs win and stay. The results are exact, and the report has the
# decision and the summary the controller's state.

export CUGRAFT_MEASURE=1
# (an epoch lasts 3 ms at least: the fake's eager iterations take tens of microseconds; where
# graphs win, they save most of the host's time, and 200 ms run graphed before the probe:
# more than 12,000 of the fake's graphed iterations here)
spin=100000,0 want=graphs iters=40000
eager e "$progs/fourway" --iters $iters
FAKECUDA_SPIN_NS=$spin shim s "$progs/fourway" --iters $iters
same_result e s; same_work e s
grep -q '"event":"decision"' "$tmp/s.jsonl" || fail "no controller decision in the report"
first=$(grep -m1 '"event":"decision"' "$tmp/s.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decision"])')
[ "$first" = $want ] || fail "first decision $first, want $want: $(grep -m1 '"event":"decision"' "$tmp/s.jsonl")"
mode=$(summary "$tmp/s.jsonl" control.mode)
[ "$mode" = $want ] || fail "the summary's control mode is '$mode', want $want"
[ "$(summary "$tmp/s.jsonl" control.decisions)" -ge 1 ] || fail "the summary counts no decision"
share=$(summary "$tmp/s.jsonl" replayed_share)
python3 -c "import sys; sys.exit(0 if $share > 0.5 else 1)" || fail "graphs won but only $share replayed"
