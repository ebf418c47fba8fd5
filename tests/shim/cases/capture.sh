# the program captures a graph itself and launches it 10 times (lifecycle --mode capture): the
# result and work exact, no crash, no hang, the report written

eager e "$progs/lifecycle" --mode capture
shim s "$progs/lifecycle" --mode capture
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
