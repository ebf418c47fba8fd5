# the deferral controller times the program's epochs eager and graphed: with each graph launch
# made to cost 2 ms, the program goes eager. The results are exact, and the report has the
# decision and the summary the controller's state.

# (an epoch lasts 3 ms at least: the fake's eager iterations take tens of microseconds)
controlled 0,2000000 eager 300
[ "$(summary "$tmp/s.jsonl" fallbacks.measured_eager)" -gt 0 ] || fail "no op ran eagerly by measurement"
