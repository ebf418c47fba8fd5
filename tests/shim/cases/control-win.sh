# the deferral controller times the program's epochs eager and graphed: with each eager op made to
# cost 100 us of host time, graphs win and stay. The results are exact, and the report has the
# decision and the summary the controller's state.

# (an epoch lasts 3 ms at least: the fake's eager iterations take tens of microseconds; where
# graphs win, they save most of the host's time, and 200 ms run graphed before the probe:
# more than 12,000 of the fake's graphed iterations here)
controlled 100000,0 graphs 40000
share=$(summary "$tmp/s.jsonl" replayed_share)
python3 -c "import sys; sys.exit(0 if $share > 0.5 else 1)" || fail "graphs won but only $share replayed"
