# the program destroys a created context mid-run, creates another and goes on (lifecycle --mode
# ctx-destroy): the result and work exact, no crash, no hang, the report written

eager e "$progs/lifecycle" --mode ctx-destroy
shim s "$progs/lifecycle" --mode ctx-destroy
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
