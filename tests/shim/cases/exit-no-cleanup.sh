# lifetimes: no crash, no hang, report written

eager e "$progs/lifecycle" --mode exit-no-cleanup
shim s "$progs/lifecycle" --mode exit-no-cleanup
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
