# lifetimes: no crash, no hang, report written

eager e "$progs/lifecycle" --mode ctx-destroy
shim s "$progs/lifecycle" --mode ctx-destroy
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
