# lifetimes: no crash, no hang, report written

eager e "$progs/lifecycle" --mode capture
shim s "$progs/lifecycle" --mode capture
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
