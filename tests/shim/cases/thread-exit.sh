# exit() from a second thread while main is launching (lifecycle --mode thread-exit): the program
# exits 0 and the report has its summary; how much ran first is timing, not a result

shim s "$progs/lifecycle" --mode thread-exit
[ "$(cat "$tmp/s.rc")" = 0 ] || fail "exited $(cat "$tmp/s.rc"): $(tail -3 "$tmp/s.err")"
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
