# lifetimes: no crash, no hang, report written

eager e "$progs/lifecycle" --mode "$case_name"
shim s "$progs/lifecycle" --mode "$case_name"
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
