# the program returns from main with work launched and no sync or frees (lifecycle --mode
# exit-no-cleanup): the deferred work still runs, the result and work exact, the report written

eager e "$progs/lifecycle" --mode exit-no-cleanup
shim s "$progs/lifecycle" --mode exit-no-cleanup
same_result e s; same_work e s
grep -q '"event":"summary"' "$tmp/s.jsonl" || fail "no summary in the report"
