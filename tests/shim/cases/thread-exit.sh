# exit() from a second thread mid-launch: how much ran first is timing, not a result

shim s "$progs/lifecycle" --mode thread-exit
[ "$(cat "$tmp/s.rc")" = 0 ] || fail "exited $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
